"""``infai --remote URL search | compact | session context|files|diff|checkout|export``.

The remote forms of the commands that read a session's text, files and export,
or compact it, beside those of :mod:`.remote` (``run``, ``session
ls|log|tree|show``), and the root's dispatch to all of them
(:func:`remote_command`). Each prints what the local command prints over the
same store: the server answers in the object the local command computes (the
search's hits, the files at an event, a diff, a checkout's plan and notices, a
compaction's event, the export's bytes), and the same functions print it
(:func:`.search.say_results`, :func:`.workfiles.say_files`, ...). What the
server cannot do for a client is refused by name: ``search --rebuild`` (the
index is the server's to rebuild), ``compact --model``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click

from infai.store import NIL_ID

from .. import render
from .common import echo, emit_json, json_option
from .errors import BadInput
from .remote import (
    REMOTE_FORMS,
    RemoteFailure,
    event_arg,
    guard,
    remote_answer,
    remote_of,
    remote_run,
    remote_session,
    session_arg,
)
from .search import say_results, search_options

# -- search ----------------------------------------------------------------------------

#: the most hits the server sends for one search (its ``MAX_LIMIT``): a larger
#: ``--limit`` asks for these, and says so when they are all there are
SERVER_LIMIT = 200


@click.command("search")
@search_options("Not remotely: the index is the server's.")
@click.pass_context
def remote_search(
    ctx: click.Context,
    query: str | None,
    session_id: str | None,
    working_dir: str | None,
    kind: str | None,
    limit: int,
    rebuild: bool,
    as_json: bool,
) -> None:
    """Search the server's sessions, as `infai search` does."""
    from infai.store import DamagedSession, SearchHit, SearchResults

    if rebuild:
        raise BadInput("`infai search --rebuild` does not work with --remote: run it on the server")
    if query is None:
        raise click.UsageError("Missing argument 'QUERY'.")
    if not query.strip():  # in the store's words, as the local command says it
        raise BadInput(f"search query {query!r}: nothing to search for")
    session_id = session_id and session_arg(session_id)
    asked = min(limit, SERVER_LIMIT)
    params = {"q": query, "session": session_id, "dir": working_dir, "kind": kind, "limit": asked}
    answer = guard(lambda: remote_of(ctx).get("/search", **params))
    hits = SearchResults(
        (
            SearchHit(**{**hit, "marks": [(int(a), int(b)) for a, b in hit["marks"]]})
            for hit in answer["hits"]
        ),
        answer.get("window"),
        (DamagedSession(**d) for d in answer.get("damaged") or ()),
    )
    say_results(hits, query, as_json)
    if limit > asked and len(hits) == asked:
        echo(f"infai: the server sends at most {asked} hits: the best {asked} are shown", err=True)


# -- compact ---------------------------------------------------------------------------


@click.command("compact")
@click.argument("session_id", metavar="SESSION")
@json_option
@click.pass_context
def remote_compact(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Summarise the server's session now (its own model), as `infai compact` does."""
    from infai.shells.remote import RemoteError, event_of

    path = f"/sessions/{session_arg(session_id)}/compact"
    client = remote_of(ctx)
    try:
        obj = client.post(path)
    except RemoteError as exc:
        if exc.status == 422:  # the summary could not be made: as locally, a failure
            raise RemoteFailure(f"compaction failed, nothing changed: {exc}") from exc
        raise remote_answer(exc) from exc
    event = event_of(obj)
    if as_json:
        emit_json(render.event_json(event))
    else:
        echo(event.id)


# -- context ---------------------------------------------------------------------------


@remote_session.command("context")
@click.argument("session_id", metavar="SESSION")
@click.option("--at", help="Rebuild the context at this event instead of HEAD.")
@click.option("--explain", is_flag=True, help="Not remotely: run it on the server.")
@json_option
@click.pass_context
def remote_context(
    ctx: click.Context, session_id: str, at: str | None, explain: bool, as_json: bool
) -> None:
    """The active context on the server, as `infai session context` prints it."""
    from infai.shells.remote import event_of

    if explain:
        raise BadInput(
            "`infai session context --explain` does not work with --remote: run it on the server"
        )
    path, at = f"/sessions/{session_arg(session_id)}/context", event_arg(at)
    events = [event_of(obj) for obj in guard(lambda: remote_of(ctx).get(path, at=at))["events"]]
    if as_json:
        emit_json([render.event_json(e) for e in events])
        return
    for event in events:
        echo(render.event_text(event))
        echo()


# -- files on the timeline -------------------------------------------------------------


@remote_session.command("files")
@click.argument("session_id", metavar="SESSION")
@click.argument("event_id", metavar="EVENT", required=False)
@json_option
@click.pass_context
def remote_files(ctx: click.Context, session_id: str, event_id: str | None, as_json: bool) -> None:
    """The files recorded at EVENT on the server, as `infai session files` lists them."""
    from .workfiles import say_files

    path, event_id = f"/sessions/{session_arg(session_id)}/files", event_arg(event_id)
    got = guard(lambda: remote_of(ctx).get(path, event=event_id))
    say_files(got, as_json)


@remote_session.command("diff")
@click.argument("session_id", metavar="SESSION")
@click.argument("from_event", metavar="FROM")
@click.argument("to_event", metavar="TO", required=False)
@json_option
@click.pass_context
def remote_diff(
    ctx: click.Context, session_id: str, from_event: str, to_event: str | None, as_json: bool
) -> None:
    """What changed from FROM to TO (default: the server's working directory now)."""
    from .workfiles import say_diff

    path = f"/sessions/{session_arg(session_id)}/diff"
    query = {"from": event_arg(from_event), "to": event_arg(to_event)}
    got = guard(lambda: remote_of(ctx).get(path, **query))
    say_diff(got, as_json)


@remote_session.command("checkout")
@click.argument("session_id", metavar="SESSION")
@click.argument("event_id", metavar="EVENT")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option(
    "--force", is_flag=True, help="Overwrite files changed outside the agent (snapshotted first)."
)
@json_option
@click.pass_context
def remote_checkout(
    ctx: click.Context, session_id: str, event_id: str, dry_run: bool, force: bool, as_json: bool
) -> None:
    """Put EVENT's files back on the server's disk, as `infai session checkout` does."""
    from .workfiles import say_checkout

    path = f"/sessions/{session_arg(session_id)}/checkout"
    body = {"event": event_arg(event_id), "dry_run": dry_run, "force": force}
    answer = guard(lambda: remote_of(ctx).post(path, body))
    say_checkout(answer, as_json)


# -- export ----------------------------------------------------------------------------


@remote_session.command("export")
@click.argument("session_id", metavar="SESSION")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="File (default stdout).")
@json_option
@click.pass_context
def remote_export(ctx: click.Context, session_id: str, output: str | None, as_json: bool) -> None:
    """Write the server's session here as one JSONL file, as `infai session export` does
    (the file is written on this machine; `infai session import` reads it)."""
    from .session import write_whole

    sid = session_arg(session_id)
    client = remote_of(ctx)
    lines = checked_export(client.lines(f"/sessions/{sid}/export"), sid, client.url)
    if output is None:

        def copy() -> None:
            for line in lines:
                sys.stdout.buffer.write(line)
            sys.stdout.flush()

        guard(copy)
        return
    try:
        count = guard(lambda: write_whole(Path(output), lines))
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from None
    if as_json:
        emit_json({"session": session_id.lower(), "file": output, "events": count - 1})
    else:
        echo(f"exported {count - 1} events to {output}", err=True)


def checked_export(lines: Iterable[bytes], session_id: str, url: str) -> Iterator[bytes]:
    """The lines of a server's export as they arrive, each passed on only once it is
    what `infai session export` writes: the header of SESSION's export first, then
    one JSON object per line, each event after its parent, the objects (version
    2 only) last, and every line ended. Anything else, a body that is not an
    export or one that ends mid-line, raises :class:`RemoteError` naming the line,
    so ``-o FILE`` is left as it was (and stdout gets no line of it)."""
    from infai.shells.remote import RemoteError

    check = _ExportCheck(session_id)
    number = 0
    for number, line in enumerate(lines, start=1):
        problem = check.problem(line, number)
        if problem is not None:
            raise RemoteError(f"{url}: the export is not one: line {number}: {problem}")
        yield line
    if number == 0:
        raise RemoteError(f"{url}: the export is not one: the answer is empty")


class _ExportCheck:
    """What has been seen of an export so far (event ids; its version; objects)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.version: object = None
        self.events: set[str] = set()
        self.in_objects = False

    def problem(self, line: bytes, number: int) -> str | None:
        """What is wrong with the ``number``-th line (None: nothing)."""
        if not line.endswith(b"\n"):
            return "it ends without a newline (the answer was cut off)"
        try:
            obj = json.loads(line)
        except ValueError:
            return "not JSON (is this infai serve?)"
        if not isinstance(obj, dict):
            return "not a JSON object"
        if number == 1:
            return self._header(obj)
        if set(obj) == {"object", "data"}:
            self.in_objects = True
            return "an object in a version 1 export" if self.version == 1 else None
        return self._event(obj)

    def _header(self, obj: dict[str, Any]) -> str | None:
        self.version = obj.get("infai_export")
        session = obj.get("session")
        if self.version not in (1, 2) or isinstance(self.version, bool):
            return "not the header of an infai export"
        if not isinstance(session, dict) or session.get("id") != self.session_id:
            return f"not the export of session {self.session_id}"
        return None

    def _event(self, obj: dict[str, Any]) -> str | None:
        event_id, parent = obj.get("id"), obj.get("parent_id")
        if self.in_objects:
            return "an event after the objects"
        if not isinstance(event_id, str) or not isinstance(parent, str) or "kind" not in obj:
            return "not an event"
        if event_id in self.events:
            return f"event {event_id} appears twice"
        if parent != NIL_ID and parent not in self.events:
            return f"the parent of event {event_id} does not come before it"
        self.events.add(event_id)
        return None


# -- the root's dispatch ---------------------------------------------------------------

#: the remote forms, by the name the root resolves
REMOTE_COMMANDS: dict[str, click.Command] = {
    "compact": remote_compact,
    "run": remote_run,
    "search": remote_search,
    "session": remote_session,
}


def remote_command(name: str) -> click.Command:
    """The remote form of ``infai NAME`` (bad input when it has none)."""
    found = REMOTE_COMMANDS.get(name)
    if found is None:
        raise BadInput(f"`infai {name}` does not work with --remote (these do: {REMOTE_FORMS})")
    return found


__all__ = ["REMOTE_COMMANDS", "remote_command"]

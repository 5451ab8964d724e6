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

import sys
from pathlib import Path

import click

from infai.store import KINDS

from .. import render
from .common import echo, emit_json, json_option
from .errors import BadInput
from .remote import (
    REMOTE_FORMS,
    RemoteFailure,
    event_of,
    guard,
    remote_answer,
    remote_of,
    remote_run,
    remote_session,
)

# -- search ----------------------------------------------------------------------------


@click.command("search")
@click.argument("query", required=False)
@click.option("--session", "session_id", metavar="SESSION", help="Only this session's events.")
@click.option("--dir", "working_dir", metavar="DIR", help="Only sessions working in DIR or below.")
@click.option("--kind", type=click.Choice(KINDS), help="Only events of this kind.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--rebuild", is_flag=True, help="Not remotely: the index is the server's.")
@json_option
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

    from .search import say_results

    if rebuild:
        raise BadInput("`infai search --rebuild` does not work with --remote: run it on the server")
    if query is None:
        raise click.UsageError("Missing argument 'QUERY'.")
    params = {"q": query, "session": session_id, "dir": working_dir, "kind": kind, "limit": limit}
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


# -- compact ---------------------------------------------------------------------------


@click.command("compact")
@click.argument("session_id", metavar="SESSION")
@json_option
@click.pass_context
def remote_compact(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Summarise the server's session now (its own model), as `infai compact` does."""
    from infai.shells.remote import RemoteError

    client = remote_of(ctx)
    try:
        obj = client.post(f"/sessions/{session_id}/compact")
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
    if explain:
        raise BadInput(
            "`infai session context --explain` does not work with --remote: run it on the server"
        )
    path = f"/sessions/{session_id}/context"
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

    got = guard(lambda: remote_of(ctx).get(f"/sessions/{session_id}/files", event=event_id))
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

    path = f"/sessions/{session_id}/diff"
    got = guard(lambda: remote_of(ctx).get(path, **{"from": from_event, "to": to_event}))
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

    body = {"event": event_id, "dry_run": dry_run, "force": force}
    answer = guard(lambda: remote_of(ctx).post(f"/sessions/{session_id}/checkout", body))
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

    lines = remote_of(ctx).lines(f"/sessions/{session_id}/export")
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

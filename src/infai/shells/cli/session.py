"""``infai session …``: plumbing over the store that scripts and tests rely on.

Every command takes ``--json``; bad input (an unknown session or event, an id
that is not a UUID, malformed JSON, a parent that does not exist) prints one
line on stderr and exits with code 2, having changed nothing; a store failure
(corruption, an I/O error, a writer lock that was not released in time) exits
with code 1 (the table is :mod:`.errors`). These commands import only the
store, so they start fast (``show`` loads the agent's manifest reader for an
event that names a tool manifest, and only then).

``export -o FILE`` writes a temporary file beside FILE, syncs it, renames it
over FILE and syncs the directory: FILE is either the old file or the whole
export, never a torn one, and a failure leaves no temporary file behind. Its
lines, to a file or the terminal, escape control and bidi characters as JSON
``\\uXXXX`` escapes (:mod:`infai.shells.inert`): the same values on import.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from infai.store import KINDS, SessionStore, SessionSummary

from .. import render
from ..inert import inert_json_line
from .common import echo, emit_json, json_option, pass_store, report_recovery, report_unreadable
from .errors import BadInput, mapped_errors


@click.group()
def session() -> None:
    """Create, inspect, check and move sessions."""


@session.command("new")
@click.option("--name", help="A name to show in listings.")
@click.option(
    "--working-dir",
    type=click.Path(exists=True, file_okay=False, resolve_path=True),
    help="The directory the session works in (stored absolute; it must exist).",
)
@click.option("--model", help="The model last used.")
@json_option
@mapped_errors
@pass_store
def session_new(
    store: SessionStore, name: str | None, working_dir: str | None, model: str | None, as_json: bool
) -> None:
    """Create a session and print its id."""
    info = store.create_session(name=name, working_dir=working_dir, model=model)
    if as_json:
        emit_json(info.to_obj())
    else:
        echo(info.id)


@session.command("ls")
@json_option
@mapped_errors
@pass_store
def session_ls(store: SessionStore, as_json: bool) -> None:
    """List sessions: grouped by directory (this one first), most recently active
    first in each, with title (name, else first prompt), last activity and event count.

    --json is one list, most recently active first: each session's metadata plus
    'title', 'first_prompt' and 'events'. Reads no event (the listing index).
    """
    summaries = store.list_summaries()
    report_unreadable(store)
    if as_json:
        emit_json([s.to_obj() for s in summaries])
        return
    for line in listing_lines(summaries):
        echo(line)


#: characters of a title shown in ``session ls`` (a first prompt has at most 80)
TITLE_SHOWN = 60


def listing_lines(summaries: list[SessionSummary]) -> list[str]:
    """``session ls`` as people read it: a header, then each directory's sessions
    under its name (see :mod:`infai.shells.listing`); "no sessions" if none."""
    from datetime import UTC, datetime

    from ..listing import NO_DIRECTORY, by_directory, here, relative_time

    if not summaries:
        return ["no sessions"]
    now, current = datetime.now(UTC), here()
    lines = [f"  {'SESSION':<36}  {'ACTIVE':<15} {'EVENTS':>6}  TITLE"]
    for directory, group in by_directory(summaries, current):
        where = render.printable(directory) if directory != NO_DIRECTORY else "(no directory)"
        lines.append(f"{where} (this directory)" if directory == current else where)
        for s in group:
            title = render.printable(s.title) or "-"
            if len(title) > TITLE_SHOWN:
                title = title[: TITLE_SHOWN - 3] + "..."
            when = relative_time(s.info.updated_at, now)
            lines.append(f"  {s.info.id:<36}  {when:<15} {s.events:>6}  {title}".rstrip())
    return lines


def _read_record_arg(
    kind: str, content: str | None, record: str | None, record_file: str | None
) -> object:
    given = [x for x in (content, record, record_file) if x is not None]
    if len(given) != 1:
        raise BadInput("give exactly one of --content, --record, --record-file")
    if content is not None:
        field = {"message": "content", "compaction": "summary", "branch_summary": "summary"}
        if kind not in field:
            raise BadInput(f"--content does not make a {kind} record; use --record")
        return {field[kind]: content}
    if record is not None:
        data, where = record.encode(), "--record"
    else:
        assert record_file is not None
        where = "stdin" if record_file == "-" else record_file
        try:
            data = sys.stdin.buffer.read() if record_file == "-" else Path(record_file).read_bytes()
        except OSError as exc:
            raise BadInput(f"cannot read {where}: {exc.strerror}") from None
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"{where}: malformed JSON: {exc}") from None
    except RecursionError:
        raise BadInput(f"{where}: JSON nested too deeply") from None


@session.command("append")
@click.argument("session_id", metavar="SESSION")
@click.option("--kind", required=True, type=click.Choice(KINDS), help="Event kind.")
@click.option("--role", required=True, help="user, assistant, system, tool, ...")
@click.option("--content", help="Text of a message (or summary of a compaction).")
@click.option("--record", help="The record as a JSON object.")
@click.option("--record-file", help="Read the record's JSON from a file ('-': stdin).")
@click.option("--parent", help="Append after this event instead of HEAD (a branch).")
@json_option
@mapped_errors
@pass_store
def session_append(
    store: SessionStore,
    session_id: str,
    kind: str,
    role: str,
    content: str | None,
    record: str | None,
    record_file: str | None,
    parent: str | None,
    as_json: bool,
) -> None:
    """Append one event; prints its id once it is durable."""
    from infai.store import record_from_obj

    rec = record_from_obj(kind, _read_record_arg(kind, content, record, record_file))
    store.info(session_id)  # a missing session is bad input, before any lock is taken
    with store.open_writer(session_id) as writer:
        report_recovery(store, writer.session_id)
        event = writer.append(rec, role, parent=parent)
    if as_json:
        emit_json(render.event_json(event))
    else:
        echo(event.id)


@session.command("log")
@click.argument("session_id", metavar="SESSION")
@click.option("--all", "show_all", is_flag=True, help="Every event, not just the active path.")
@json_option
@mapped_errors
@pass_store
def session_log(store: SessionStore, session_id: str, show_all: bool, as_json: bool) -> None:
    """The active path (HEAD back to the last compaction), previews only."""
    with store.open_reader(session_id) as reader:
        entries = list(reader.entries()) if show_all else reader.path()
        head = reader.head
    if as_json:
        emit_json([render.entry_json(e, head) for e in entries])
        return
    for entry in entries:
        echo(render.entry_line(entry, head))


@session.command("tree")
@click.argument("session_id", metavar="SESSION")
@json_option
@mapped_errors
@pass_store
def session_tree(store: SessionStore, session_id: str, as_json: bool) -> None:
    """Every branch drawn as a tree, HEAD marked (reads the index only)."""
    with store.open_reader(session_id) as reader:
        entries = list(reader.entries())
        head = reader.head
    if as_json:
        emit_json(render.tree_json(entries, head))
        return
    for line in render.tree_lines(entries, head):
        echo(line)


@session.command("show")
@click.argument("session_id", metavar="SESSION")
@click.argument("event_id", metavar="EVENT")
@json_option
@mapped_errors
@pass_store
def session_show(store: SessionStore, session_id: str, event_id: str, as_json: bool) -> None:
    """One event with its record resolved (a blob's digest is checked), and the
    tools its model request was offered if it names a tool manifest (schemas in
    ``--json``)."""
    with store.open_reader(session_id) as reader:
        event = reader.event(event_id, resolve=True)
    digest = render.manifest_digest(event)
    tools = _manifest_tools(store, digest) if digest else None
    if as_json:
        shown = render.event_json(event)
        if digest and tools is not None:
            shown["tool_manifest"] = {"digest": digest, "tools": tools}
        emit_json(shown)
    else:
        echo(render.event_text(event))
        if digest and tools is not None:
            echo("\n".join(render.manifest_lines(digest, tools)))
    if digest and tools is None:
        raise click.ClickException(
            f"event {event.id}: its tool manifest {digest} is not in the store "
            "(removed, or the session was imported without it)"
        )


def _manifest_tools(store: SessionStore, digest: str) -> list[dict[str, Any]] | None:
    """The tools of the manifest ``digest`` (None: the store has no such object)."""
    from infai.agent import load_manifest
    from infai.store import ObjectNotFound

    objects = getattr(store, "objects", None)
    if objects is None:
        return None
    try:
        return load_manifest(objects, digest)
    except ObjectNotFound:
        return None


@session.command("context")
@click.argument("session_id", metavar="SESSION")
@click.option("--at", help="Rebuild the context at this event instead of HEAD.")
@click.option(
    "--explain",
    is_flag=True,
    help="Say, event by event, which context rule kept, shortened or dropped it, and why.",
)
@json_option
@mapped_errors
@pass_store
def session_context(
    store: SessionStore, session_id: str, at: str | None, explain: bool, as_json: bool
) -> None:
    """The reconstructed active context: compaction summary plus the events after it.

    With --explain: the whole path, each event with the rule that decided it
    (docs/context.md), then the messages the model is sent (--json: an object
    with 'rules', 'events' and 'messages').
    """
    if explain:
        from .context_explain import explain as explain_context

        explain_context(store, session_id, at, as_json)
        return
    with store.open_reader(session_id) as reader:
        context = reader.context(at)
    if as_json:
        emit_json([render.event_json(e) for e in context.events])
        return
    for event in context.events:
        echo(render.event_text(event))
        echo()


@session.command("fsck")
@click.argument("session_id", metavar="SESSION", required=False)
@click.option("--all", "check_all", is_flag=True, help="Check every session.")
@click.option("--repair", is_flag=True, help="Do what is provably safe, then check.")
@json_option
@mapped_errors
@pass_store
def session_fsck(
    store: SessionStore, session_id: str | None, check_all: bool, repair: bool, as_json: bool
) -> None:
    """Verify every index entry, chunk line, blob digest, parent link and HEAD."""
    if (session_id is None) == (not check_all):
        raise BadInput("give a SESSION or --all, not both")
    ids = [i.id for i in store.list_sessions()] if check_all else [session_id or ""]
    report_unreadable(store)
    reports = [store.fsck(sid, repair=repair) for sid in ids]
    if as_json:
        emit_json([render.fsck_json(r) for r in reports])
    else:
        for report in reports:
            for line in render.fsck_lines(report):
                echo(line)
    if not all(r.ok for r in reports):
        sys.exit(1)


@session.command("salvage")
@click.argument("session_id", metavar="SESSION")
@json_option
@mapped_errors
@pass_store
def session_salvage(store: SessionStore, session_id: str, as_json: bool) -> None:
    """Copy every event that verifies into a new session; the damaged one is left as is.

    Kept: every event whose own bytes verify, with its id; one whose parent was
    lost hangs from a gap event that names the lost ids, under the nearest kept
    ancestor. Exits 1 when anything was lost.
    """
    from infai.store import salvage_session

    report = salvage_session(store, session_id)
    if as_json:
        emit_json(
            {
                "source": report.source,
                "target": report.target,
                "kept": report.kept,
                "lost": [{"event": e, "why": why} for e, why in report.lost],
                "gaps": [{"event": g, "lost": ids} for g, ids in report.gaps],
            }
        )
    else:
        for event_id, why in report.lost:
            echo(f"lost {event_id}: {why}", err=True)
        for gap, ids in report.gaps:
            echo(f"gap {gap} stands for {len(ids)} lost: {', '.join(ids)}", err=True)
        where = f"into {report.target}" if report.target else "(nothing verified: no session made)"
        echo(f"salvaged {report.kept} events, lost {len(report.lost)} {where}")
    if report.lost or report.target is None:
        sys.exit(1)


@session.command("rm")
@click.argument("session_id", metavar="SESSION")
@json_option
@mapped_errors
@pass_store
def session_rm(store: SessionStore, session_id: str, as_json: bool) -> None:
    """Delete a session and all its events."""
    store.remove_session(session_id)
    if as_json:
        emit_json({"removed": session_id.lower()})
    else:
        echo(f"removed {session_id.lower()}")


@session.command("export")
@click.argument("session_id", metavar="SESSION")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="File (default stdout).")
@json_option
@mapped_errors
@pass_store
def session_export(store: SessionStore, session_id: str, output: str | None, as_json: bool) -> None:
    """Write the session as one self-contained JSONL file (blobs inlined)."""
    from infai.store import export_lines

    lines = (inert_json_line(line) for line in export_lines(store, session_id))
    if output is None:
        for line in lines:
            sys.stdout.buffer.write(line)
        sys.stdout.flush()
        return
    try:
        count = write_whole(Path(output), lines)
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from None
    if as_json:
        emit_json({"session": session_id.lower(), "file": output, "events": count - 1})
    else:
        echo(f"exported {count - 1} events to {output}", err=True)


def write_whole(path: Path, lines: Iterable[bytes]) -> int:
    """Write ``lines`` to ``path`` all or nothing; the number of lines written.

    The lines go to a new temporary file beside ``path`` (a name of its own,
    created exclusively: never an existing file, never through a symbolic link,
    so nothing but ``path`` is ever written), which is synced, renamed over
    ``path``, and the directory synced. On any failure (an error from ``lines``,
    a full disk, an interrupt) the temporary file is removed and an existing
    ``path`` is left as it was. A ``path`` that is a symbolic link is written
    where it points, as ``>`` writes; one that is no regular file (``/dev/stdout``,
    a named pipe, a device) is written into as it is, line by line, never
    replaced by a file.
    """
    path = Path(os.path.realpath(path)) if path.is_symlink() else path
    if path.exists() and not path.is_file() and not path.is_dir():
        return _write_through(path, lines)
    fd, tmp = _new_beside(path)
    count = 0
    try:
        with open(fd, "wb") as f:
            for line in lines:
                f.write(line)
                count += 1
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    sync_directory(path.parent)
    return count


def _write_through(path: Path, lines: Iterable[bytes]) -> int:
    """``lines`` written into ``path``, a pipe or a device, as they come."""
    count = 0
    with path.open("wb") as f:
        for line in lines:
            f.write(line)
            count += 1
    return count


def _new_beside(path: Path) -> tuple[int, Path]:
    """A new empty file in ``path``'s directory, open for writing (mode 0666 less
    the umask, as a plain ``open`` makes it), and its path."""
    import secrets

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = path.with_name(f"{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # 48 random bits taken: try another name
            continue


def sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (where the platform allows it)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@session.command("import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@json_option
@mapped_errors
@pass_store
def session_import(store: SessionStore, file: str, as_json: bool) -> None:
    """Create a session from an export file, ids preserved; prints its id."""
    from infai.store import import_session

    try:
        source = sys.stdin.buffer if file == "-" else open(file, "rb")  # noqa: SIM115
    except OSError as exc:
        raise BadInput(f"cannot read {file}: {exc.strerror}") from None
    with source:  # what the file may not decide is dropped, and said on stderr
        info = import_session(store, source, "stdin" if file == "-" else file, report=_say_dropped)
    if as_json:
        emit_json(info.to_obj())
    else:
        echo(info.id)


def _say_dropped(note: str) -> None:
    echo(f"infai: import: {note}", err=True)


__all__ = ["session", "write_whole"]

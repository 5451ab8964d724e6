"""``infai store``: the backend itself: migrate a database, copy sessions between
stores, collect garbage.

``copy`` moves sessions with their ids, events, branches, HEAD, blobs and the
objects their snapshots reach, from a directory to a PostgreSQL database or
back (or between two of a kind), one session at a time through the export
format, and verifies each copy against its source (every event's links and
resolved record, HEAD, metadata, every object reached) before saying it is
done. A session already at the destination is left alone: if it is identical
it counts as copied, otherwise it is reported and the command exits 1 at the
end, having copied everything else.

``gc`` removes the store-wide objects (workspace snapshots' file contents and
trees, tool manifests) that no event of any session reaches, keeping whatever
was put within the grace period (see :mod:`infai.store.gc`); with a session it
cannot read, it removes nothing and exits 1.
"""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import click

from infai.store import SessionStore, StoreError

from .common import StoreSpec, echo, emit_json, json_option, pass_store
from .errors import BadInput, mapped_errors


@click.group("store")
def store_group() -> None:
    """The session store's backend: migrate, copy between backends, collect garbage."""


@store_group.command("migrate")
@json_option
@mapped_errors
@pass_store
def migrate_command(store: SessionStore, as_json: bool) -> None:
    """Bring the database's schema up to date (a directory store needs nothing)."""
    from infai.store import SCHEMA_VERSION as LATEST
    from infai.store import PgStore

    if not isinstance(store, PgStore):
        if as_json:
            emit_json({"backend": "directory", "applied": [], "schema_version": None})
        echo("infai: a directory store has no schema to migrate", err=True)
        return
    if as_json:
        emit_json(
            {"backend": "postgresql", "applied": list(store.migrated), "schema_version": LATEST}
        )
        return
    for line in store.migrated:
        echo(f"applied migration {line}")
    echo(f"schema at version {LATEST}")


def same_session(source: SessionStore, target: SessionStore, session_id: str) -> str | None:
    """None if both stores hold the same session; else what differs."""
    if source.info(session_id).to_obj() != target.info(session_id).to_obj():
        return "metadata differs"
    with source.open_reader(session_id) as a, target.open_reader(session_id) as b:
        if (a.count, a.head) != (b.count, b.head):
            return f"HEAD or count differs ({a.count} vs {b.count} events)"
        for left, right in zip(a.entries(), b.entries(), strict=True):
            keys = ("seq", "id", "parent_id", "parent_seq", "branch_from", "kind", "role")
            if any(getattr(left, k) != getattr(right, k) for k in (*keys, "timestamp")):
                return f"event #{left.seq} differs"
            if a.event(left.id, resolve=True).record != b.event(right.id, resolve=True).record:
                return f"event #{left.seq}'s record differs"
    from infai.store import objects_reached

    lost = target.objects.missing(objects_reached(source, session_id))
    if lost:
        return f"{len(lost)} object(s) its snapshots reach are missing, e.g. {min(lost)}"
    return None


def _open(location: str, what: str) -> Any:
    """The store at ``location``, with the command line's options (durability, lock timeout)."""
    spec = click.get_current_context().find_root().find_object(StoreSpec) or StoreSpec()
    try:
        return replace(spec, location=location).open()
    except StoreError as exc:
        raise BadInput(f"{what} {location}: {exc}") from None


@store_group.command("copy")
@click.option("--from", "source_at", required=True, metavar="URL|DIR", help="Copy from here.")
@click.option("--to", "target_at", required=True, metavar="URL|DIR", help="Copy to here.")
@click.argument("session_ids", nargs=-1, metavar="[SESSION]...")
@json_option
@mapped_errors
def copy_command(
    source_at: str, target_at: str, session_ids: tuple[str, ...], as_json: bool
) -> None:
    """Copy sessions (default: all) between stores, ids and branches intact, verified.

    Sessions named that the source does not hold are bad input (exit 2), found
    before anything is copied. With --json, one object per session on stdout.
    """
    from infai.store import export_lines, import_session

    source = _open(source_at, "--from")
    target = _open(target_at, "--to")
    failed = 0
    results: list[dict[str, Any]] = []

    def say(sid: str, where: str, outcome: str, text: str, events: int | None = None) -> None:
        results.append({"session": sid, "outcome": outcome, "detail": text, "events": events})
        echo(f"{where}: {text}", err=True)

    try:
        for sid in session_ids:
            if not source.exists(sid):  # a malformed id: InvalidInput, bad input too
                raise BadInput(f"no session {sid} at --from {source_at}")
        wanted = list(session_ids) or [i.id for i in reversed(source.list_sessions())]
        for number, sid in enumerate(wanted, 1):
            where = f"[{number}/{len(wanted)}] {sid}"
            try:
                if target.exists(sid):
                    difference = same_session(source, target, sid)
                    if difference is None:
                        say(sid, where, "identical", "already there, identical")
                        continue
                    say(sid, where, "different", f"already there and different ({difference})")
                    failed += 1
                    continue
                data = io.BytesIO(b"".join(export_lines(source, sid)))
                # the user's own stores: kept rules and stamps travel as they are
                import_session(target, data, f"session {sid}", trusted=True)
                difference = same_session(source, target, sid)
                if difference is not None:
                    raise StoreError(f"the copy does not match its source: {difference}")
                with target.open_reader(sid) as reader:
                    count = reader.count
                say(sid, where, "copied", f"copied {count} events, verified", count)
            except StoreError as exc:
                say(sid, where, "failed", f"not copied: {exc}")
                failed += 1
    finally:
        source.close()
        target.close()
    if as_json:
        emit_json(results)
    if failed:
        raise click.ClickException(f"{failed} of {len(wanted)} sessions were not copied")


#: what a dry run on PostgreSQL says about disk space (a real run says what it did)
PG_SPACE_NOTE = (
    "PostgreSQL: removing keeps the table's files at their size; the VACUUM gc runs"
    " after removing (autovacuum would soon) makes the space reusable for new objects,"
    " and only VACUUM FULL infai_objects (it locks the table) gives it back to the disk"
)


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} B"  # pragma: no cover


@store_group.command("gc")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=None,
    metavar="MINUTES",
    help="Keep objects put within this many minutes  [default: 60].",
)
@json_option
@mapped_errors
@pass_store
def gc_command(store: SessionStore, dry_run: bool, grace: float | None, as_json: bool) -> None:
    """Remove stored file contents, trees and manifests that no event of any session
    reaches (never anything reachable); reports objects and bytes freed, and how
    much disk came back (with --dry-run: about how much would).

    Objects put within the grace period are kept even if nothing reaches them yet:
    a snapshot puts its files before it appends its event. A grace shorter than the
    default is used only when no session is open. A session that cannot
    be read makes gc remove nothing (exit 1): fsck or salvage it first.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from infai.store import GC_GRACE, PgStore, collect_garbage

    seconds = GC_GRACE if grace is None else grace * 60
    console = Console(stderr=True)
    columns = (TextColumn("reading sessions"), BarColumn(), MofNCompleteColumn())
    with Progress(
        *columns, console=console, transient=True, disable=not console.is_terminal
    ) as bar:
        task = bar.add_task("", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        report = collect_garbage(store, dry_run=dry_run, grace=seconds, progress=progress)
    if as_json:
        emit_json(report.to_obj())
        return
    verb = "would remove" if dry_run else "removed"
    if report.grace > seconds:
        echo(
            f"grace kept at {report.grace / 60:g} minutes, not {seconds / 60:g}: a session"
            " is open, and its next snapshot may name contents put earlier"
        )
    echo(
        f"{verb} {report.removed} of {report.objects} objects, {_size(report.freed)}"
        f" ({report.reachable} reachable from {report.sessions} sessions,"
        f" {report.recent} kept as recent)"
    )
    if dry_run:
        echo(
            f"about {_size(report.reclaimed)} of disk would come back"
            f" (the objects take {_size(report.disk_before)})"
        )
    else:
        after = report.disk_after if report.disk_after is not None else report.disk_before
        echo(
            f"disk: {_size(report.disk_before)} before, {_size(after)} now,"
            f" {_size(report.reclaimed)} given back"
        )
    if report.space_note is not None or (dry_run and isinstance(store, PgStore)):
        echo(report.space_note or PG_SPACE_NOTE)


__all__ = ["gc_command", "same_session", "store_group"]

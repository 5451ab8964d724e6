"""Writing a foreign session into the store: whole, or grown, or not at all.

Model, in prose: :func:`commit` checks a :class:`~.base.ForeignSession` and its
children completely before it writes anything (ids are UUIDs and unique, each
parent comes first, every record is one the store accepts). A session the store
lacks is then created with its derived id, its events are written with
``import_batch`` and its metadata restored as the source had it (times,
``extra["import"]``, never permission rules); if anything fails, every session
this call created is removed again. A session the store already has (the same
derived id) gets only the events whose ids it lacks, in the given order, each
after a parent it already holds; nothing at all is written when it lacks none,
so importing an unchanged file twice is a no-op. A session the user has since
continued in infai (its HEAD is not the one the last import left) is not grown: appending
would move HEAD off the user's work; the report says so. Growth is not undone
when a later child fails: what was appended is whole and valid, and the next
import goes on from there.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Literal

from ..codec import NIL_ID, check_role, check_timestamp, check_uuid
from ..contract import SessionStore
from ..errors import InvalidInput
from ..records import encode_record
from .base import ForeignSession, to_millis

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from ..contract import SessionLog
    from ..events import EventSpec

#: events written per ``import_batch`` call (one transaction each)
BATCH = 1000


@dataclass
class ImportOutcome:
    """What :func:`commit` did to one session (and its children)."""

    session_id: str
    source_id: str
    status: Literal["created", "grown", "unchanged"]
    added: int
    children: list[ImportOutcome] = field(default_factory=list)

    def walk(self) -> Iterator[ImportOutcome]:
        """This outcome and every descendant's."""
        yield self
        for child in self.children:
            yield from child.walk()

    def to_obj(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "session": self.session_id,
            "source_id": self.source_id,
            "status": self.status,
            "added": self.added,
            "children": [c.to_obj() for c in self.children],
        }


def _validate(foreign: ForeignSession) -> None:
    """Refuse, before anything is written, what the store would refuse midway."""
    for session in foreign.walk():
        where = f"{session.paths[0] if session.paths else session.source_id}"
        check_uuid(session.session_id, f"{where}: session id")
        check_timestamp(session.created_at, f"{where}: created_at")
        check_timestamp(session.updated_at, f"{where}: updated_at")
        seen: set[str] = set()
        for event_id, parent_id, _b, role, timestamp, record in session.events:
            what = f"{where}: event {event_id}"
            if event_id in seen:
                raise InvalidInput(f"{what}: duplicate id")
            if parent_id != NIL_ID and parent_id not in seen:
                raise InvalidInput(f"{what}: parent {parent_id} does not come before it")
            check_uuid(event_id, f"{what}: id")
            check_role(role)
            check_timestamp(timestamp, f"{what}: timestamp")
            try:
                encode_record(record)
            except InvalidInput as exc:
                raise InvalidInput(f"{what}: {exc}") from None
            seen.add(event_id)
        for child in session.children:
            if child.parent_event is not None and child.parent_event not in seen:
                raise InvalidInput(f"{where}: child {child.source_id} hangs from a missing event")


def commit(store: SessionStore, foreign: ForeignSession) -> ImportOutcome:
    """Write ``foreign`` and its children: new sessions whole or not at all,
    existing ones grown by the events they lack, unchanged ones untouched."""
    _validate(foreign)
    created: list[str] = []
    try:
        return _commit(store, foreign, None, created)
    except BaseException:
        for session_id in reversed(created):
            with contextlib.suppress(Exception):  # the original failure matters more
                store.remove_session(session_id)
        raise


def _commit(
    store: SessionStore, foreign: ForeignSession, parent: str | None, created: list[str]
) -> ImportOutcome:
    sid = foreign.session_id
    if parent is None:
        parent = _linkable(store, foreign)
    if store.exists(sid):
        outcome = _grow(store, foreign, parent)
    else:
        info = store.create_session(
            session_id=sid,
            name=foreign.name,
            working_dir=foreign.working_dir,
            model=foreign.model,
            parent_session=parent,
            parent_event=foreign.parent_event if parent else None,
        )
        created.append(sid)
        with store.open_writer(sid) as writer:
            _append(writer, foreign.events, None)
        store.restore_info(
            info.replace(
                created_at=foreign.created_at,
                updated_at=foreign.updated_at,
                extra={"import": _mark(foreign, foreign.events)},
            )
        )
        outcome = ImportOutcome(sid, foreign.source_id, "created", len(foreign.events))
    outcome.children = [_commit(store, c, sid, created) for c in foreign.children]
    return outcome


def _linkable(store: SessionStore, foreign: ForeignSession) -> str | None:
    """The parent a top-level session names, if the store has it yet.

    A parent in another file may be imported after its child (files are units
    of their own); the link is then made by the next import of the child.
    """
    wanted = foreign.parent_session
    if wanted is None:
        return None
    if store.exists(wanted):
        return wanted
    foreign.report.warn(
        None,
        f"its parent session {wanted} is not imported yet: "
        "importing this file again after the parent links them",
    )
    return None


def _mark(foreign: ForeignSession, written: Sequence[EventSpec]) -> dict[str, Any]:
    """What the session's ``extra["import"]`` holds: where it came from, the HEAD
    the import left (to tell later whether the user went on in infai), and the
    importer's own notes (``foreign.extra``)."""
    mark: dict[str, Any] = {
        "tool": foreign.tool,
        "source_id": foreign.source_id,
        "paths": list(foreign.paths),
        **foreign.extra,
    }
    if written:
        mark["head"] = written[-1][0]
    return mark


def _grow(store: SessionStore, foreign: ForeignSession, parent: str | None) -> ImportOutcome:
    sid = foreign.session_id
    info = store.info(sid)
    mark = info.extra.get("import")
    if not isinstance(mark, dict) or mark.get("tool") != foreign.tool:
        raise InvalidInput(f"session {sid} exists and is not an import of {foreign.tool}")
    with store.open_writer(sid) as writer:
        stored = {entry.id: entry.parent_id for entry in writer.entries()}
        new = [spec for spec in foreign.events if spec[0] not in stored]
        moved = sum(1 for spec in foreign.events if stored.get(spec[0], spec[1]) != spec[1])
        ours = writer.head != mark.get("head", writer.head)  # moved since the last import
        if new and ours:  # appending would move HEAD off the user's own work
            foreign.report.warn(
                None,
                f"the session was continued in infai since it was imported: the source's "
                f"{len(new)} new entries are not added (HEAD stays on your work)",
            )
            new = []
        if new:  # each one's parent is stored or comes before it (checked by _validate)
            _append(writer, new, writer.head)
    if moved:
        foreign.report.warn(
            None,
            f"{moved} entries imported before now follow other entries in the source "
            "(was the file rewritten?): they stay where they were imported",
        )
    if new and foreign.head is not None and new[-1][0] != foreign.head:
        foreign.report.warn(
            None, "the tool's current entry was imported before: HEAD is the last new one"
        )
    link = parent is not None and info.parent_session is None
    if link:  # the parent came after this session's first import
        info = info.replace(parent_session=parent, parent_event=foreign.parent_event)
    if not new:
        if link:
            store.restore_info(info)
        return ImportOutcome(sid, foreign.source_id, "unchanged", 0)
    updated = max(info.updated_at, foreign.updated_at, key=lambda t: to_millis(t) or 0)
    extra = {**info.extra, "import": _mark(foreign, new)}
    store.restore_info(info.replace(updated_at=updated, extra=extra))
    return ImportOutcome(sid, foreign.source_id, "grown", len(new))


def _append(writer: SessionLog, specs: Sequence[EventSpec], head: str | None) -> None:
    """``import_batch`` in steps, with ``branch_from`` set where an event does not
    follow the one written just before it (as the writer's own appends set it)."""
    batch: list[EventSpec] = []
    last = head
    for event_id, parent_id, _b, role, timestamp, record in specs:
        branch = parent_id if parent_id != NIL_ID and parent_id != last else None
        batch.append((event_id, parent_id, branch, role, timestamp, record))
        last = event_id
        if len(batch) == BATCH:
            writer.import_batch(batch)
            batch = []
    if batch:
        writer.import_batch(batch)

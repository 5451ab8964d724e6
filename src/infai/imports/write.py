"""Writing a foreign session into the store: whole, or grown, or not at all.

Model, in prose: :func:`commit` checks a :class:`~.base.ForeignSession` and its
children completely before it writes anything (ids are UUIDs and unique, each
parent comes first, every record is one the store accepts). A session the store
lacks is then created with its derived id, its events are written with
``import_batch`` and its metadata restored as the source had it (times,
``extra["import"]``, never permission rules, and no working directory: the
tool's is recorded as ``extra["import"]["working_dir"]``, for people to read,
since the session's own says where a checkout of its files writes and its tools
run, which a file must not choose); if anything fails, every session
this call created is removed again. A session the store already has (the same
derived id) gets only the events whose ids it lacks, in the given order, each
after a parent it already holds; nothing at all is written when it lacks none,
so importing an unchanged file twice is a no-op (the import metadata alone is
brought up to date when the source changed without new events: a later prune,
a label; a working directory an earlier infai took from the source is
dropped then, and reported). Only appending is safe in an append-only log, so an event whose
content changed in the source is handled by
:class:`_Plan`: a leaf (a reply still being written at the last import) gets its
complete version appended beside it, anything else is kept and reported. A
session the user has since continued in infai (its HEAD is not the one the last
import left) still gets the source's new events, as a branch from the last
imported one; HEAD moves to them (the store's HEAD is always the newest event) and
the report names the event the user's own work ends at. Growth is not undone
when a later child fails: what was appended is whole and valid, and the next
import goes on from there.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Literal

from infai.store.codec import NIL_ID, check_role, check_timestamp, check_uuid, digest_of
from infai.store.contract import SessionStore
from infai.store.errors import InvalidInput
from infai.store.records import encode_record, record_to_obj

from .base import ForeignSession, derive_id, to_millis

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from infai.store.contract import SessionLog
    from infai.store.events import EventSpec
    from infai.store.records import Record

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
            working_dir=None,  # the tool's is in extra["import"]: recorded, not trusted
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
    """What the session's ``extra["import"]`` holds: where it came from (the
    tool's working directory too: shown, never trusted), the HEAD the import left
    (to tell later whether the user went on in infai), and the importer's own
    notes (``foreign.extra``)."""
    mark: dict[str, Any] = {
        "tool": foreign.tool,
        "source_id": foreign.source_id,
        "paths": list(foreign.paths),
        **foreign.extra,
    }
    if foreign.working_dir is not None:
        mark["working_dir"] = foreign.working_dir
    if written:
        mark["head"] = written[-1][0]
    return mark


def _grow(store: SessionStore, foreign: ForeignSession, parent: str | None) -> ImportOutcome:
    sid = foreign.session_id
    info = store.info(sid)
    mark = info.extra.get("import")
    if not isinstance(mark, dict) or mark.get("tool") != foreign.tool:
        raise InvalidInput(f"session {sid} exists and is not an import of {foreign.tool}")
    revisions = dict(mark.get("revisions") or {})
    with store.open_writer(sid) as writer:
        user_head = writer.head
        plan = _Plan(writer, revisions)
        new = plan.run(foreign.events)
        for child in foreign.children:  # a subagent started by a revised call hangs from it
            if child.parent_event is not None:
                child.parent_event = plan.remap.get(child.parent_event, child.parent_event)
        ours = user_head != mark.get("head", user_head)  # moved since the last import
        if new:  # each one's parent is stored or comes before it (checked by _validate)
            _append(writer, new, writer.head)
    _report_growth(foreign, plan, new, user_head if ours else None)
    link = parent is not None and info.parent_session is None
    if link:  # the parent came after this session's first import
        info = info.replace(parent_session=parent, parent_event=foreign.parent_event)
    # an earlier infai took the tool's directory as the session's own: the one the
    # source names now, or (its mark not recording the tool's, as no older one
    # did) the one it named then, whatever it names now
    older = "working_dir" not in mark and foreign.working_dir is not None
    trusted = info.working_dir is not None and (older or info.working_dir == foreign.working_dir)
    if trusted:
        foreign.report.warn(
            None,
            f"working_dir {info.working_dir!r} dropped: an imported session works in "
            "the directory it is continued from (the tool's stays in its import metadata)",
        )
        info = info.replace(working_dir=None)
    if not new:
        notes = _mark(foreign, [])  # what the source says now (a prune, a label) ...
        for kept in ("head", "revisions"):  # ... with what only the store knows
            if kept in mark:
                notes[kept] = mark[kept]
        if notes != mark:
            info = info.replace(extra={**info.extra, "import": notes})
        if link or trusted or notes != mark:
            store.restore_info(info)
        return ImportOutcome(sid, foreign.source_id, "unchanged", 0)
    updated = max(info.updated_at, foreign.updated_at, key=lambda t: to_millis(t) or 0)
    mark = _mark(foreign, new)
    if revisions:
        mark["revisions"] = revisions
    extra = {**info.extra, "import": mark}
    store.restore_info(info.replace(updated_at=updated, extra=extra))
    return ImportOutcome(sid, foreign.source_id, "grown", len(new))


class _Plan:
    """Which of a grown source's events to append, and under which ids.

    The rule: the store's log is append-only, so only appending new events to an
    unchanged prefix is safe. An event the session already has is compared with
    the source's version of it. Unchanged: nothing to do. Changed (the reply that
    was being written when the file was imported, complete now; Claude Code and
    Codex write one response over several lines), and nothing but imported events
    built on it since: its new version is appended beside it as a *revision*,
    under an id derived from the source id and the new content, and the source's
    events after it are appended again after the revision under ids derived from
    theirs and their new parent's, so HEAD ends on what the tool has now and the
    partial version stays as an abandoned branch.
    ``extra["import"]["revisions"]`` maps a source id to the id now standing for
    it, so the next import compares with that. Changed after the user built on
    it in infai: it is kept as imported and reported (``changed``), because a
    revision would leave the user's work on the old version unreachable from the
    new HEAD without them knowing why.
    """

    def __init__(self, writer: SessionLog, revisions: dict[str, str]) -> None:
        self.writer = writer
        self.revisions = revisions
        self.stored = {entry.id: entry.parent_id for entry in writer.entries()}
        self.remap: dict[str, str] = {}  # the source's id -> the stored id standing for it
        self.reissued: set[str] = set()  # source ids appended again under a revision id
        self.moved = 0  # kept events whose parent in the source is another now
        self.changed: list[str] = []  # kept events whose content in the source changed
        self.revised: list[str] = []  # changed events appended again as a revision

    def run(self, specs: Sequence[EventSpec]) -> list[EventSpec]:
        """The specs to append, in order, with revised ids and parents mapped."""
        known = {spec[0] for spec in specs} | set(self.revisions.values())
        new: list[EventSpec] = []
        for event_id, source_parent, branch, role, timestamp, record in specs:
            parent_id = self.remap.get(source_parent, source_parent)
            if source_parent in self.reissued:  # under a revision: appended again
                current = derive_id("infai:revision", f"{event_id}:{parent_id}", timestamp)
                self.reissued.add(event_id)
                self.revisions[event_id] = current
            else:
                current = self.revisions.get(event_id, event_id)
            self.remap[event_id] = current
            if current not in self.stored:
                new.append((current, parent_id, branch, role, timestamp, record))
                continue
            if self.stored.get(event_id, parent_id) != parent_id:
                self.moved += 1
            if self._same(current, record):
                continue
            if not self._only_imported_below(current, known):
                self.changed.append(event_id)
                continue
            data = encode_record(record)
            revision = derive_id("infai:revision", f"{event_id}:{digest_of(data)}", timestamp)
            self.remap[event_id] = self.revisions[event_id] = revision
            self.reissued.add(event_id)
            self.revised.append(event_id)
            if revision not in self.stored:
                new.append((revision, self.stored[current], None, role, timestamp, record))
        return new

    def _only_imported_below(self, event_id: str, known: set[str]) -> bool:
        """Whether every event built on ``event_id`` came from the source (none is the
        user's own work in infai)."""
        todo = [event_id]
        while todo:
            for child in self.writer.children(todo.pop()):
                if child.id not in known:
                    return False
                todo.append(child.id)
        return True

    def _same(self, event_id: str, record: Record) -> bool:
        """Whether the stored event says what ``record`` says (key order aside: one
        source read two ways, an OpenCode database and its storage tree, orders keys
        differently)."""
        event = self.writer.event(event_id)
        if event.digest is not None and event.digest == digest_of(encode_record(record)):
            return True  # in a blob, byte for byte
        stored = event.record if event.record is not None else self.writer.resolve(event)
        return record_to_obj(stored) == record_to_obj(record)


def _report_growth(
    foreign: ForeignSession, plan: _Plan, new: Sequence[EventSpec], user_head: str | None
) -> None:
    """The warnings a grown (or refused) source earns: the user's work left beside
    the import, entries moved or changed in the source, replies completed since."""
    warn = foreign.report.warn
    if new and user_head is not None:
        warn(
            None,
            f"the session was continued in infai since it was imported: the source's "
            f"{len(new)} new entries are added as a branch from the last imported one, "
            f"and HEAD moves to them; your own work stays on its branch, ending at event "
            f"{user_head}",
        )
    if plan.moved:
        warn(
            None,
            f"{plan.moved} entries imported before now follow other entries in the source "
            "(was the file rewritten?): they stay where they were imported",
        )
    if plan.changed:
        warn(
            None,
            f"{len(plan.changed)} entries imported before have changed in the source, "
            "after later entries were built on them: they stay as imported "
            f"(first: event {plan.changed[0]})",
        )
    if plan.revised:
        warn(
            None,
            f"{len(plan.revised)} entries were still being written when imported and are "
            "complete now: their complete version is added beside the partial one",
        )
    if (
        new
        and foreign.head is not None
        and new[-1][0] != plan.remap.get(foreign.head, foreign.head)
    ):
        warn(None, "the tool's current entry was imported before: HEAD is the last new one")


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

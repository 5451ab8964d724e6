"""The TUI's own store calls, all in one place, and all off the event loop.

The event loop draws the screen and runs the agent's turn; a store call can
block it for long: another process's writer lock, an fdatasync, a PostgreSQL
round trip, reading a 20,000-event index or a large blob. So every store call
the TUI makes itself (opening and closing a session, loading the path and a
page of events, the timeline's index entries, unfolding a blob, listing and
naming sessions, searching, switching the model) is a plain function here, and the app
runs it with :func:`off_loop`, in a thread. The agent's own appends during a
turn are the agent's to move (they go through :class:`AgentSession`).

What the status bar shows between reloads (the session's name, HEAD, the
event count and where HEAD's branch forked) is kept by :class:`Head` from the
events a turn reports as saved, so a settled event costs no store call.

The session's events are read through :func:`_log`: the session's read-only
:attr:`~infai.agent.AgentSession.view`, never its writer; the app changes a
session only through the :class:`~infai.agent.AgentSession` itself.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TypeVar

from infai.agent import AgentSession, Harness, context_tokens, diff_at
from infai.agent import files_at as files_listed
from infai.llm import Model
from infai.store import (
    CHECKPOINT_KINDS,
    Entry,
    Event,
    MessageRecord,
    Record,
    SearchHit,
    SearchResults,
    SessionStore,
    SessionView,
    StoreError,
    ToolCallRecord,
    WriterLocked,
)

from .filescreens import EventDiff
from .modals import Listed
from .panels import branch_label, fork_point
from .seam import TuiStore

T = TypeVar("T")

#: how many events back from the end of the path the used-token count is looked for
TOKENS_LOOKBACK = 50
#: how many sessions the picker lists (the most recently active)
LISTED = 200


async def off_loop(call: Callable[[], T]) -> T:
    """Run ``call`` (a store call) in a thread and wait for it without blocking the loop."""
    return await asyncio.to_thread(call)


def _log(session: AgentSession) -> SessionView:
    """The session's events, for reading: its read-only view."""
    return session.view


@dataclass
class Head:
    """What the status bar knows of the open session without asking the store.

    Set from the store at each reload; between reloads each saved event moves
    HEAD to itself (the store's rule: an append becomes HEAD), and its links say
    whether HEAD's branch forked: ``branch_from`` is set exactly when the event
    did not continue from the HEAD before it.
    """

    name: str | None = None
    id: str | None = None
    seq: int = -1
    count: int = 0
    fork: int | None = None

    def saved(self, event: Event) -> None:
        """``event`` was appended: it is HEAD now."""
        fork: int | None
        if event.branch_from is not None:
            fork = event.parent_seq  # a new branch, from the event picked
        elif event.kind == "compaction":
            fork = None  # the path now begins at the compaction: no fork on it
        elif event.parent_seq >= 0 and event.parent_id == self.id:
            fork = self.fork  # the line goes on
        else:
            fork = None  # a root, or a line not seen here: not shown rather than wrong
        self.id, self.seq, self.fork = event.id, event.seq, fork
        self.count = max(self.count, event.seq + 1)

    @property
    def label(self) -> str:
        return branch_label(self.seq, self.count, self.fork)


@dataclass
class Shown:
    """The session as stored, read for a reload: what the chat, the pending bar
    and the status bar show."""

    entries: list[Entry]  # the path to the pending parent (or HEAD), from the index
    page: list[Event]  # the path's last page, loaded (blobs not read)
    pending: Entry | None
    used_tokens: int
    head: Head = field(default_factory=Head)
    #: the events before the compaction the path starts at (shown folded above it)
    earlier: list[str] = field(default_factory=list)


def load_path(session: AgentSession, store: TuiStore, page: int) -> Shown:
    """Read what a reload shows: the path, its last ``page`` events, the pending
    parent, HEAD and its fork, the input tokens last used and the session's name.

    The view is refreshed first: where other processes may append (PostgreSQL),
    it shows what they appended since (on the file store it is a no-op)."""
    log = _log(session)
    log.refresh()
    pending = session.pending_parent
    entries = log.path(pending) if log.count else []
    head_path = entries if pending is None else (log.path() if log.count else [])
    last = head_path[-1] if head_path else None
    head = Head(
        name=store.info(session.session_id).name,
        id=log.head,
        seq=last.seq if last else -1,
        count=log.count,
        fork=fork_point(head_path),
    )
    earlier: list[str] = []
    if entries and entries[0].kind == "compaction":  # what came before it, from the index
        whole = log.path(pending, to_boundary=False)
        earlier = [entry.id for entry in whole[: len(whole) - len(entries)]]
    return Shown(
        earlier=earlier,
        entries=entries,
        page=[log.event(entry.id) for entry in entries[-page:]] if page else [],
        pending=log.entry(pending) if pending else None,
        used_tokens=_last_input_tokens(log, entries),
        head=head,
    )


def _last_input_tokens(log: SessionView, entries: list[Entry]) -> int:
    """What the next request holds, as the agent counts it (:func:`context_tokens`):
    the last reported usage and what came after it, from the path's last events
    (a summary, when the path starts at a compaction).

    No blob is read to open a session: an event kept in one counts by its
    preview, and a reply kept in one by its preview too (its usage is in the
    blob), so the gauge is a lower bound until the next reply reports the count.
    """
    return context_tokens([log.event(entry.id) for entry in entries[-TOKENS_LOOKBACK:]])


def event_loader(session: AgentSession) -> Callable[[list[str]], list[Event]]:
    """Loads events by id (no blob read): a page the user scrolls up to. The view
    is taken at each call: between turns it is a new reader each time."""
    return lambda ids: [_log(session).event(event_id) for event_id in ids]


def record_resolver(session: AgentSession) -> Callable[[Event], Record]:
    """Reads an event's record from its blob: a folded result or message unfolded
    (the view taken at each call, as :func:`event_loader` does)."""
    return lambda event: _log(session).resolve(event)


@dataclass
class TimelineRows:
    """Index entries for the timeline: those since ``since`` (or all when
    ``since`` is None), with HEAD and the pending parent read at the same time."""

    entries: list[Entry]
    since: int | None
    head: str | None
    pending: str | None


def timeline_rows(session: AgentSession, since: int | None) -> TimelineRows:
    log = _log(session)
    count = log.count
    if since is not None and since <= count:
        entries = [log.entry_at(seq) for seq in range(since, count)]
    else:
        since, entries = None, list(log.entries())
    return TimelineRows(entries, since, log.head, session.pending_parent)


def select(session: AgentSession, event_id: str | None) -> None:
    """Continue from ``event_id`` with the next prompt (None: from HEAD)."""
    session.select(event_id)


class SessionHeld(StoreError):
    """Another process has the session open for writing (another TUI, a run): it
    is not opened here, and nothing waited for it."""

    def __init__(self, session_id: str, holder: str) -> None:
        super().__init__(f"session {session_id} is open in another infai{holder}")
        self.session_id = session_id
        #: `` (pid N)`` as the holder wrote it into the lock, or ""
        self.holder = holder


def held_by(store: SessionStore, session_id: str) -> str | None:
    """Who holds ``session_id`` open for writing (`` (pid N)``, or "" when it did not
    say); None: nobody (or a store whose sessions several processes write at once).
    Asked at once: the store's open mark, then a writer with no wait, whose refusal
    names the holder's pid."""
    if store.shared_writers or not store.marked_open([session_id]):
        return None
    try:
        log = store.open_writer(session_id, timeout=0)
    except WriterLocked as exc:
        found = re.search(r" \(pid \d+\)", str(exc))
        return found[0] if found else ""
    log.close()  # let go meanwhile
    return None


def open_session(harness: Harness, session_id: str | None) -> tuple[AgentSession, bool]:
    """Open ``session_id`` (None: a new one), its writer let go until a turn needs
    it (:func:`let_go`); also says whether it was created here. One another
    process holds raises :class:`SessionHeld` at once (no wait)."""
    created = session_id is None
    if session_id is None:
        session_id = harness.new_session()
    elif (holder := held_by(harness.store, session_id)) is not None:
        raise SessionHeld(session_id, holder)
    opened = harness.open(session_id)
    try:
        let_go(opened)
    except BaseException:
        opened.close()
        raise
    return opened, created


def let_go(session: AgentSession) -> None:
    """Hold ``session``'s writer only while its slot's work runs (a turn, a
    compaction, a restore), and let go of it now: between turns another
    terminal's ``infai run --session`` does not wait for this app (see
    :mod:`.elsewhere`)."""
    session.park_between_turns = True
    session.park()


#: the events the read-only view shows (the newest of the path)
VIEWED = 200


def transcript(store: TuiStore, session_id: str) -> list[tuple[str, str]]:
    """The session's path as (who, text) lines for a read-only look, the newest
    :data:`VIEWED` events, from a reader (no lock taken)."""
    with store.open_reader(session_id) as reader:
        entries = reader.path(to_boundary=False)[-VIEWED:]
        lines: list[tuple[str, str]] = []
        for entry in entries:
            record = reader.event(entry.id, resolve=True).record
            if isinstance(record, MessageRecord):
                lines.append((entry.role, record.content))
            elif isinstance(record, ToolCallRecord):
                lines.append(("tool", f"{record.name} {record.arguments}"))
            else:
                lines.append((entry.kind, entry.preview))
    return lines


def close_session(session: AgentSession, store: SessionStore, discard_if_unused: bool) -> None:
    """Close ``session``; with ``discard_if_unused``, a session nobody used (no
    event, no name) goes away.

    The writer's lock is released even when closing fails (the error is raised
    after): a failed close must not keep the session locked for everyone else.
    """
    log = _log(session)
    unused = log.count == 0
    try:
        session.close()
    except BaseException:
        with suppress(Exception):
            log.close()  # idempotent: a no-op if the session got that far
        raise
    sid = session.session_id
    if discard_if_unused and unused and not store.info(sid).name:
        store.remove_session(sid)


def first_prompt(store: TuiStore, session_id: str) -> str:
    """The preview of the session's first prompt (among its first 20 events), or ""
    (the index only; an unreadable session: "")."""
    try:
        with store.open_reader(session_id) as reader:
            heads = (reader.entry_at(seq) for seq in range(min(reader.count, 20)))
            first = next((e for e in heads if e.role == "user"), None)
    except StoreError:
        return ""
    return first.preview if first is not None else ""


def titles(store: TuiStore, hits: list[SearchHit]) -> dict[str, str]:
    """Each hit's session's title, as the picker shows it: its name, else its first
    prompt (read once per session; the hits' own field names only a name)."""
    found: dict[str, str] = {}
    for hit in hits:
        if hit.session_id not in found:
            found[hit.session_id] = hit.session_name or first_prompt(store, hit.session_id)
    return found


def sessions(harness: Harness, limit: int = LISTED) -> list[Listed]:
    """The sessions the picker lists, most recently active first (the newest
    ``limit``): each with its title (its name, else its first prompt's preview)
    and its event count, read from its index (no chunk, no blob). A session that
    cannot be read is listed all the same, untitled."""
    rows = []
    for info in harness.sessions()[:limit]:
        title, count = info.name or "", 0
        try:
            with harness.store.open_reader(info.id) as reader:
                count = reader.count
                if not title:
                    heads = (reader.entry_at(seq) for seq in range(min(count, 20)))
                    first = next((e for e in heads if e.role == "user"), None)
                    title = first.preview if first is not None else ""
        except StoreError:
            title = title or "(unreadable)"
        rows.append(Listed(info, title, count))
    return rows


def search(store: TuiStore, query: str, limit: int) -> SearchResults:
    """The search panel's hits for ``query``, best first (every session and branch)."""
    return store.search(query, limit=limit)


def name_of(store: TuiStore, session_id: str) -> str | None:
    return store.info(session_id).name


def rename(store: TuiStore, session_id: str, name: str | None) -> None:
    store.update_info(session_id, name=name)


def use_model(harness: Harness, session: AgentSession, name: str) -> Model:
    """Switch the harness and the open session (kept open) to the model ``name``;
    returns the model used before, for the caller to close on the loop."""
    return harness.use_model(session, name)


def event_diff(session: AgentSession, store: SessionStore, event_id: str) -> EventDiff:
    """The files at ``event_id`` against the snapshot before them on its path
    (index entries to find both, then :func:`~infai.agent.diff_at`). Blocks on
    the store and the disk: run it in a thread."""
    path = session.view.path(event_id, to_boundary=False)
    marks = [entry for entry in path if entry.kind in CHECKPOINT_KINDS]
    seq = path[-1].seq if path else "?"
    if not marks:
        return EventDiff(f"no files were recorded at or before #{seq}")
    new = marks[-1]
    at = f"#{new.seq}" + ("" if new.seq == seq else f" (the files of #{seq})")
    if len(marks) == 1:
        listed = files_listed(store, session.session_id, new.id)
        paths = [str(item["path"]) for item in listed["files"]]
        return EventDiff(f"files at {at}: first recorded, {len(paths)} file(s)", listed=paths)
    old = marks[-2]
    report = diff_at(store, session.session_id, old.id, new.id)
    return EventDiff(f"files at {at} against #{old.seq}", report=report)

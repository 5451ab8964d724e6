"""What every storage backend offers: the contract the layers above rely on.

Two backends implement it: the file store (:class:`infai.store.file.Store`,
the default: a directory per session) and PostgreSQL
(:class:`infai.store.pg.PgStore`, for several machines sharing sessions). The
agent, the shells and import/export see only this surface, and one contract
test suite runs against both; ``tests/store/contract/test_conformance.py``
assigns each backend's classes to these protocols so that mypy fails the day a
backend drifts. :func:`infai.store.open_store` picks the backend from a
location.

Differences the contract allows: the file store lets one writer hold a session
at a time (a second waits, then fails with
:class:`~infai.store.errors.WriterLocked`), so its turn lease holds nothing, its
writer never needs a refresh and it has no other process's appends to watch;
PostgreSQL lets writers on many machines share one, and an append whose
writer's idea of HEAD is stale fails with
:class:`~infai.store.errors.HeadConflict` instead of forking HEAD silently. A
turn takes the session's lease first (:meth:`SessionStore.lease`); a second
process gets :class:`~infai.store.errors.SessionBusy` at once.

Errors are the contract's too, the same on both backends (the contract tests
check them on each): a session that is not there is
:class:`~infai.store.errors.SessionNotFound`, an event that is not in the view
(by id, or a sequence number outside ``0..count-1``)
:class:`~infai.store.errors.EventNotFound`, a malformed id or value
:class:`~infai.store.errors.InvalidInput`, and stored bytes that do not verify
:class:`~infai.store.errors.CorruptionError`: that one means damage, never a
caller's mistake.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Self

if TYPE_CHECKING:
    import threading

    from .errors import StoreError
    from .events import Context, Entry, Event, EventSpec
    from .info import Changed, SessionInfo, SessionSummary
    from .objects import ObjectStore
    from .options import StoreOptions
    from .records import Record
    from .report import FsckReport
    from .search import DamagedSession, Progress, SearchResults

#: what a store's ``watch`` callback gets as ``seq`` when the session was removed
REMOVED = -2


class Lease(Protocol):
    """A session's turn lease: held until released (or until its process dies)."""

    def release(self) -> None:
        """Let another process take the turn (idempotent)."""


class SessionView(Protocol):
    """A session read at one moment: its tree, events and active context."""

    session_id: str

    @property
    def head(self) -> str | None:
        """The id of the active tip as of this snapshot; None for an empty session."""

    @property
    def count(self) -> int:
        """How many events this snapshot holds (sequence numbers run ``0..count-1``)."""

    def entry_at(self, seq: int) -> Entry:
        """The entry of the ``seq``-th event, without its record; a ``seq`` outside
        ``0..count-1`` raises ``EventNotFound`` (a damaged entry ``CorruptionError``)."""

    def seq_of(self, event_id: str) -> int:
        """The sequence number of ``event_id``; raises ``EventNotFound``."""

    def entry(self, event_id: str) -> Entry:
        """The entry of ``event_id`` without its record; raises ``EventNotFound``."""

    def entries(self) -> Iterator[Entry]:
        """Every event's entry, oldest first (the whole tree: for timelines, not resumes)."""

    def path(self, at: str | None = None, *, to_boundary: bool = True) -> list[Entry]:
        """Entries from the root, or with ``to_boundary`` the nearest compaction, to ``at``
        (default HEAD), oldest first, without records."""

    def children(self, event_id: str) -> list[Entry]:
        """Direct children of ``event_id``, oldest first; raises ``EventNotFound``."""

    def roots(self) -> list[Entry]:
        """Events without a parent, oldest first."""

    def leaves(self) -> list[Entry]:
        """Tips of every branch (events without children), oldest first."""

    def event(self, event_id: str, *, resolve: bool = False) -> Event:
        """One event with its record; a blob's record stays ``None`` unless ``resolve``."""

    def resolve(self, event: Event) -> Record:
        """The event's record, loading its blob and checking its digest if needed."""

    def context(self, at: str | None = None, *, resolve: bool = True) -> Context:
        """What a model sees at ``at`` (default HEAD): the path from the nearest
        compaction, with records (blobs too, unless ``resolve`` is false)."""

    def refresh(self) -> None:
        """See what was appended since (a no-op where nothing else can append)."""

    def close(self) -> None:
        """Release what the view holds (a writer also its lock); idempotent."""

    def __enter__(self) -> Self:
        """The view itself; leaving the block closes it."""

    def __exit__(self, *exc: object) -> None:
        """Close the view."""


class SessionLog(SessionView, Protocol):
    """A session opened for appending (and two-phase branch selection)."""

    @property
    def pending_parent(self) -> str | None:
        """The event the next append will follow if one was selected, else None (HEAD)."""

    def select(self, event_id: str | None) -> None:
        """Make ``event_id`` the next append's parent (None: HEAD); nothing is written
        and HEAD stays until that append."""

    def append(self, record: Record, role: str, *, parent: str | None = None) -> Event:
        """Append one event after ``parent`` (default: the selected event, else HEAD) and
        move HEAD to it; durable when it returns."""

    def append_batch(
        self, items: Sequence[tuple[Record, str]], *, parent: str | None = None
    ) -> list[Event]:
        """Append events as one transaction, each after the one before: all are durable
        or none is."""

    def import_batch(self, specs: Sequence[EventSpec]) -> list[Event]:
        """Append events with their ids, links and times as given (import and copy);
        the caller has checked that the ids are new and the parents exist."""


class SessionStore(Protocol):
    """Sessions: create, list, read, write, check, remove; leases and change feeds."""

    options: StoreOptions
    #: whether other processes may append to a session this one has open for writing
    shared_writers: bool
    #: a local directory for this machine's files (the server token), whatever the backend
    home: Path
    recovery_notes: dict[str, list[str]]
    unreadable: list[StoreError]
    #: what searching or listing had to repair in a derived index (a damaged file
    #: rebuilt), in words, for shells to show; appended to, never cleared by the store
    index_notes: list[str]

    @property
    def objects(self) -> ObjectStore:
        """The store-wide content-addressed objects (workspace snapshots' file
        contents and trees, tool manifests): shared by every session of the store."""

    def create_session(
        self,
        *,
        name: str | None = None,
        working_dir: str | None = None,
        model: str | None = None,
        parent_session: str | None = None,
        parent_event: str | None = None,
        session_id: str | None = None,
    ) -> SessionInfo:
        """Create an empty session durably; ``session_id`` is for import (ids are kept),
        and a taken one raises ``SessionExists``."""

    def exists(self, session_id: str) -> bool:
        """Whether a session by that id is here (a malformed id raises ``InvalidInput``)."""

    def info(self, session_id: str) -> SessionInfo:
        """The session's metadata; raises ``SessionNotFound``."""

    def update_info(self, session_id: str, **changes: Changed) -> SessionInfo:
        """Change name, working_dir, model or extra atomically; returns the new metadata."""

    def restore_info(self, info: SessionInfo) -> None:
        """Write ``info`` as the session's metadata unchanged, timestamps included
        (import); atomically, and on the file store under the session's writer lock
        (as :meth:`update_info`). A session that is not there raises
        ``SessionNotFound`` and nothing is written."""

    def list_sessions(self) -> list[SessionInfo]:
        """Every session's metadata, most recently active first; ones that cannot be
        read are left out and their errors kept in ``unreadable``."""

    def list_summaries(self) -> list[SessionSummary]:
        """As :meth:`list_sessions`, each with its first prompt and event count (for
        listings people read; as cheap as :meth:`list_sessions`, no event is read)."""

    def remove_session(self, session_id: str) -> None:
        """Delete a session for good; waits for its writer lock (file store) or takes its
        turn lease (PostgreSQL), so never under a live writer or a running turn."""

    def open_reader(self, session_id: str) -> SessionView:
        """A snapshot of the session's committed events; takes no lock."""

    def open_writer(self, session_id: str, *, timeout: float | None = None) -> SessionLog:
        """The session opened for appending; on the file store this waits up to
        ``timeout`` for the writer lock, then raises ``WriterLocked``."""

    def lease(self, session_id: str) -> Lease:
        """Take the session's turn lease, or raise ``SessionBusy`` at once."""

    def open_mark(self, session_id: str, workdir: str | None = None) -> Lease:
        """Say that ``session_id`` is open in this process until released (or the
        process dies), for :meth:`marked_open`: a shared mark any number of
        processes may hold (PostgreSQL). The file store's writer lock says it
        already: its mark holds nothing. ``workdir``: the directory the session's
        tools work in, for :meth:`marked_open_in` (the file store records it in the
        lock file of the writer this store has open, so it takes the writer first)."""

    def marked_open(self, session_ids: list[str]) -> list[str]:
        """Those of ``session_ids`` some process has open now (file store: their
        writer lock is held; PostgreSQL: an :meth:`open_mark` is); asked before a
        restore of files another open session could be writing."""

    def marked_open_in(self, session_ids: list[str], workdir: str) -> list[str]:
        """Those of ``session_ids`` some process has open now with ``workdir`` given
        to its :meth:`open_mark`: asked about sessions naming no working directory
        (imported ones work where they are opened). An older infai's marks record
        no directory: never counted here."""

    def watch(self, callback: Callable[[str | None, int], None], stop: threading.Event) -> None:
        """Call ``callback(session_id, seq)`` for other processes' appends until ``stop``
        (blocking: run it in a thread; returns at once where there are none to hear)."""

    def search(
        self,
        query: str,
        *,
        session: str | None = None,
        working_dir: str | None = None,
        kind: str | None = None,
        limit: int = 20,
    ) -> SearchResults:
        """Full-text search over every event on every branch of every session, best
        first (:mod:`infai.store.search` has the query syntax and the hit's fields).

        ``session`` keeps one session's hits (unknown: ``SessionNotFound``),
        ``working_dir`` the sessions working in that directory or below it, ``kind``
        one event kind; at most ``limit`` hits. The index is derived and caught up
        first, so events appended by any process are found. Bad syntax, an unknown
        kind or a limit below 1 raise ``InvalidInput`` naming them. Ranking differs
        between backends (FTS5's bm25, PostgreSQL's ts_rank); what matches does not.
        A hit list (a list) whose ``window`` says when only the newest matches were
        looked at (the directory store, for a very common word). An event whose
        bytes do not verify (a flipped byte, a blob that no longer matches its
        digest) is left out of the index and never fails a search: the answer's
        ``damaged`` names each session of its scope with such events.
        """

    def rebuild_search_index(self, progress: Progress | None = None) -> list[DamagedSession]:
        """Build the search index again from every session (``progress(done, total)``
        in sessions); search works without calling this: it is for repair. Returns
        the sessions whose damaged events were left out (as a search names them)."""

    def fsck(self, session_id: str, *, repair: bool = False) -> FsckReport:
        """Verify the whole session (reads everything); ``repair`` first fixes what is
        provably safe to fix."""

    def close(self) -> None:
        """Release the store's own resources (PostgreSQL: its pool); idempotent."""

    def __enter__(self) -> Self:
        """The store itself; leaving the block closes it."""

    def __exit__(self, *exc: object) -> None:
        """Close the store."""

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
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Self

if TYPE_CHECKING:
    import threading

    from .errors import StoreError
    from .events import Context, Entry, Event, EventSpec
    from .info import Changed, SessionInfo
    from .options import StoreOptions
    from .records import Record
    from .report import FsckReport

#: what a store's ``watch`` callback gets as ``seq`` when the session was removed
REMOVED = -2


class Lease(Protocol):
    """A session's turn lease: held until released (or until its process dies)."""

    def release(self) -> None: ...


class SessionView(Protocol):
    """A session read at one moment: its tree, events and active context."""

    session_id: str

    @property
    def head(self) -> str | None: ...
    @property
    def count(self) -> int: ...
    def entry_at(self, seq: int) -> Entry: ...
    def seq_of(self, event_id: str) -> int: ...
    def entry(self, event_id: str) -> Entry: ...
    def entries(self) -> Iterator[Entry]: ...
    def path(self, at: str | None = None, *, to_boundary: bool = True) -> list[Entry]: ...
    def children(self, event_id: str) -> list[Entry]: ...
    def roots(self) -> list[Entry]: ...
    def leaves(self) -> list[Entry]: ...
    def event(self, event_id: str, *, resolve: bool = False) -> Event: ...
    def resolve(self, event: Event) -> Record: ...
    def context(self, at: str | None = None, *, resolve: bool = True) -> Context: ...
    def refresh(self) -> None:
        """See what was appended since (a no-op where nothing else can append)."""

    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...


class SessionLog(SessionView, Protocol):
    """A session opened for appending (and two-phase branch selection)."""

    @property
    def pending_parent(self) -> str | None: ...
    def select(self, event_id: str | None) -> None: ...
    def append(self, record: Record, role: str, *, parent: str | None = None) -> Event: ...
    def append_batch(
        self, items: Sequence[tuple[Record, str]], *, parent: str | None = None
    ) -> list[Event]: ...
    def import_batch(self, specs: Sequence[EventSpec]) -> list[Event]: ...


class SessionStore(Protocol):
    """Sessions: create, list, read, write, check, remove; leases and change feeds."""

    options: StoreOptions
    #: whether other processes may append to a session this one has open for writing
    shared_writers: bool
    #: a local directory for this machine's files (the server token), whatever the backend
    home: Path
    recovery_notes: dict[str, list[str]]
    unreadable: list[StoreError]

    def create_session(
        self,
        *,
        name: str | None = None,
        working_dir: str | None = None,
        model: str | None = None,
        parent_session: str | None = None,
        parent_event: str | None = None,
        session_id: str | None = None,
    ) -> SessionInfo: ...
    def exists(self, session_id: str) -> bool: ...
    def info(self, session_id: str) -> SessionInfo: ...
    def update_info(self, session_id: str, **changes: Changed) -> SessionInfo: ...
    def restore_info(self, info: SessionInfo) -> None: ...
    def list_sessions(self) -> list[SessionInfo]: ...
    def remove_session(self, session_id: str) -> None: ...
    def open_reader(self, session_id: str) -> SessionView: ...
    def open_writer(self, session_id: str, *, timeout: float | None = None) -> SessionLog: ...
    def lease(self, session_id: str) -> Lease:
        """Take the session's turn lease, or raise ``SessionBusy`` at once."""

    def watch(self, callback: Callable[[str | None, int], None], stop: threading.Event) -> None:
        """Call ``callback(session_id, seq)`` for other processes' appends until ``stop``
        (blocking: run it in a thread; returns at once where there are none to hear)."""

    def fsck(self, session_id: str, *, repair: bool = False) -> FsckReport: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...

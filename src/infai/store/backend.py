"""What every storage backend offers: the contract the layers above rely on.

Two backends implement it: the file store (:class:`~infai.store.store.Store`,
the default: a directory per session) and PostgreSQL
(:class:`~infai.store.pg.PgStore`, for several machines sharing sessions). The
agent, the shells and import/export see only this surface, and one contract
test suite runs against both. :func:`open_store` picks the backend from a
location: a ``postgresql://`` URL, else a directory.

Differences the contract allows: the file store lets one writer hold a session
at a time (a second waits, then fails with
:class:`~infai.store.errors.WriterLocked`); PostgreSQL lets writers on many
machines share one, and an append whose writer's idea of HEAD is stale fails
with :class:`~infai.store.errors.HeadConflict` instead of forking HEAD
silently. The file store's events have a location in a chunk file; the
database's have none that means anything.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .events import Context, Entry, Event
    from .fsck import FsckReport
    from .options import StoreOptions
    from .records import Record
    from .store import Changed, SessionInfo

#: (id, parent_id, branch_from, role, timestamp, record) of an imported event
EventSpec = tuple[str, str, "str | None", str, str, "Record"]

#: what a store's ``watch`` callback gets as ``seq`` when the session was removed
REMOVED = -2


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
    def close(self) -> None: ...


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
    """Sessions: create, list, read, write, check, remove."""

    options: StoreOptions
    #: whether other processes may append to a session this one has open for writing
    shared_writers: bool
    #: a local directory for this machine's files (the server token), whatever the backend
    home: Path
    recovery_notes: dict[str, list[str]]
    unreadable: list[Any]

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
    def open_reader(self, session_id: str) -> Any: ...
    def open_writer(self, session_id: str, *, timeout: float | None = None) -> Any: ...
    def fsck(self, session_id: str, *, repair: bool = False) -> FsckReport: ...
    def close(self) -> None: ...


def is_database_url(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def open_store(location: str | Path | None = None, options: StoreOptions | None = None) -> Any:
    """The store at ``location``: a PostgreSQL URL, else a directory (None: the default).

    Returns a :class:`~infai.store.store.Store` or a :class:`~infai.store.pg.PgStore`.
    """
    if isinstance(location, str) and is_database_url(location):
        from .pg import PgStore

        return PgStore(location, options=options)
    from .layout import default_home
    from .store import Store

    return Store(Path(location) if location else default_home(), options=options)

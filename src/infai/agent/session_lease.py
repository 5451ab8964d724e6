"""Where an :class:`~.session.AgentSession` holds its writer: the lease a
shared store's session takes for each piece of work that writes, and parking
between turns (the writer released, reads served by a reader). A base of the
session class, kept apart so that module stays small; the prose is in
:mod:`.session`'s docstring.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from infai.store import Event, Lease, SessionLog, SessionStore, SessionView

from .context import ContextCache
from .unfinished import record_unfinished


class SessionLease:
    """The lease and parking of :class:`~.session.AgentSession`, whose state it is."""

    store: SessionStore
    session_id: str
    working_dir: Path
    writer: SessionLog
    cache: ContextCache
    park_between_turns: bool
    _lease: Any
    _held: int
    _closed: bool
    _parked: SessionView | None
    _pending: str | None
    _open_mark: Lease | None
    _found: list[Event]
    _left: str | None

    @property
    def view(self) -> SessionView:
        """The session as stored, read-only: its tree, events and context."""
        view: SessionView = self._parked or self.writer
        return view

    @property
    def pending_parent(self) -> str | None:
        """The older event the next prompt continues from (None: HEAD)."""
        if self._parked is not None:
            return self._pending
        pending: str | None = self.writer.pending_parent
        return pending

    @property
    def parked(self) -> bool:
        """Whether the writer is released (between turns, see :meth:`park`)."""
        return self._parked is not None

    def park(self) -> None:
        """Release the writer (the file store's lock) until the slot is next claimed;
        reads go to a reader meanwhile. Nothing happens while the slot is held or
        once closed. Blocking store work: call it in a worker thread."""
        if self._parked is not None or self._held or self._closed:
            return
        reader = self.store.open_reader(self.session_id)
        self._pending = self.writer.pending_parent
        self._parked = reader
        self.writer.close()
        mark, self._open_mark = self._open_mark, None
        if mark is not None:  # between turns nothing here writes files
            mark.release()

    def _unpark(self) -> None:
        """Take a writer again (it reads HEAD: whatever was appended meanwhile is the
        base of the next append) and restore the picked event."""
        parked = self._parked
        if parked is None:
            return
        writer = self.store.open_writer(self.session_id)  # may wait for another writer
        try:
            if self._pending is not None:
                writer.select(self._pending)
            self._open_mark = self.store.open_mark(self.session_id, str(self.working_dir))
        except BaseException:
            writer.close()
            raise
        self.writer, self._parked, self._pending = writer, None, None
        self.cache = ContextCache(writer, pipeline=self.cache.pipeline)
        parked.close()

    # -- the lease -------------------------------------------------------------

    def acquire(self) -> None:
        """Take the session's lease for a turn (nested takes are counted).

        A store whose writers are exclusive anyway (the file store's lock) has no
        lease. Taking one re-reads HEAD, so the turn starts from the latest event
        any process appended. Raises :class:`~infai.store.SessionBusy`.
        """
        if self._held == 0:
            take = getattr(self.store, "lease", None)
            if take is not None:
                self._lease = take(self.session_id)
            try:
                self._unpark()
                refresh = getattr(self.writer, "refresh", None)
                if self._lease is not None and refresh is not None:
                    refresh()
                if self.writer.head != self._left:  # another process wrote, may have died
                    found = record_unfinished(self.writer)
                    if found is not None:
                        self._found.append(found)
            except BaseException:
                if self._lease is not None:
                    self._lease.release()
                    self._lease = None
                raise
        self._held += 1

    def release(self) -> None:
        """Give back one :meth:`acquire`; the last one releases the lease."""
        self._held -= 1
        if self._held == 0:
            self._left = self.writer.head
        if self._held == 0 and self._lease is not None:
            lease, self._lease = self._lease, None
            lease.release()
        if self._held == 0 and self.park_between_turns:
            # best effort: if it fails the writer stays held (the work itself
            # succeeded) and the next release tries again
            with suppress(Exception):
                self.park()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold the session's lease for the block (see :meth:`acquire`)."""
        self.acquire()
        try:
            yield
        finally:
            self.release()


__all__ = ["SessionLease"]

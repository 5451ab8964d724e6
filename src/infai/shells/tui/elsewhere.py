"""The open session let go between turns, and what other processes append to it.

Why: a TUI left open on a session used to hold the session's writer (the file
store's lock) the whole time, so ``infai run --session S`` or ``infai session
append`` from another terminal waited 10 s for it and failed. The TUI now does
what the server does (:attr:`~infai.agent.AgentSession.park_between_turns`):
the writer is held only while a turn, a compaction or a restore runs; between
them the session is read through a reader, and the next turn opens a writer
that starts from whatever was appended meanwhile.

What others append is shown as it lands: where the store tells of other
processes' appends (PostgreSQL's feed, :meth:`~.prompting.Prompting._watch`)
that feed does it; the directory store has no feed (its writers never overlapped
before), so while the session is parked and no turn runs the app looks at the
session's event count every :data:`LOOK_EVERY` seconds (a reader opened in a
thread: the index's end, no record read) and reloads when it grew. A turn that
starts right after another process appended, before the look saw it, builds on
that append: its first event's parent is not the HEAD shown, and the app
reloads once the turn is over (:meth:`Elsewhere._heard`).
"""

from __future__ import annotations

import asyncio

from infai.agent import AgentSession
from infai.store import Event, StoreError

from .prompting import Prompting
from .seam import TuiStore
from .store_io import Head, off_loop

#: seconds between two looks at the parked session's event count while idle
LOOK_EVERY = 1.0


def stored_count(store: TuiStore, session_id: str) -> int:
    """How many events ``session_id`` holds now, as another process left it (a
    reader of its own: the parked view is the app's, read by reloads meanwhile)."""
    with store.open_reader(session_id) as reader:
        return reader.count


class Elsewhere(Prompting):
    """Looks for other processes' appends while the session is parked."""

    head: Head
    _ending: bool
    _looking: asyncio.Task[None] | None = None

    def _look_elsewhere(self) -> None:
        """Every :data:`LOOK_EVERY` s (see the module): one look at a time, only
        while idle and parked, where the store has no feed of its own."""
        session = self.session
        if (
            session is None
            or self._ending
            or self.busy
            or not session.parked
            or self.harness.store.shared_writers
            or (self._looking is not None and not self._looking.done())
        ):
            return
        self._looking = asyncio.get_running_loop().create_task(self._count_elsewhere(session))

    async def _count_elsewhere(self, session: AgentSession) -> None:
        store = self.harness.store
        try:
            count = await off_loop(lambda: stored_count(store, session.session_id))
        except StoreError:  # removed meanwhile, unreadable: the next reload says so
            return
        if session is self.session and count > self.head.count and not self.busy:
            await self._appended_elsewhere(count - 1)

    def _heard(self, event: Event) -> None:
        """A saved event of this app's turn whose parent is not the HEAD shown (and
        that branches nowhere): another process appended before the turn began,
        so the session is shown again once the turn is over."""
        if event.branch_from is None and event.parent_seq >= 0 and event.parent_id != self.head.id:
            self._stale = True

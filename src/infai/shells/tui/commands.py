"""The app's slash commands that change the session or the model: a manual
compaction, a model switch, a rename.

Kept apart from :mod:`.app` as a base class of :class:`~.app.InfaiApp` so each
module stays readable; what they use of the app (the session, whether a turn
runs, the status bar, how events are shown) is declared here and provided by
the app. Each runs its store call in a thread (:mod:`.store_io`) and says what
failed in a toast, changing nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from infai.agent import AgentEvent, AgentSession, CompactionFailed, SlotConflict, Turn
from infai.llm import ModelUnavailable, close_model
from infai.store import StoreError

from . import store_io
from .modals import RenameScreen
from .panels import Status
from .store_io import Head, off_loop
from .style import Styled

if TYPE_CHECKING:
    from .backend import Backend
    from .seam import TuiHarness

#: how the agent loop's notice of an automatic compaction begins
COMPACTING = "compacting"


class Commands(Styled):
    """/compact, /model and /rename, over what the app provides."""

    harness: TuiHarness
    session: AgentSession | None
    backend: Backend
    state: Status
    head: Head
    _outcome: str

    @property
    def busy(self) -> bool:
        raise NotImplementedError

    def _refresh_status(self) -> None:
        raise NotImplementedError

    def _warm_model(self) -> None:
        raise NotImplementedError

    def _run_busy(self, work: Coroutine[Any, Any, None]) -> None:
        raise NotImplementedError

    async def _on_event(self, event: AgentEvent, turn: Turn | None = None) -> None:
        raise NotImplementedError

    async def _compact(self) -> None:
        """A manual compaction: a turn of its own (Ctrl-C cancels it; nothing changes).
        Its summary, once saved, is shown from the session's hub as any event is."""
        session = self.session
        assert session is not None
        self.notify("compacting…")
        self.state.notice = f"{COMPACTING}…"
        self._refresh_status()
        events = session.hub.subscribe()
        try:
            await session.compact()
            self._outcome = "done"  # a queued prompt goes once it is shown
        except (CompactionFailed, StoreError, SlotConflict) as exc:
            self.state.notice = "compaction failed"
            self._refresh_status()
            self.notify(f"compaction failed, nothing changed: {exc}", severity="error")
            return
        except asyncio.CancelledError:
            self.state.notice = "compaction cancelled"
            self._refresh_status()
            raise
        finally:
            events.close()  # it ends after what it holds: the summary, published when saved
        async for event in events:
            await self._on_event(event)
        self.notify("compacted: the context now starts from the summary")

    async def switch_model(self, name: str) -> None:
        if not name:
            self.notify(f"model: {self.harness.model.name} (/model NAME to switch)")
            return
        if self.busy:
            self.notify("wait for the turn to end", severity="warning")
            return
        space, session = self.harness, self.session
        if session is None:
            self.notify("no session is open (Ctrl-O)", severity="error")
            return
        try:  # an open session stays open: its writer, its picked event, its rules
            old = await self.backend.use_model(space, session, name)
        except (ModelUnavailable, StoreError) as exc:  # an unknown model, a key missing
            self.notify(str(exc), severity="error", timeout=10)
            return
        await close_model(old)  # the harness's old model: it holds it no more
        self._refresh_status()
        self.notify(f"model: {space.model.name}")
        self._warm_model()  # its SDK imported while the user types the next prompt

    async def rename(self, name: str | None) -> None:
        """Name the session ("": no name); None asks for the name in a dialog."""
        session = self.session
        if session is None:
            return
        sid, store = session.session_id, self.harness.store
        if name is not None:
            try:
                await off_loop(lambda: store_io.rename(store, sid, name or None))
            except StoreError as exc:
                self.notify(f"cannot rename: {exc}", severity="error", timeout=10)
            else:
                if session is self.session:
                    self.head.name = name or None
            self._refresh_status()
            return

        async def done(new: str | None) -> None:  # None: Esc, the name is kept
            if new is not None and self.session is session:
                await self.rename(new)

        try:
            current = await off_loop(lambda: store_io.name_of(store, sid))
        except StoreError as exc:
            self.notify(f"cannot rename: {exc}", severity="error", timeout=10)
            return
        self.push_screen(RenameScreen(current), callback=done)

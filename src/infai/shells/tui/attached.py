"""What the app does besides its own turns: permission questions, and, on a
server's session, what happens there without this app asking.

A base class of :class:`~.app.InfaiApp` (under :mod:`.files`), kept apart so
each module stays readable. :meth:`Attached.approve` is the approver of every
turn's questions: a modal, answered by the user (the turn waits). On a server
(``infai --remote URL``, :mod:`.remote_io`) a session's turn may run without
this app: one started by another client, or one already running when the app
attached; its deltas, saved events and end come on the session's ``followed``
subscription and are shown as the app's own are (:meth:`_follow`), and
Ctrl-C cancels it on the server. A question waiting when the app attaches is
asked at once. Closing the app leaves such a turn (and its question) on the
server (:meth:`_detach`), to be picked up again from anywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.worker import Worker

from infai.agent import AgentEvent, AgentSession, Lagged, Saved, Streamed, TurnEnded
from infai.tools import Ask, Reply

from .backend import LOCAL, Backend
from .diffs import asked_text
from .modals import ApprovalScreen
from .scrollback import Scrollback
from .store_io import off_loop

if TYPE_CHECKING:
    from infai.agent import Turn


class Attached(Scrollback):
    """Questions asked, and a server's session followed between this app's turns."""

    backend: Backend = LOCAL
    turn: Worker[None] | None
    _cancelled: bool

    if TYPE_CHECKING:

        async def _on_event(self, event: AgentEvent, turn: Turn | None = None) -> None: ...

        async def _refresh_timeline(self, rebuild: bool = False) -> None: ...

    async def approve(self, ask: Ask) -> Reply:
        """The policy's approver: a modal, answered by the user (the turn waits)."""
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        base = self.session.working_dir if self.session is not None else Path.cwd()
        screen = ApprovalScreen(ask, await off_loop(lambda: asked_text(ask, base)))

        def answered(answer: Reply | None) -> None:
            if not future.done():
                future.set_result(answer or "deny")

        self.push_screen(screen, callback=answered)
        try:
            return await future
        finally:
            if screen.is_active:  # the turn was cancelled while asking (or answered elsewhere)
                screen.dismiss("deny")

    def _follow_session(self, session: AgentSession) -> None:
        """On a server's session: show what happens there without this app."""
        followed: Any = getattr(session, "followed", None)
        if followed is not None:
            work = self._follow(session, followed)
            self.run_worker(work, group="follow", exclusive=True, exit_on_error=False)

    async def _follow(self, session: AgentSession, followed: AsyncIterator[object]) -> None:
        """The events of turns this app did not start, appends outside a turn, and
        every question (asked in a worker of the app's, answered on the server)."""
        try:
            async for item in followed:
                if session is not self.session:
                    return
                ask = getattr(session, "ask", None)
                if not isinstance(item, Saved | Streamed | TurnEnded):  # a question
                    if callable(ask):
                        self.run_worker(ask(item), group="ask", exit_on_error=False)
                    continue
                await self._on_event(item)
                if isinstance(item, TurnEnded):
                    self._cancelled = False
                    await self._refresh_timeline()
                    if self.turn is None or self.turn.is_finished:
                        await self._after_turn(item.outcome)
        except Lagged:  # far behind: the session as stored
            await self.reload()

    def _detach(self) -> None:
        """The app ends: a server's turn and its question stay on the server."""
        detach = getattr(self.session, "detach", None)
        if callable(detach):
            detach()


__all__ = ["Attached"]

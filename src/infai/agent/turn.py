"""A turn's handle and the slot's refusals: what :class:`~.session.AgentSession`
hands a shell that starts a turn, in a module of its own to keep the session's small.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from infai.errors import InfaiError
from infai.store import Event

from .hooks_turn import BLOCKED
from .loop import TurnEnded


class SlotConflict(InfaiError):
    """The session cannot do this now: its one slot for work that writes says no."""


class Busy(SlotConflict):
    """A turn, a compaction or a branch switch is already running in this session."""


class NotInFlight(SlotConflict):
    """There is no such turn in flight to cancel."""


class PromptBlocked(SlotConflict):
    """A UserPromptSubmit hook refused the turn's prompt: it was neither stored nor sent."""


@dataclass
class Turn:
    """A turn started with :meth:`AgentSession.start`: its id, its task, its end."""

    id: str
    task: asyncio.Task[TurnEnded] | None = None
    #: how it ended, once it has
    outcome: TurnEnded | None = field(default=None)
    #: the exception that ended it, if one did (a store's failure, say): a shell
    #: answers a session that could not be saved differently from a model's error
    failure: Exception | None = field(default=None)
    #: its prompt's event, once stored (set by :meth:`AgentSession.start`)
    prompt: asyncio.Future[Event] | None = field(default=None)

    async def asked(self) -> Event:
        """Wait until the turn's prompt is stored (durable) and return its event: a
        shell that says "accepted" (the server's 202) says it only then. Raises what
        ended the turn before that (a store's failure), or :class:`SlotConflict` if
        it was cancelled first."""
        assert self.task is not None and self.prompt is not None
        waiting: list[asyncio.Future[Any]] = [self.prompt, self.task]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if self.prompt.done():
            return self.prompt.result()
        if self.failure is not None:
            raise self.failure
        ended = self.outcome
        if (
            ended is not None
            and ended.outcome == "error"
            and ended.error
            and BLOCKED in ended.error
        ):
            raise PromptBlocked(f"turn {self.id}: {ended.error}")
        raise SlotConflict(f"turn {self.id} was cancelled before its prompt was stored")

    async def wait(self) -> TurnEnded:
        """Wait for the turn to end (a cancelled turn ends ``cancelled``)."""
        assert self.task is not None
        await asyncio.wait([self.task])
        return self.outcome or TurnEnded("cancelled")

"""What a turn emits: an append made durable, a live delta, the turn's end.

Their own module so that the loop (:mod:`.loop`) and its hook steps
(:mod:`.hooks_turn`) share them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infai.llm import StreamEvent
from infai.store import Event


@dataclass(frozen=True, slots=True)
class Saved:
    """An event is now durable in the session."""

    event: Event


@dataclass(frozen=True, slots=True)
class Streamed:
    """A live delta or notice from the model (shown, never persisted)."""

    event: StreamEvent


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """The turn is over: done, failed (``error`` says why) or cancelled."""

    outcome: Literal["done", "error", "cancelled"]
    error: str | None = None


AgentEvent = Saved | Streamed | TurnEnded

"""What the server keeps of a turn it runs: its questions, its message in flight.

Split from :mod:`.served` (one session open in the server), which uses them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from infai.agent import Turn, TurnEnded
from infai.store import Event, ToolCallRecord, ToolResultRecord
from infai.tools import Reply, Rule

from .channel import Frame


def new_id() -> str:
    return str(uuid.uuid4())


def stamp(seconds: float) -> str:
    return (
        datetime.fromtimestamp(seconds, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


@dataclass
class Question:
    """A permission question waiting for an answer through the API."""

    id: str
    tool: str
    subject: str
    reason: str
    always: tuple[Rule, ...]
    turn: str | None
    call_event_id: str | None
    arguments: dict[str, Any] | None
    asked_at: str
    expires_at: str
    answer: asyncio.Future[Reply]
    #: why "allow always" is exact only or not offered ("" when neither)
    note: str = ""
    #: who asks when it is not the session's own agent (a subagent)
    caller: str = ""
    #: whether watchers have been sent it (it is recorded in the store first)
    shown: bool = False

    def to_obj(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool": self.tool,
            "subject": self.subject,
            "reason": self.reason,
            "always": [rule.pattern for rule in self.always],
            "turn": self.turn,
            "call_event_id": self.call_event_id,
            "arguments": self.arguments,
            "note": self.note,
            "caller": self.caller,
            "asked_at": self.asked_at,
            "expires_at": self.expires_at,
        }


@dataclass
class Running:
    """A turn being answered, as the server follows it: the agent's turn, the
    message in flight so far, and its tool calls still waiting for a result."""

    turn: Turn
    #: deltas since the turn's last settled event: the message in flight
    deltas: list[Frame] = field(default_factory=list)
    #: tool calls of the turn still waiting for their result, oldest first
    calls: deque[Event] = field(default_factory=deque)
    #: set once watchers have been sent its ``turn_ended``
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def id(self) -> str:
        return self.turn.id

    @property
    def task(self) -> asyncio.Task[TurnEnded] | None:
        return self.turn.task


def follow(running: Running, event: Event) -> None:
    """Keep the turn's state: the message in flight restarts, calls wait for results."""
    running.deltas.clear()
    if event.kind == "tool_call":
        running.calls.append(event)
    elif isinstance(event.record, ToolResultRecord):
        call_id = event.record.call_id
        running.calls = deque(
            c
            for c in running.calls
            if not (isinstance(c.record, ToolCallRecord) and c.record.call_id == call_id)
        )

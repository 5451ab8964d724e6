"""What a context rule works on: one :class:`ContextPart` per event on the path,
and the :class:`ContextDecision` a rule hands back about one.

A part starts as what its event sends by default (a message as stored, a tool
call, a tool result; nothing for the other kinds, which a built-in rule gives
their text). Rules do not change parts themselves: they return decisions, and
the pipeline applies each one and records it as a :class:`ContextStep` with the
rule's name, so ``infai session context --explain`` can say which rule kept,
shortened or dropped what.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from infai.errors import InfaiError
from infai.llm import Message, ToolCall
from infai.llm.messages import Role
from infai.store import Event, MessageRecord, Record, ToolCallRecord, ToolResultRecord

#: what a step did to a part: sent it (as stored, or as a rule rendered it),
#: sent less of it, or left it out
Action = Literal["kept", "shortened", "dropped"]

#: the roles a stored message may have to be sent to a model
SENDABLE_ROLES = ("user", "assistant", "system")


class ContextError(InfaiError):
    """The context cannot be assembled; nothing is sent."""


class UnsendableEvent(ContextError):
    """An event on the path no model can take (a message whose role is none of
    :data:`SENDABLE_ROLES`); it is refused, never sent as something else."""


class ContextRuleFailed(ContextError):
    """A context rule raised, or decided something the pipeline cannot apply (a
    decision about an event it was not given, a tool call shortened)."""


def is_marker(record: MessageRecord, role: str) -> bool:
    """Whether a stored message is the interruption marker."""
    return role == "user" and record.metadata.get("interrupted") is True


@dataclass(frozen=True, slots=True)
class ContextStep:
    """One rule's effect on one part, as ``--explain`` shows it."""

    rule: str
    action: Action
    why: str


@dataclass(eq=False, slots=True)
class ContextPart:
    """One event on the path and what of it the model is sent (``message``: None
    while no rule has rendered it, or once it is dropped)."""

    event: Event
    message: Message | None = None
    dropped: bool = False
    steps: list[ContextStep] = field(default_factory=list)
    #: why the event cannot be sent, should it be kept (a message with a role no model takes)
    unsendable: str | None = None

    @property
    def kind(self) -> str:
        """The event's kind (``message``, ``tool_call``, ``tool_result``, ...)."""
        return self.event.kind

    @property
    def record(self) -> Record | None:
        """The event's stored record (resolved on every event a turn reads)."""
        return self.event.record

    @property
    def text(self) -> str:
        """The text this part sends so far (a tool output, a message's content)."""
        return self.message.content if self.message is not None else ""

    @property
    def action(self) -> Action:
        """What happened to it in the end: dropped, shortened by some rule, or kept."""
        if self.dropped:
            return "dropped"
        return "shortened" if any(s.action == "shortened" for s in self.steps) else "kept"

    def drop(self, why: str) -> ContextDecision:
        """A decision to leave this event out (a tool call goes with its result)."""
        return ContextDecision(self, "dropped", why)

    def shorten(self, text: str, why: str) -> ContextDecision:
        """A decision to send ``text`` in place of what this part sends now."""
        return ContextDecision(self, "shortened", why, text=text)

    def send(self, message: Message | str, why: str) -> ContextDecision:
        """A decision to send ``message`` (text: a user message) for this event:
        how a rule renders an event no model reads as stored (a summary, a note)."""
        if isinstance(message, str):
            message = Message(role="user", content=message)
        return ContextDecision(self, "kept", why, message=message)

    def keep(self, why: str) -> ContextDecision:
        """A decision that changes nothing but says why this rule let it through."""
        return ContextDecision(self, "kept", why)


@dataclass(frozen=True, slots=True)
class ContextDecision:
    """What a rule decided about one part; the pipeline applies it."""

    part: ContextPart
    action: Action
    why: str
    text: str | None = None
    message: Message | None = None


def _sendable_role(event: Event) -> Role | None:
    if event.role == "user":
        return "user"
    if event.role == "assistant":
        return "assistant"
    if event.role == "system":
        return "system"
    return None


def first_part(event: Event) -> ContextPart:
    """The part for ``event`` before any rule: what a conversation event sends as
    stored; nothing yet for the other kinds (and for the interruption marker)."""
    part = ContextPart(event)
    record = event.record
    if isinstance(record, ToolCallRecord):
        call = ToolCall(record.call_id, record.name, dict(record.arguments))
        part.message = Message(role="assistant", tool_calls=(call,))
    elif isinstance(record, ToolResultRecord):
        part.message = Message(
            role="tool",
            content=record.content,
            tool_call_id=record.call_id,
            tool_name=record.name,
            is_error=record.is_error,
        )
    elif isinstance(record, MessageRecord) and not is_marker(record, event.role):
        role = _sendable_role(event)
        if role is None:
            part.unsendable = (
                f"event {event.id} is a message with role {event.role!r}, which no model takes "
                f"({', '.join(SENDABLE_ROLES)}); continue from an event before it (--from)"
            )
            return part
        # an assistant's metadata carries what its provider needs back (an
        # Anthropic thinking signature); nothing else is sent on
        meta = dict(record.metadata) if role == "assistant" else {}
        part.message = Message(
            role=role, content=record.content, reasoning=record.reasoning, metadata=meta
        )
    return part


def apply_decision(decision: ContextDecision, rule: str) -> None:
    """Apply ``decision`` (made by ``rule``) to its part, recording the step."""
    part = decision.part
    if decision.action == "dropped":
        part.dropped, part.message = True, None
    elif decision.action == "shortened":
        if part.message is None or part.kind == "tool_call":
            raise ContextRuleFailed(
                f"context rule {rule!r} shortened event {part.event.id} ({part.kind}), "
                "which sends no text to shorten (drop it instead)"
            )
        part.message = replace(part.message, content=decision.text or "")
    elif decision.message is not None:
        part.message = decision.message
    part.steps.append(ContextStep(rule, decision.action, decision.why))

"""The context pipeline: events in, the messages a model is sent out, every
rule's decision recorded on the way.

:meth:`ContextPipeline.explain` turns each event into a part (:mod:`.parts`),
runs the rules in order over the parts still in, then assembles the messages.
Assembly is not a rule: it keeps what every provider requires whatever the
rules did. Tool calls join the assistant message that made them, and every
call gets a result right after it: a crash or a cancellation can leave a call
with no result in the store, and such a call gets a synthesized "interrupted"
error result, so nothing dangling is ever sent. A result whose call is not on
the path (or was dropped) is not sent either, and a call whose result a rule
dropped goes with it. The interruption note is joined with the user messages
beside it into one: a prompt left without an answer, the note and the next
prompt reach the model as one user message that says what happened, never as
user messages in a row with nothing between them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from infai.llm import Message
from infai.store import Event, MessageRecord

from .parts import (
    ContextDecision,
    ContextPart,
    ContextRuleFailed,
    ContextStep,
    UnsendableEvent,
    apply_decision,
    first_part,
    is_marker,
)
from .rules import ContextRule, builtin_rules

INTERRUPTED = "interrupted: this tool call did not finish (the session stopped before it did)"

#: the name assembly's steps carry in ``--explain``
ASSEMBLY = "assembly"


@dataclass(frozen=True, slots=True)
class Explained:
    """One run of the pipeline: each event's part (with the steps that decided
    it), and the messages the model is sent."""

    rules: tuple[str, ...]
    parts: tuple[ContextPart, ...]
    messages: tuple[Message, ...]
    #: why no model can be sent this context (an event kept that none takes),
    #: when explained with ``strict`` false; None: it can be sent
    error: str | None = None


class ContextPipeline:
    """The ordered rules that decide what of the path reaches the model."""

    def __init__(self, rules: Sequence[ContextRule]) -> None:
        names = [rule.name for rule in rules]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise ContextRuleFailed(f"context rules named twice: {', '.join(twice)}")
        self.rules = tuple(rules)
        #: each event's first part, by id, while the event object stays the same
        #: (a long session's context is the same events call after call)
        self._first: dict[str, tuple[Event, Message | None, str | None]] = {}

    @classmethod
    def default(cls, pruned: frozenset[str] = frozenset()) -> ContextPipeline:
        """The built-in rules alone: the context infai sends with no rule added."""
        return cls(builtin_rules(pruned))

    @property
    def names(self) -> tuple[str, ...]:
        """The rules' names, in the order they run."""
        return tuple(rule.name for rule in self.rules)

    def messages(self, events: Sequence[Event]) -> list[Message]:
        """The messages for ``events`` (resolved, oldest first); raises
        :class:`UnsendableEvent` for a kept event no model can take and
        :class:`ContextRuleFailed` for a rule that failed."""
        return list(self.explain(events).messages)

    def explain(self, events: Sequence[Event], *, strict: bool = True) -> Explained:
        """The messages for ``events``, with each event's part saying which rule
        kept, shortened or dropped it and why. Not ``strict``, an event no model
        takes is shown dropped and the reason is :attr:`Explained.error`, rather
        than raised as :class:`UnsendableEvent`."""
        parts = [self._first_part(event) for event in events]
        if len(self._first) > 2 * len(parts):  # a rebuilt context: forget the old one
            keep = {event.id for event in events}
            self._first = {k: v for k, v in self._first.items() if k in keep}
        for rule in self.rules:
            live = [part for part in parts if not part.dropped]
            _run(rule, live)
        problems: list[str] = []
        messages = _assemble(parts, None if strict else problems)
        return Explained(
            self.names, tuple(parts), tuple(messages), problems[0] if problems else None
        )

    def _first_part(self, event: Event) -> ContextPart:
        held = self._first.get(event.id)
        if held is not None and held[0] is event:
            return ContextPart(event, held[1], unsendable=held[2])
        part = first_part(event)
        self._first[event.id] = (event, part.message, part.unsendable)
        return part


def _run(rule: ContextRule, live: list[ContextPart]) -> None:
    """Apply what ``rule`` decides about ``live``; a rule that raises or decides
    about a part it was not given fails the context."""
    given = {id(part) for part in live}
    try:
        decided: Iterable[ContextDecision] = rule.apply(live) or ()
        for decision in decided:
            if not isinstance(decision, ContextDecision) or id(decision.part) not in given:
                raise ContextRuleFailed(
                    f"context rule {rule.name!r} returned {decision!r}, not a decision "
                    "about a part it was given"
                )
            apply_decision(decision, rule.name)
    except ContextRuleFailed:
        raise
    except Exception as exc:
        raise ContextRuleFailed(
            f"context rule {rule.name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _note(part: ContextPart, action: str, why: str) -> None:
    if action == "dropped":
        part.dropped, part.message = True, None
    part.steps.append(ContextStep(ASSEMBLY, "dropped" if action == "dropped" else "kept", why))


def _dropped_with(parts: list[ContextPart], kind: str) -> dict[str, str]:
    """The call ids of the parts of ``kind`` a rule dropped, with that rule's name."""
    out: dict[str, str] = {}
    for part in parts:
        record = part.record
        if part.dropped and part.kind == kind and record is not None:
            call_id = getattr(record, "call_id", None)
            if isinstance(call_id, str):
                out[call_id] = part.steps[-1].rule if part.steps else "?"
    return out


def _assemble(parts: list[ContextPart], problems: list[str] | None = None) -> list[Message]:
    """The messages of the parts kept: see the module's docstring. An event no
    model takes raises, or (with ``problems``) is dropped and said there."""
    results_dropped = _dropped_with(parts, "tool_result")
    calls_dropped = _dropped_with(parts, "tool_call")
    out: list[Message] = []
    pending: dict[str, ContextPart] = {}  # calls still waiting for their result
    notes: dict[int, ContextPart] = {}  # where in ``out`` an interruption note is, and whose

    def settle_pending() -> None:
        for call_id, part in pending.items():
            call = part.message.tool_calls[0] if part.message else None
            out.append(
                Message(
                    role="tool",
                    content=INTERRUPTED,
                    tool_call_id=call_id,
                    tool_name=call.name if call else None,
                    is_error=True,
                )
            )
            _note(part, "kept", "no result follows it: answered as interrupted")
        pending.clear()

    for part in parts:
        message = part.message
        if part.dropped:
            continue
        if message is None:
            if part.unsendable is not None:
                if problems is None:
                    raise UnsendableEvent(part.unsendable)
                problems.append(part.unsendable)
                _note(part, "dropped", "no model takes a message with this role")
                continue
            _note(part, "dropped", f"no rule sends a {part.kind} event")
            continue
        if part.kind == "tool_call" and message.tool_calls:
            call = message.tool_calls[0]
            if call.id in results_dropped:
                _note(part, "dropped", f"its result was dropped by {results_dropped[call.id]}")
                continue
            if out and out[-1].role == "assistant":
                out[-1] = replace(out[-1], tool_calls=(*out[-1].tool_calls, call))
            else:
                settle_pending()
                out.append(Message(role="assistant", tool_calls=(call,)))
            pending[call.id] = part
        elif part.kind == "tool_result" and message.role == "tool":
            if pending.pop(message.tool_call_id or "", None) is None:
                why = calls_dropped.get(message.tool_call_id or "")
                _note(
                    part,
                    "dropped",
                    f"its call was dropped by {why}" if why else "its call is not on the path",
                )
                continue
            out.append(message)
        else:
            settle_pending()
            record = part.record
            if isinstance(record, MessageRecord) and is_marker(record, part.event.role):
                notes[len(out)] = part
            out.append(message)
    settle_pending()
    return _join_notes(out, notes)


def _join_notes(messages: list[Message], notes: dict[int, ContextPart]) -> list[Message]:
    """``messages`` with each run of user messages in a row that holds a note (at
    the indexes ``notes``) joined into one, their texts in order."""
    out: list[Message] = []
    run: list[int] = []

    def flush() -> None:
        held = [notes[i] for i in run if i in notes]
        if held and len(run) > 1:
            for part in held:
                _note(part, "kept", "joined with the user messages beside it")
        if held:
            text = "\n\n".join(messages[i].content for i in run)
            out.append(replace(messages[run[0]], content=text))
        else:
            out.extend(messages[i] for i in run)
        run.clear()

    for index, message in enumerate(messages):
        if message.role == "user":
            run.append(index)
            continue
        flush()
        out.append(message)
    flush()
    return out


def to_messages(events: Sequence[Event], pruned: Iterable[str] = frozenset()) -> list[Message]:
    """The messages the built-in rules make of ``events`` (resolved records, oldest
    first); an event no model can take raises :class:`UnsendableEvent`. The tool
    results named in ``pruned`` are sent as the pruned placeholder."""
    return ContextPipeline.default(frozenset(pruned)).messages(events)

"""The context assembly as it was before the rule pipeline (``to_messages`` of
``infai.agent.context`` at commit a5b3cae), kept verbatim as the oracle the
pipeline's tests compare against: the model must get exactly this unless a
rule is added."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import replace

from infai.agent.context import (
    INTERRUPTED,
    INTERRUPTED_NOTE,
    PRUNED_OUTPUT,
    UnsendableEvent,
    is_marker,
)
from infai.llm import Message, ToolCall
from infai.llm.messages import Role
from infai.store import (
    CHECKPOINT_KINDS,
    BranchSummaryRecord,
    CompactionRecord,
    Event,
    GapRecord,
    HookRecord,
    MessageRecord,
    ToolCallRecord,
    ToolResultRecord,
)

SENDABLE_ROLES = ("user", "assistant", "system")


def _summary(record: CompactionRecord) -> str:
    sections = [
        ("Goals", record.goals),
        ("Constraints", record.constraints),
        ("Decisions", record.decisions),
        ("Files changed", record.files_changed),
        ("Unresolved work", record.unresolved),
        ("Facts worth keeping", record.facts),
    ]
    lines = [
        "Summary of the conversation so far (earlier messages were compacted):",
        record.summary,
    ]
    for title, items in sections:
        if items:
            lines.append(f"{title}:")
            lines += [f"- {item}" for item in items]
    return "\n".join(lines)


def _sendable_role(event: Event) -> Role:
    if event.role == "user":
        return "user"
    if event.role == "assistant":
        return "assistant"
    if event.role == "system":
        return "system"
    raise UnsendableEvent(
        f"event {event.id} is a message with role {event.role!r}, which no model takes "
        f"({', '.join(SENDABLE_ROLES)}); continue from an event before it (--from)"
    )


def to_messages(events: list[Event], pruned: Container[str] = frozenset()) -> list[Message]:
    """The messages for ``events`` (resolved records, oldest first); an event no
    model can take raises :class:`UnsendableEvent`. The tool results named in
    ``pruned`` are sent as :data:`PRUNED_OUTPUT`."""
    out: list[Message] = []
    pending: dict[str, ToolCall] = {}  # calls still waiting for their result
    notes: set[int] = set()  # where in ``out`` an interruption marker's note is

    def settle_pending() -> None:
        for call in pending.values():
            out.append(
                Message(
                    role="tool",
                    content=INTERRUPTED,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    is_error=True,
                )
            )
        pending.clear()

    for event in events:
        record = event.record
        if isinstance(record, HookRecord) and record.context:  # what a prompt hook added
            settle_pending()
            out.append(Message(role="user", content=f"[{record.event} hook]\n{record.context}"))
            continue
        if event.kind in CHECKPOINT_KINDS or isinstance(record, HookRecord):
            continue  # files on disk, not conversation: no model sees them, and a
            # snapshot between a tool call and its result leaves the call pending
        if isinstance(record, ToolCallRecord):
            call = ToolCall(record.call_id, record.name, dict(record.arguments))
            if out and out[-1].role == "assistant":
                out[-1] = replace(out[-1], tool_calls=(*out[-1].tool_calls, call))
            else:
                settle_pending()
                out.append(Message(role="assistant", tool_calls=(call,)))
            pending[call.id] = call
        elif isinstance(record, ToolResultRecord):
            if pending.pop(record.call_id, None) is None:
                continue  # its call is not on the path: never send a dangling result
            out.append(
                Message(
                    role="tool",
                    content=PRUNED_OUTPUT if event.id in pruned else record.content,
                    tool_call_id=record.call_id,
                    tool_name=record.name,
                    is_error=record.is_error,
                )
            )
        else:
            settle_pending()
            if isinstance(record, MessageRecord) and is_marker(record, event.role):
                notes.add(len(out))
                out.append(Message(role="user", content=INTERRUPTED_NOTE))
            elif isinstance(record, MessageRecord):
                role = _sendable_role(event)
                # an assistant's metadata carries what its provider needs back
                # (an Anthropic thinking signature); nothing else is sent on
                meta = dict(record.metadata) if role == "assistant" else {}
                out.append(
                    Message(
                        role=role, content=record.content, reasoning=record.reasoning, metadata=meta
                    )
                )
            elif isinstance(record, CompactionRecord):
                out.append(Message(role="user", content=_summary(record)))
            elif isinstance(record, BranchSummaryRecord):
                text = f"Summary of work on a branch that was left:\n{record.summary}"
                out.append(Message(role="user", content=text))
            elif isinstance(record, GapRecord):  # said, so the model sees why a turn is missing
                out.append(Message(role="user", content=f"[Note: {record.summary}]"))
    settle_pending()
    return _join_notes(out, notes)


def _join_notes(messages: list[Message], notes: set[int]) -> list[Message]:
    """``messages`` with each run of user messages in a row that holds a note (at
    the indexes ``notes``) joined into one, their texts in order."""
    out: list[Message] = []
    run: list[int] = []

    def flush() -> None:
        if run and notes.intersection(run):
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

"""From stored events to the messages a model is sent.

The active path from the store (HEAD back to the nearest compaction) becomes
provider-neutral :class:`~infai.llm.Message` values. A compaction's summary and
a branch summary become user messages that say what they are, and so does a
gap salvage left where damaged events were lost. Tool calls join
the assistant message that made them, and every call gets a result right after
it: a crash or a cancellation can leave a call with no result in the store, and
such a call gets a synthesized "interrupted" error result, so nothing dangling
is ever sent. A result whose call is not on the path is not sent either.

The interruption marker (a cancelled turn's, or one recorded for a turn whose
process was killed: :mod:`.unfinished`) is sent as :data:`INTERRUPTED_NOTE`,
joined with the user messages beside it into one: a prompt left without an
answer, the note and the next prompt reach the model as one user message that
says what happened, never as user messages in a row with nothing between them.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import replace
from typing import Any

from infai.errors import InfaiError
from infai.llm import Message, ToolCall
from infai.llm.messages import Role
from infai.store import (
    NIL_ID,
    WORKSPACE_KINDS,
    BranchSummaryRecord,
    CompactionRecord,
    Event,
    GapRecord,
    HookRecord,
    MessageRecord,
    SessionLog,
    ToolCallRecord,
    ToolResultRecord,
)

#: the roles a stored message may have to be sent to a model
SENDABLE_ROLES = ("user", "assistant", "system")


class UnsendableEvent(InfaiError):
    """An event on the path no model can take (a message whose role is none of
    :data:`SENDABLE_ROLES`); it is refused, never sent as something else."""


INTERRUPTED = "interrupted: this tool call did not finish (the session stopped before it did)"

#: what the model is sent for an interruption marker
INTERRUPTED_NOTE = (
    "[turn interrupted: the turn before this point stopped before it finished; "
    "what it had not said or done did not happen]"
)


def is_marker(record: MessageRecord, role: str) -> bool:
    """Whether a stored message is the interruption marker."""
    return role == "user" and record.metadata.get("interrupted") is True


#: what a model is sent in place of a tool output the session's own tool had
#: pruned before it was imported (OpenCode's words, as its model saw them)
PRUNED_OUTPUT = "[Old tool result content cleared]"


def pruned_outputs(extra: Mapping[str, Any]) -> frozenset[str]:
    """The tool-result events an imported session's tool had pruned (its import
    metadata's ``pruned.events``, see :mod:`infai.store.imports.opencode`): they are
    sent as :data:`PRUNED_OUTPUT`, as that tool would. Metadata of another shape
    names none (it can only ever hide outputs from the model, never add text)."""
    imported = extra.get("import")
    pruned = imported.get("pruned") if isinstance(imported, Mapping) else None
    events = pruned.get("events") if isinstance(pruned, Mapping) else None
    if not isinstance(events, Mapping):
        return frozenset()
    return frozenset(key for key in events if isinstance(key, str))


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


class ContextCache:
    """The active context's events, kept in memory between model calls.

    A long-lived session need not read its path back from the store for every
    request: events it appends after the cached tip extend the cache; anything
    else (a selected older event, a compaction, another tip) rebuilds it.
    """

    def __init__(self, writer: SessionLog, pruned: frozenset[str] = frozenset()) -> None:
        self.writer = writer
        #: tool results sent as :data:`PRUNED_OUTPUT` (see :func:`pruned_outputs`)
        self.pruned = pruned
        self._events: list[Event] | None = None
        self._tip: str | None = None

    def events(self) -> list[Event]:
        """The context the next request continues: at the picked event, else at HEAD."""
        tip = self.writer.pending_parent or self.writer.head
        if self._events is None or self._tip != tip:
            self._events = list(self.writer.context(tip).events)
            self._tip = tip
        return self._events

    def invalidate(self) -> None:
        """Forget the cached context: the next read rebuilds it from the store."""
        self._events = None

    def appended(self, events: list[Event]) -> None:
        """Tell the cache the writer just appended ``events`` (in order)."""
        if (
            self._events is None
            or not events
            or events[0].parent_id != (self._tip or NIL_ID)
            or any(e.kind == "compaction" for e in events)
        ):
            self._events = None
            return
        self._events.extend(events)
        self._tip = events[-1].id


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
        if event.kind in WORKSPACE_KINDS or isinstance(record, HookRecord):
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

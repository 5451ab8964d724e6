"""Compaction: the model summarises the active context into a boundary event.

The summary is asked for as one JSON object with the sections a summary must
keep (goals, constraints, decisions, files changed, unresolved work, and facts
that would be expensive or dangerous to rediscover) and stored as a
``compaction`` event after HEAD; the events before it stay in the store, and
the next context starts from it. If the model fails or the task is cancelled,
nothing is appended and the session is exactly as it was, so a retry simply
works. An answer that is not such an object is shown back to the model once,
with what was wrong; if the second answer is no better, its text is kept as a
plain-text summary (the section lists left empty) rather than failing a
compaction the user asked for; only an empty answer fails.

Automatic compaction: before asking the model, the loop sizes the next request
(the usage the model last reported, plus an estimate for what was appended
since, such as a large tool result); at ``threshold`` (80% by default) of the
model's context window it compacts first. A context already too large for the
window is still summarised: the oldest messages after the first give way.
"""

from __future__ import annotations

import json
import re

from infai.errors import InfaiError
from infai.llm import Message, Model, ProviderError, Request, collect
from infai.llm.tokens import estimate_tokens
from infai.store import (
    CHECKPOINT_KINDS,
    BranchSummaryRecord,
    CompactionRecord,
    Event,
    MessageRecord,
    SessionLog,
    ToolCallRecord,
    ToolResultRecord,
    record_to_obj,
)
from infai.tools.offload import off_loop

from .context import to_messages

DEFAULT_THRESHOLD = 0.8

SUMMARY_SYSTEM = """You compact a coding agent's conversation so work can continue without it.
Answer with ONE JSON object and nothing else, with these keys:
"summary": a paragraph on where the work stands;
"goals", "constraints", "decisions", "files_changed", "unresolved", "facts": lists of short
strings. "facts" keeps what would be expensive or dangerous to rediscover (exact commands,
identifiers, paths, numbers). Leave nothing out that the next step depends on."""

SUMMARY_ASK = "Summarise the conversation above as the JSON object described."
_LISTS = ("goals", "constraints", "decisions", "files_changed", "unresolved", "facts")


class CompactionFailed(InfaiError):
    """The summary could not be made; the session is unchanged."""


def parse_summary(text: str, tokens_before: int | None = None) -> CompactionRecord:
    """The compaction record in a model's answer (a JSON object, fences allowed)."""
    match = re.search(r"\{.*\}", text, re.S)
    try:
        obj = json.loads(match.group(0) if match else text)
    except ValueError:
        raise CompactionFailed(f"the summary is not a JSON object{_said(text)}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("summary"), str):
        raise CompactionFailed(f"the summary has no 'summary' text{_said(text)}")
    lists: dict[str, list[str]] = {}
    for key in _LISTS:
        value = obj.get(key, [])
        if not isinstance(value, list):
            raise CompactionFailed(f"the summary's {key!r} is not a list{_said(text)}")
        lists[key] = [str(item) for item in value]
    return CompactionRecord(
        summary=obj["summary"],
        goals=lists["goals"],
        constraints=lists["constraints"],
        decisions=lists["decisions"],
        files_changed=lists["files_changed"],
        unresolved=lists["unresolved"],
        facts=lists["facts"],
        tokens_before=tokens_before,
    )


def _said(text: str, limit: int = 200) -> str:
    """What the model answered, shortened for an error message."""
    shown = " ".join(text.split())
    if not shown:
        return " (the model said nothing)"
    cut = shown[:limit] + ("..." if len(shown) > limit else "")
    return f" (the model said: {cut!r})"


def plain_summary(text: str, tokens_before: int | None = None) -> CompactionRecord:
    """A model's non-JSON answer kept as the summary text (no section lists)."""
    return CompactionRecord(summary=text.strip(), tokens_before=tokens_before)


BRANCH_SYSTEM = """The user is leaving a line of work to continue from an earlier point.
In a short paragraph, say what was tried on the abandoned line, what was learned, and
anything that must not be forgotten (commands, paths, pitfalls). Plain text only."""

BRANCH_ASK = "Summarise the abandoned work above."


async def summarize_branch(writer: SessionLog, model: Model, target: str) -> Event:
    """Leave HEAD's branch for ``target``, recording what the abandoned branch did.

    The events from HEAD back to its common ancestor with ``target`` are
    summarised by the model and stored as a ``branch_summary`` event after
    ``target``, which becomes HEAD. On failure nothing is appended.
    """
    events, ancestor = await off_loop(_abandoned, writer, target)
    request = Request(
        messages=(*to_messages(events), Message(role="user", content=BRANCH_ASK)),
        system=BRANCH_SYSTEM,
        purpose="summary",
    )
    answer = await collect(model.stream(request))
    if isinstance(answer, ProviderError):
        raise CompactionFailed(f"the model failed: {answer.message}")
    if not answer.content.strip():
        raise CompactionFailed("the model gave an empty summary")
    record = BranchSummaryRecord(
        summary=answer.content.strip(), abandoned_tip=writer.head, common_ancestor=ancestor
    )
    return await off_loop(writer.append, record, "assistant", parent=target)


def _abandoned(writer: SessionLog, target: str) -> tuple[list[Event], str | None]:
    """The events of HEAD's branch back to its common ancestor with ``target``
    (oldest first, resolved), and that ancestor (None: the branches share nothing)."""
    keep = {e.id for e in writer.path(target, to_boundary=False)}
    abandoned = []
    ancestor: str | None = None
    for entry in reversed(writer.path(to_boundary=False)):
        if entry.id in keep:
            ancestor = entry.id
            break
        abandoned.append(entry)
    if not abandoned:
        raise CompactionFailed("the target is on the current branch: nothing is abandoned")
    return [writer.event(e.id, resolve=True) for e in reversed(abandoned)], ancestor


def last_input_tokens(events: list[Event]) -> int:
    """The input tokens the model last reported on this path (0 if none)."""
    for event in reversed(events):
        record = event.record
        if isinstance(record, MessageRecord) and record.usage is not None:
            return record.usage.input_tokens
    return 0


def event_tokens(event: Event) -> int:
    """An estimate of the tokens ``event`` adds to a request (its preview when its
    record is not loaded); the TUI's gauge adds these up as events are saved."""
    record = event.record
    if event.kind in CHECKPOINT_KINDS:
        return 0  # never sent (see context.to_messages)
    if isinstance(record, MessageRecord):
        return estimate_tokens(record.content) + estimate_tokens(record.reasoning or "")
    if isinstance(record, ToolCallRecord):
        return estimate_tokens(json.dumps(record.arguments)) + 8
    if isinstance(record, ToolResultRecord):
        return estimate_tokens(record.content) + 8
    if isinstance(record, CompactionRecord | BranchSummaryRecord):
        return estimate_tokens(json.dumps(record_to_obj(record)))
    return estimate_tokens(event.preview)


def context_tokens(events: list[Event]) -> int:
    """How large the next request is: the last reported usage plus what came after.

    The reported input and output of the last reply are exact; what was
    appended since (tool results above all, which can be huge) is estimated at
    four characters a token. With no report at all, everything is estimated.
    """
    since = 0
    for event in reversed(events):
        record = event.record
        if isinstance(record, MessageRecord) and record.usage is not None:
            return record.usage.input_tokens + record.usage.output_tokens + since
        since += event_tokens(event)
    return since


def needs_compaction(events: list[Event], model: Model, threshold: float) -> bool:
    """Whether ``events`` fill at least ``threshold`` of the model's context window
    (an estimate: the provider's own count is known only after a request)."""
    return context_tokens(events) >= threshold * model.context_window


def _fit(messages: list[Message], budget: int) -> list[Message]:
    """The messages, oldest dropped (the first kept) until they fit ``budget`` tokens.

    A conversation can outgrow the window before it is compacted (one huge tool
    result does it); the summary request must still fit, so the middle gives
    way. Results are dropped with their call, never left dangling.
    """

    def size(items: list[Message]) -> int:
        return sum(estimate_tokens(m.content) + 8 for m in items)

    if size(messages) <= budget or len(messages) < 3:
        return messages
    head, rest = messages[0], messages[1:]
    dropped = 0
    while len(rest) > 1 and size([head, *rest]) > budget:
        rest.pop(0)
        dropped += 1
        while rest and rest[0].role == "tool":
            rest.pop(0)
            dropped += 1
    note = Message(role="user", content=f"({dropped} messages omitted here to fit the window)")
    return [head, note, *rest]


async def compact(writer: SessionLog, model: Model) -> Event:
    """Summarise the active context and append the compaction event; or raise.

    With an older event picked (the writer's pending parent), that branch is
    the one summarised, and the compaction follows it.

    Raises :class:`CompactionFailed` (nothing appended) when the model fails or
    answers with something that is not a summary.
    """
    record, at = await summary_of(writer, model)
    return await off_loop(writer.append, record, "assistant", parent=at)


async def summary_of(writer: SessionLog, model: Model) -> tuple[CompactionRecord, str | None]:
    """:func:`compact`'s summary, not yet appended, and the event it follows (None:
    HEAD): for a caller that appends it its own way (a turn: see :mod:`.loop`)."""
    at = writer.pending_parent  # the branch the next prompt will continue, if one is picked
    events = (await off_loop(writer.context, at)).events
    messages = to_messages(events)
    if not messages:
        raise CompactionFailed("there is nothing to compact")
    reply_room = min(4096, model.context_window // 8)  # left for the summary itself
    room = int(model.context_window * 0.9) - estimate_tokens(SUMMARY_SYSTEM) - reply_room
    messages = _fit(messages, room)
    request = Request(
        messages=(*messages, Message(role="user", content=SUMMARY_ASK)),
        system=SUMMARY_SYSTEM,
        purpose="summary",
    )
    record = await _summary(model, request, last_input_tokens(events) or None)
    return record, at


async def _summary(model: Model, request: Request, tokens_before: int | None) -> CompactionRecord:
    """The model's summary: parsed; else asked once more with what was wrong; else
    its text kept as a plain summary. Raises only when the model fails or says nothing."""
    answer = await collect(model.stream(request))
    if isinstance(answer, ProviderError):
        raise CompactionFailed(f"the model failed: {answer.message}")
    try:
        return parse_summary(answer.content, tokens_before)
    except CompactionFailed as first:
        problem = str(first)
    retry = Request(
        messages=(
            *request.messages,
            Message(role="assistant", content=answer.content),
            Message(role="user", content=f"That answer was not usable: {problem}. {SUMMARY_ASK}"),
        ),
        system=request.system,
        purpose=request.purpose,
    )
    again = await collect(model.stream(retry))
    if isinstance(again, ProviderError):
        raise CompactionFailed(f"the model failed: {again.message}")
    try:
        return parse_summary(again.content, tokens_before)
    except CompactionFailed:
        pass
    if not again.content.strip():
        raise CompactionFailed(f"the model gave no usable summary: {problem}")
    return plain_summary(again.content, tokens_before)

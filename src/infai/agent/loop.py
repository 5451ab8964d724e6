"""One turn of the agent: a small function that emits typed events.

The durability contract, in order:

1. the user's message is appended (durable) before the model is asked anything;
2. the model's deltas stream live (:class:`Streamed`) and are never persisted;
3. the settled assistant message and the tool calls it made are appended in one
   transaction, so every call is durable before it runs;
4. each call is decided by the permission seam, run, and its result appended
   (the decision is recorded in the result's metadata: who, what, when);
5. the loop asks the model again until it stops calling tools.

A provider error ends the turn as data (:class:`TurnEnded` with ``"error"``);
nothing of the failed generation is stored. Cancelling the task (Ctrl-C, a
client gone) stops the stream or the running tool; an interruption marker is
appended so the turn reads as interrupted, and context assembly gives any call
left without a result an "interrupted" one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Literal

from infai.llm import Done, Message, Model, Notice, ProviderError, Request, StreamEvent, ToolCall
from infai.store import (
    NIL_ID,
    Event,
    HeadConflict,
    MessageRecord,
    SessionLog,
    ToolCallRecord,
    ToolResultRecord,
    now_rfc3339,
)
from infai.tools import Permissions, Toolbox, ToolContext, ToolOutput

from .compaction import (
    DEFAULT_THRESHOLD,
    CompactionFailed,
    compact,
    context_tokens,
    needs_compaction,
)
from .context import ContextCache, to_messages

INTERRUPTED_TURN = "[turn interrupted]"


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


def _assistant_records(message: Message) -> list[tuple[MessageRecord | ToolCallRecord, str]]:
    settled = MessageRecord(
        content=message.content,
        reasoning=message.reasoning,
        model=message.model,
        stop_reason=message.stop_reason,
        usage=message.usage,
        metadata=dict(message.metadata),
    )
    calls = [
        ToolCallRecord(call_id=c.id, name=c.name, arguments=dict(c.arguments))
        for c in message.tool_calls
    ]
    return [(settled, "assistant"), *((call, "assistant") for call in calls)]


async def _run_tool(
    call: ToolCall, toolbox: Toolbox, permissions: Permissions, context: ToolContext
) -> tuple[ToolOutput, dict[str, str]]:
    """Decide, then run; every failure becomes an error output for the model."""
    if call.error is not None:
        return ToolOutput(f"tool call {call.name!r} was not run: {call.error}", True), {}
    tool = toolbox.get(call.name)
    if tool is None:
        known = ", ".join(spec.name for spec in toolbox.specs()) or "none"
        return ToolOutput(f"unknown tool {call.name!r} (tools: {known})", is_error=True), {}
    decision = await permissions.decide(call.name, call.arguments, context)
    record = {"verdict": decision.verdict, "by": decision.by, "reason": decision.reason}
    record["at"] = now_rfc3339()
    if not decision.allowed:
        why = f": {decision.reason}" if decision.reason else ""
        return ToolOutput(f"permission denied by {decision.by}{why}", is_error=True), record
    try:
        return await tool.run(call.arguments, context), record
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a tool's bug must not crash the loop
        return ToolOutput(f"tool {call.name!r} failed: {type(exc).__name__}: {exc}", True), record


async def run_turn(
    writer: SessionLog,
    model: Model,
    prompt: str,
    *,
    toolbox: Toolbox,
    permissions: Permissions,
    context: ToolContext,
    system: str = "",
    max_steps: int = 50,
    compact_at: float | None = DEFAULT_THRESHOLD,
    cache: ContextCache | None = None,
) -> AsyncIterator[AgentEvent]:
    """Run one prompt to completion, yielding what happens as it happens.

    After the prompt is stored, and again before each later model call of the
    turn's tool loop, if the model last reported input usage at ``compact_at`` of
    its context window (``None``: never), the context is compacted; a failed
    compaction is reported as a notice and the turn goes on without it. At the
    turn's start the summary covers what came before the prompt: it is appended
    beside the stored prompt, and the prompt is appended again after it, so the
    prompt is durable even if the summary is never finished. A
    ``cache`` kept across turns spares re-reading the context from the store.
    """
    cache = cache or ContextCache(writer)

    def saved(*events: Event) -> list[Saved]:
        cache.appended(list(events))
        return [Saved(e) for e in events]

    failed = False  # one failed compaction per turn is enough
    compacted = False

    async def maybe_compact() -> AsyncIterator[AgentEvent]:
        nonlocal failed, compacted
        compacted = False
        if failed or compact_at is None or not needs_compaction(cache.events(), model, compact_at):
            return
        used = context_tokens(cache.events())
        yield Streamed(Notice(f"compacting: {used} of {model.context_window} tokens in use"))
        try:
            for item in saved(await compact(writer, model)):
                yield item
            compacted = True
        except CompactionFailed as exc:
            failed = True
            yield Streamed(Notice(f"compaction failed, continuing without it: {exc}"))

    try:
        asked = writer.append(MessageRecord(content=prompt), "user")
    except HeadConflict:
        # Another process appended since this session was read (a shared store).
        # Nothing was generated yet, so the prompt simply follows what they wrote.
        yield Streamed(Notice("another writer added to this session; your prompt follows it"))
        cache.invalidate()
        asked = writer.append(MessageRecord(content=prompt), "user")
    for stored_prompt in saved(asked):
        yield stored_prompt
    try:
        due = compact_at is not None and needs_compaction(cache.events(), model, compact_at)
        if due and asked.parent_id != NIL_ID:
            # The prompt is durable before anything is generated, a summary included:
            # compaction summarises what came before it (a branch beside the stored
            # prompt), and the prompt is stated again after the summary.
            writer.select(asked.parent_id)
            try:
                async for item in maybe_compact():
                    yield item
            finally:
                if not compacted:
                    writer.select(None)  # back to the prompt, as stored
            if compacted:
                for again in saved(writer.append(MessageRecord(content=prompt), "user")):
                    yield again
        for step in range(max_steps):
            if step:  # a long tool loop can fill the window between two prompts
                async for item in maybe_compact():
                    yield item
            request = Request(
                messages=tuple(to_messages(cache.events())),
                system=system,
                tools=toolbox.specs(),
            )
            outcome: Message | ProviderError | None = None
            async for event in model.stream(request):
                if isinstance(event, Done):
                    outcome = event.message
                elif isinstance(event, ProviderError):
                    outcome = event
                else:
                    yield Streamed(event)
            if not isinstance(outcome, Message):
                error = outcome.message if outcome else "the model's stream ended without a reply"
                yield TurnEnded("error", error)
                return
            stored = writer.append_batch(_assistant_records(outcome))
            for item in saved(*stored):
                yield item
            if not outcome.tool_calls:
                yield TurnEnded("done")
                return
            for call, call_event in zip(outcome.tool_calls, stored[1:], strict=True):
                here = replace(context, call_event_id=call_event.id)
                output, decision = await _run_tool(call, toolbox, permissions, here)
                metadata = dict(output.metadata)
                if decision:
                    metadata["permission"] = decision
                result = ToolResultRecord(
                    call_id=call.id,
                    name=call.name,
                    content=output.content,
                    is_error=output.is_error,
                    metadata=metadata,
                )
                for item in saved(writer.append(result, "tool")):
                    yield item
        yield TurnEnded("error", f"stopped after {max_steps} model calls in one turn")
    except asyncio.CancelledError:
        cache.invalidate()
        writer.append(
            MessageRecord(content=INTERRUPTED_TURN, metadata={"interrupted": True}), "user"
        )
        raise

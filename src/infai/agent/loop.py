"""One turn of the agent: a small function that emits typed events.

The durability contract, in order:

1. the user's message is appended (durable) before the model is asked anything,
   marked as a turn's prompt (:data:`TURN_PROMPT`);
2. the model's deltas stream live (:class:`Streamed`) and are never persisted;
3. the settled assistant message and the tool calls it made are appended in one
   transaction, so every call is durable before it runs (the message names the
   tool manifest its request offered, put into the store first: :mod:`.manifest`);
4. each call is decided by the permission seam, run, and its result appended
   (the decision is recorded in the result's metadata: who, what, when);
5. the loop asks the model again until it stops calling tools.

A provider error ends the turn as data (:class:`TurnEnded` with ``"error"``);
nothing of the failed generation is stored. Cancelling the task (Ctrl-C, a
client gone) stops the stream or the running tool; an interruption marker is
appended so the turn reads as interrupted (from the moment the prompt is stored:
a cancel that comes while it is being stored waits for it, then marks it), and
context assembly gives any call left without a result an "interrupted" one. A
turn whose process is killed outright records no marker; the next process that
opens the session for a turn records it (:mod:`.unfinished`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from infai.llm import (
    Done,
    Message,
    Model,
    Notice,
    ProviderError,
    ReasoningDelta,
    Request,
    TextDelta,
    ToolCall,
    ToolSpec,
)
from infai.store import (
    NIL_ID,
    Event,
    HeadConflict,
    InvalidInput,
    MessageRecord,
    Record,
    SessionLog,
    ToolCallRecord,
    ToolResultRecord,
)
from infai.store.records import encode_record
from infai.tools import Permissions, Toolbox, ToolContext, ToolOutput
from infai.tools.offload import off_loop

from .compaction import (
    DEFAULT_THRESHOLD,
    CompactionFailed,
    context_tokens,
    needs_compaction,
    summary_of,
)
from .context import ContextCache, ContextError
from .hooks import HOOK_INPUT, Hooks, Outcome, fire_tool, updated_call, with_feedback
from .hooks_turn import HookSteps
from .manifest import MANIFEST_KEY, record_manifest
from .tool_run import decide_and_run, runnable
from .turn_events import AgentEvent as AgentEvent
from .turn_events import Saved as Saved
from .turn_events import Streamed as Streamed
from .turn_events import TurnEnded as TurnEnded

if TYPE_CHECKING:
    from infai.store.objects import ObjectStore

log = logging.getLogger("infai.agent")

#: called after each tool call with the tool (None: unknown); yields notices to say
#: (text) and records to append after the result (a files snapshot)
AfterTool = Callable[[Any], AsyncIterator["Record | str"]]

INTERRUPTED_TURN = "[turn interrupted]"
#: the metadata key that marks a user message as a turn's prompt (``True``): a
#: turn was started to answer it, so one left without an answer was interrupted
#: (see :mod:`.unfinished`); a message appended by other means is not one
TURN_PROMPT = "turn"


def prompt_record(text: str) -> MessageRecord:
    """The record of a turn's prompt, marked as one (:data:`TURN_PROMPT`)."""
    return MessageRecord(content=text, metadata={TURN_PROMPT: True})


def interruption_marker(**why: Any) -> MessageRecord:
    """The interruption marker: the turn before it stopped without finishing."""
    return MessageRecord(content=INTERRUPTED_TURN, metadata={"interrupted": True, **why})


def _storable(call: ToolCall) -> ToolCall:
    """``call``, or (if the store would refuse its arguments: nested too deep, a
    number JSON cannot hold, a lone surrogate) the call with no arguments and an
    error saying why, which the loop answers with an error result. A model's bad
    arguments must not end the turn with an exception, nor leave the assistant's
    message unstored."""
    if call.error is not None:
        return call
    try:
        encode_record(ToolCallRecord(call_id=call.id, name=call.name, arguments=call.arguments))
    except InvalidInput as exc:
        why = str(exc).split("$.arguments", 1)[-1].lstrip(": ") or str(exc)
        return replace(call, arguments={}, error=f"its arguments cannot be kept: {why}")
    return call


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


def build_request(messages: tuple[Message, ...], system: str, toolbox: Toolbox) -> Request:
    """The request a turn sends (its tools prepared): the one place it is built, so
    what :meth:`~infai.agent.AgentSession.context` shows a program is what the
    model gets."""
    return Request(messages=messages, system=system, tools=toolbox.specs())


def _result_metadata(
    output: ToolOutput, decision: dict[str, str], ran: ToolCall, call: ToolCall
) -> dict[str, Any]:
    """A tool result's metadata: the tool's, the permission decision, and the
    arguments it ran with if a PreToolUse hook rewrote the model's."""
    metadata = dict(output.metadata)
    if decision:
        metadata["permission"] = decision
    if ran is not call:
        metadata[HOOK_INPUT] = ran.arguments
    return metadata


class _Turn(HookSteps):
    """One turn's state and its named steps; :func:`run_turn` strings them together.

    Every append goes through :meth:`append` or :meth:`append_batch` (off the
    event loop, into the context cache) and is yielded once as :class:`Saved` by
    the step that made it; every step is an async generator of the agent events
    it makes. What a cancel cut short after it was stored waits in
    :attr:`unsaid` and is yielded before the interruption marker.
    """

    def __init__(
        self,
        writer: SessionLog,
        model: Model,
        *,
        toolbox: Toolbox,
        permissions: Permissions,
        context: ToolContext,
        system: str,
        compact_at: float | None,
        cache: ContextCache,
        objects: ObjectStore | None = None,
        after_tool: AfterTool | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self.writer = writer
        #: the user's hook commands (None: none configured)
        self.hooks = hooks
        if hooks is not None:  # their transcript is this turn's context
            hooks.events = cache.events
        self.stop_continues = 0  # how many times Stop hooks sent this turn back to work
        self.stopped: str | None = None  # a hook's ``continue: false``: why the turn stops
        #: told of each tool call run (see :data:`AfterTool`): the files snapshot
        self.after_tool = after_tool
        #: the tool whose effects on the files are not recorded yet (a cancel
        #: meanwhile snapshots them after the interruption marker)
        self.unrecorded: str | None = None
        #: where the tool manifest of each request is kept (None: not recorded)
        self.objects = objects
        self.offered: tuple[ToolSpec, ...] = ()  # the tools the last request offered
        self.model = model
        self.toolbox = toolbox
        self.permissions = permissions
        self.context = context
        self.system = system
        self.compact_at = compact_at
        self.cache = cache
        #: events stored by an append a cancel interrupted (so never yielded by
        #: its step): the cancel yields them first
        self.unsaid: list[Event] = []
        #: whether this turn has appended anything (its prompt first): a cancel
        #: before that leaves nothing to mark interrupted
        self.appended = False
        self.compaction_failed = False  # one failed compaction per turn is enough
        self.compacted = False
        #: text and reasoning of the reply being streamed (kept if the turn is cut)
        self.partial: list[str] = []
        self.partial_reasoning: list[str] = []

    # -- appends ---------------------------------------------------------------

    def _settled(self, events: list[Event]) -> list[Saved]:
        self.appended = self.appended or bool(events)
        self.cache.appended(events)
        return [Saved(e) for e in events]

    async def append(self, record: Record, role: str) -> list[Saved]:
        """Append one record (in a worker thread) and report it saved; a cancel that
        comes while the append runs waits for it (:func:`off_loop`), and what it
        stored is kept in :attr:`unsaid`, yielded before the interruption marker."""
        return await self._stored(lambda: [self.writer.append(record, role)])

    async def append_batch(
        self, records: list[tuple[MessageRecord | ToolCallRecord, str]]
    ) -> list[Saved]:
        """Append ``records`` in one transaction, as :meth:`append` does one."""
        return await self._stored(lambda: self.writer.append_batch(records))

    async def _stored(self, append: Callable[[], list[Event]]) -> list[Saved]:
        done: list[Event] = []

        def work() -> list[Event]:
            done.extend(append())
            return done

        try:
            return self._settled(await off_loop(work))
        except asyncio.CancelledError:
            self._settled(done)
            self.unsaid.extend(done)
            raise

    async def events(self) -> list[Event]:
        """The context the next request continues (read in a worker thread)."""
        return await off_loop(self.cache.events)

    # -- steps -----------------------------------------------------------------

    async def store_prompt(self, prompt: str) -> AsyncIterator[AgentEvent]:
        """The user's message, durable before anything is generated."""
        try:
            stored = await self.append(prompt_record(prompt), "user")
        except HeadConflict:
            # Another process appended since this session was read (a shared store).
            # Nothing was generated yet, so the prompt simply follows what they wrote.
            yield Streamed(Notice("another writer added to this session; your prompt follows it"))
            self.cache.invalidate()
            stored = await self.append(prompt_record(prompt), "user")
        for item in stored:
            yield item

    async def _due(self) -> bool:
        if self.compaction_failed or self.compact_at is None:
            return False
        return needs_compaction(await self.events(), self.model, self.compact_at)

    async def maybe_compact(self) -> AsyncIterator[AgentEvent]:
        """Compact if the context has reached the threshold; a failure is a notice."""
        self.compacted = False
        if not await self._due():
            return
        used = context_tokens(await self.events())
        yield Streamed(Notice(_compacting(used, self.model.context_window)))
        async for item in self.fire(
            "PreCompact", ("auto",), trigger="auto", custom_instructions=""
        ):
            if isinstance(item, Saved | Streamed):
                yield item
        try:
            record, at = await summary_of(self.writer, self.model)
        except CompactionFailed as exc:
            self.compaction_failed = True
            yield Streamed(Notice(f"compaction failed, continuing without it: {exc}"))
            return
        for item in await self._stored(
            lambda: [self.writer.append(record, "assistant", parent=at)]
        ):
            yield item
        self.compacted = True
        if self.hooks is not None and self.hooks.wants("SessionStart", "compact"):
            async for item in self.fire("SessionStart", ("compact",), source="compact"):
                if isinstance(item, Saved | Streamed):  # what it adds follows the summary
                    yield item

    async def compact_before(self, prompt: str, asked: Event) -> AsyncIterator[AgentEvent]:
        """Compact what came before the stored prompt, then state the prompt again.

        The prompt is durable before anything is generated, a summary included:
        compaction summarises what came before it (a branch beside the stored
        prompt), and the prompt is stated again after the summary.
        """
        if asked.parent_id == NIL_ID or not await self._due():
            return
        self.writer.select(asked.parent_id)
        try:
            async for item in self.maybe_compact():
                yield item
        finally:
            if not self.compacted:
                self.writer.select(None)  # back to the prompt, as stored
        if self.compacted:
            for again in await self.append(prompt_record(prompt), "user"):
                yield again

    async def ask_model(self) -> AsyncIterator[AgentEvent | Message | ProviderError | None]:
        """Stream one model call: its deltas, then (last) its outcome."""
        try:
            messages = tuple(self.cache.pipeline.messages(await self.events()))
        except ContextError as exc:  # said as the turn's error, nothing sent
            yield TurnEnded("error", str(exc))
            return
        for notice in await self.toolbox.prepare():  # MCP servers started, or why not
            yield Streamed(Notice(notice))
        request = build_request(messages, self.system, self.toolbox)
        self.offered = request.tools
        outcome: Message | ProviderError | None = None
        self.partial, self.partial_reasoning = [], []
        async for event in self.model.stream(request):
            if isinstance(event, Done):
                outcome = event.message
                self.partial, self.partial_reasoning = [], []  # the whole reply is stored
            elif isinstance(event, ProviderError):
                outcome = event
            else:
                if isinstance(event, TextDelta):
                    self.partial.append(event.text)
                elif isinstance(event, ReasoningDelta):
                    self.partial_reasoning.append(event.text)
                yield Streamed(event)
        yield outcome

    async def manifested(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """``metadata`` naming the tool manifest the last request offered
        (:mod:`.manifest`), put into the store first; unchanged if none is kept."""
        if self.objects is None:
            return metadata
        digest = await off_loop(record_manifest, self.objects, self.offered)
        return {**metadata, MANIFEST_KEY: digest}

    async def cut_metadata(self) -> dict[str, Any]:
        """A cut reply's metadata: its manifest too, unless that cannot be kept (the
        interruption marker matters more than the manifest)."""
        try:
            return await self.manifested({"interrupted": True})
        except Exception as failure:
            log.warning("the tool manifest of an interrupted reply was not saved: %s", failure)
            return {"interrupted": True}

    async def run_calls(self, message: Message, calls: list[Event]) -> AsyncIterator[AgentEvent]:
        """Decide and run each call, appending its result."""
        for call, call_event in zip(message.tool_calls, calls, strict=True):
            here = replace(self.context, call_event_id=call_event.id)
            self.unrecorded = call.name
            pre: Outcome | None = None
            if self.hooks is not None and runnable(call, self.toolbox):
                hooked = fire_tool(self.hooks, "PreToolUse", call.name, call.arguments, call.id)
                async for heard in self.heard(hooked):
                    if isinstance(heard, Outcome):
                        pre = heard
                    else:
                        yield heard
            run = updated_call(call, pre)  # as a hook's updatedInput rewrote it
            output, decision = await decide_and_run(run, self.toolbox, self.permissions, here, pre)
            async for item in self.flush_hooks():  # a Notification hook's, while it asked
                yield item
            if pre is not None and pre.blocked is None:
                output = replace(output, content=with_feedback(output.content, "PreToolUse", pre))
            ran = decision.get("verdict") == "allow" and not output.is_error
            if self.hooks is not None and ran:
                async for after in self.post_tool(run, output):
                    if isinstance(after, ToolOutput):
                        output = after
                    else:
                        yield after
            result = ToolResultRecord(
                call_id=call.id,
                name=call.name,
                content=output.content,
                is_error=output.is_error,
                metadata=_result_metadata(output, decision, run, call),
            )
            for item in await self.append(result, "tool"):
                yield item
            if self.after_tool is not None:
                async for after in self.tool_ran(call.name):
                    yield after
            self.unrecorded = None
            if self.stopped is not None:  # a hook's ``continue: false``
                yield Streamed(Notice(f"stopped by a hook: {self.stopped}"))
                yield TurnEnded("done")
                return

    async def tool_ran(self, name: str) -> AsyncIterator[AgentEvent]:
        """Tell :attr:`after_tool` a call of ``name`` ran; say its notices, append
        what it hands back (a snapshot)."""
        assert self.after_tool is not None
        async for got in self.after_tool(self.toolbox.get(name)):
            if isinstance(got, str):
                yield Streamed(Notice(got))
            else:
                for item in await self.append(got, "system"):
                    yield item

    async def step(self) -> AsyncIterator[AgentEvent]:
        """One model call and the tools it called; ends with TurnEnded when the turn is over."""
        outcome: Message | ProviderError | None = None
        async for item in self.ask_model():
            if isinstance(item, TurnEnded):  # the request could not be made
                yield item
                return
            if isinstance(item, Saved | Streamed):
                yield item
            else:
                outcome = item
        if not isinstance(outcome, Message):
            error = outcome.message if outcome else "the model's stream ended without a reply"
            yield TurnEnded("error", error)
            return
        calls = tuple(_storable(call) for call in outcome.tool_calls)
        if calls != outcome.tool_calls:
            outcome = replace(outcome, tool_calls=calls)
        outcome = replace(outcome, metadata=await self.manifested(outcome.metadata))
        stored = await self.append_batch(_assistant_records(outcome))
        for item in stored:
            yield item
        if not outcome.tool_calls:
            async for item in self.stop_hooks(outcome.content):
                yield item
            return
        async for item in self.run_calls(outcome, [s.event for s in stored[1:]]):
            yield item

    async def interrupted(self, cancelled: asyncio.CancelledError) -> AsyncIterator[AgentEvent]:
        """A cancel's records (:meth:`mark_interrupted`), yielded in the cancel,
        then ``cancelled`` raised again (from the marker's failure, if any)."""
        if not self.appended:  # cancelled before its prompt was stored: nothing to mark
            raise cancelled
        said, failure = await self.mark_interrupted()
        for item in said:
            yield item
        if failure is not None:
            raise cancelled from failure
        raise cancelled

    async def mark_interrupted(self) -> tuple[list[Saved], BaseException | None]:
        """Append what the model had said of a reply cut short (an assistant message
        marked ``interrupted``, sent to the model next turn as what it had said), then
        the interruption marker. Returns every event stored since the last one
        yielded (:attr:`unsaid` first), in store order, and why the marker could
        not be stored, if it could not."""
        said_before, self.unsaid = [Saved(e) for e in self.unsaid], []
        stored: list[Saved] = []
        failure = await self._marked(stored)
        if failure is not None:
            return [*said_before, *stored], failure
        return [*said_before, *stored, *await self.record_interrupted_tool()], None

    async def _marked(self, stored: list[Saved]) -> BaseException | None:
        """Append the cut reply (if any) and the marker, into ``stored``."""
        self.cache.invalidate()
        marker = interruption_marker()
        said, thought = "".join(self.partial), "".join(self.partial_reasoning)
        self.partial, self.partial_reasoning = [], []
        try:
            if said.strip():  # a reply of reasoning alone is not one a provider takes back
                cut = MessageRecord(
                    content=said,
                    reasoning=thought or None,
                    model=self.model.name,
                    stop_reason="interrupted",
                    metadata=await self.cut_metadata(),
                )
                stored += await self.append(cut, "assistant")
            stored += await self.append(marker, "user")
        except Exception as failure:  # the cancel matters more: report this, keep that
            log.warning("the interruption marker was not saved: %s", failure)
            return failure
        return None

    async def record_interrupted_tool(self) -> list[Saved]:
        """A tool cut short may have changed files: snapshot them now, after the
        marker, rather than at the next turn's start (best effort: a failure is
        logged, the next snapshot records them); what was appended."""
        name, self.unrecorded = self.unrecorded, None
        stored: list[Saved] = []
        if name is None or self.after_tool is None:
            return stored
        try:
            async for got in self.after_tool(self.toolbox.get(name)):
                if isinstance(got, str):
                    log.warning("%s", got)
                else:
                    stored += await self.append(got, "system")
        except Exception as failure:
            log.warning("the files after an interrupted %s were not recorded: %s", name, failure)
        return stored


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
    objects: ObjectStore | None = None,
    after_tool: AfterTool | None = None,
    hooks: Hooks | None = None,
) -> AsyncIterator[AgentEvent]:
    """Run one prompt to completion, yielding what happens as it happens.

    ``hooks``: the user's hook commands (:mod:`.hooks`), fired at the prompt
    (a block ends the turn before the prompt is stored), around each tool call
    and when the turn would end.

    After the prompt is stored, and again before each later model call of the
    turn's tool loop, if the model last reported input usage at ``compact_at`` of
    its context window (``None``: never), the context is compacted; a failed
    compaction is reported as a notice and the turn goes on without it. At the
    turn's start the summary covers what came before the prompt: it is appended
    beside the stored prompt, and the prompt is appended again after it, so the
    prompt is durable even if the summary is never finished. A
    ``cache`` kept across turns spares re-reading the context from the store.

    Every append and store read runs in a worker thread (see
    :mod:`~infai.agent.offload`). Each event appended is yielded exactly once, as
    :class:`Saved`, in store order: this generator is a turn's one output. On a
    cancel (thrown in while the generator waits) the events a cut-short append
    had stored, the interrupted reply, the interruption marker and a snapshot
    after an interrupted tool are yielded, then the cancellation is raised at
    the next step (a consumer that reads on gets it). With ``objects``, each
    stored reply names the tool manifest its request offered (:mod:`.manifest`).
    ``after_tool`` runs after each tool call's result is stored (see
    :data:`AfterTool`). A cancel always propagates: if the marker cannot be
    written, the :class:`asyncio.CancelledError` is raised from that failure.
    """
    turn = _Turn(
        writer,
        model,
        toolbox=toolbox,
        permissions=permissions,
        context=context,
        system=system,
        compact_at=compact_at,
        cache=cache or ContextCache(writer),
        objects=objects,
        after_tool=after_tool,
        hooks=hooks,
    )
    try:
        async for item in turn.prompt_gate(prompt):  # a blocked prompt ends the turn
            yield item
            if isinstance(item, TurnEnded):
                return
        asked: Event | None = None
        async for item in turn.store_prompt(prompt):
            if isinstance(item, Saved):
                asked = item.event
            yield item
        assert asked is not None
        async for item in turn.compact_before(prompt, asked):
            yield item
        async for item in turn.flush_hooks():  # after the prompt: what they add follows it
            yield item
        for number in range(max_steps):
            if number:  # a long tool loop can fill the window between two prompts
                async for item in turn.maybe_compact():
                    yield item
            async for item in turn.step():
                yield item
                if isinstance(item, TurnEnded):
                    return
        yield TurnEnded("error", f"stopped after {max_steps} model calls in one turn")
    except asyncio.CancelledError as cancelled:
        async for item in turn.interrupted(cancelled):  # then the cancel goes on
            yield item


def _compacting(used: int, window: int) -> str:
    """The notice before an automatic compaction, numbers readable."""
    return f"compacting: {used:,} of {window:,} tokens in use"

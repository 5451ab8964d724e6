"""The Anthropic provider: the Messages API with streaming, through the official SDK.

The Messages API wants strictly alternating user and assistant turns made of
content blocks, so the conversion merges neighbours of one role: tool results
become ``tool_result`` blocks in a user turn, an assistant's tool calls become
``tool_use`` blocks after its text. With thinking enabled (``thinking =
"adaptive"`` or a ``thinking_budget`` in the model's config), the model's
thinking streams as reasoning deltas and its blocks (thinking with their
signatures, redacted thinking) are kept, in order and unchanged, in the settled
message's metadata, because the API requires them sent back exactly so when a
tool loop continues; another provider's reasoning is never sent as thinking.
Text that is only whitespace is not sent (the API refuses such blocks).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from infai.store import Usage

from .messages import (
    Done,
    Message,
    ProviderError,
    ReasoningDelta,
    Request,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    call_arguments,
    cut_notice,
)
from .providers import ModelSpec, SdkModel

if TYPE_CHECKING:
    import anthropic

DEFAULT_MAX_TOKENS = 8192
STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
}
THINKING_TYPES = ("thinking", "redacted_thinking")
#: error types in a stream's ``error`` event that are worth another try
RETRY_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.metadata.get("provider") == "anthropic":
        # the thinking blocks exactly as received, in order, each with its signature
        for block in message.metadata.get("thinking_blocks") or ():
            if isinstance(block, dict) and block.get("type") in THINKING_TYPES:
                blocks.append(dict(block))
    if message.content.strip():  # the API refuses whitespace-only text blocks
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name}
        blocks.append({**block, "input": call.arguments})
    return blocks


def to_anthropic(request: Request) -> list[dict[str, Any]]:
    """The request's messages as alternating Anthropic turns of content blocks."""
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in request.messages:
        if message.role == "assistant":
            add("assistant", _assistant_blocks(message) or [{"type": "text", "text": "(empty)"}])
        elif message.role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content or "(no output)",
                "is_error": message.is_error,
            }
            add("user", [block])
        elif message.content.strip():
            text = message.content
            if message.role == "system":
                text = f"[system note] {text}"
            add("user", [{"type": "text", "text": text}])
    if turns and turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continue)"}]})
    return turns


def tools_to_anthropic(request: Request) -> list[dict[str, Any]]:
    """The request's tools in the Messages API's form (their JSON schemas as given)."""
    return [
        {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}
        for spec in request.tools
    ]


class AnthropicModel(SdkModel):
    """A model behind the Anthropic Messages API."""

    provider = "anthropic"
    retry_types = RETRY_TYPES

    def __init__(self, spec: ModelSpec, *, client: anthropic.AsyncAnthropic | None = None) -> None:
        super().__init__(spec, client)
        # a missing key is said now, as the model is built; the SDK waits for a request
        self._key = spec.require_key() if client is None else ""

    @classmethod
    def _sdk(cls) -> Any:
        import anthropic

        return anthropic

    def _make_client(self) -> anthropic.AsyncAnthropic:
        client: anthropic.AsyncAnthropic = self._sdk().AsyncAnthropic(
            api_key=self._key,
            base_url=self.spec.resolved_base_url(),
            max_retries=0,  # retries are ours, and announced
            timeout=self.spec.timeout,
        )
        return client

    def _options(self, request: Request) -> dict[str, Any]:
        options: dict[str, Any] = {
            "model": self.spec.model,
            "messages": to_anthropic(request),
            "max_tokens": request.max_tokens or self.spec.max_tokens or DEFAULT_MAX_TOKENS,
        }
        if request.system:
            options["system"] = request.system
        if request.tools:
            options["tools"] = tools_to_anthropic(request)
        budget = self.spec.thinking_budget
        if request.purpose != "chat":
            pass  # a summary needs no thinking
        elif self.spec.adaptive_thinking:
            options["thinking"] = {"type": "adaptive"}
        elif budget:
            options["thinking"] = {"type": "enabled", "budget_tokens": budget}
            options["max_tokens"] = max(options["max_tokens"], budget + 1024)
        return options

    async def _events(self, request: Request) -> AsyncIterator[StreamEvent]:
        stream = await self._client.messages.create(stream=True, **self._options(request))
        reply = _Reply(self.spec.model)
        async with stream:
            async for event in stream:
                for item in reply.event(event):
                    yield item
        if reply.stop == "max_tokens":
            yield cut_notice(len(reply.order))
        yield reply.settled()


class _Reply:
    """A streamed reply as it arrives: text, thinking blocks, tool calls, usage, end."""

    def __init__(self, model_id: str) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.thinking: dict[int, dict[str, Any]] = {}  # block index -> the block so far
        self.calls: dict[int, list[str]] = {}  # block index -> [id, name, argument json]
        self.order: list[int] = []
        self.usage = Usage()
        self.stop: str | None = None
        self.model_id = model_id

    def event(self, event: Any) -> Iterator[StreamEvent]:
        """The deltas one server event stands for."""
        kind = event.type
        if kind == "message_start":
            self.model_id = event.message.model or self.model_id
            self.usage = _usage(event.message.usage, self.usage)
        elif kind == "content_block_start":
            yield from self.block_start(event.index, event.content_block)
        elif kind == "content_block_delta":
            yield from self.delta(event.index, event.delta)
        elif kind == "message_delta":
            self.stop = event.delta.stop_reason or self.stop
            self.usage = _usage(event.usage, self.usage)

    def block_start(self, index: int, block: Any) -> Iterator[StreamEvent]:
        if block.type == "tool_use":
            self.calls[index] = [block.id, block.name, ""]
            self.order.append(index)
            yield ToolCallDelta(len(self.order) - 1, block.id, block.name)
        elif block.type == "thinking":
            self.thinking[index] = {"type": "thinking", "thinking": "", "signature": ""}
        elif block.type == "redacted_thinking":
            self.thinking[index] = {"type": "redacted_thinking", "data": block.data}

    def delta(self, index: int, delta: Any) -> Iterator[StreamEvent]:
        if delta.type == "text_delta":
            self.text.append(delta.text)
            yield TextDelta(delta.text)
        elif delta.type == "thinking_delta":
            self.reasoning.append(delta.thinking)
            if index in self.thinking:
                self.thinking[index]["thinking"] += delta.thinking
            yield ReasoningDelta(delta.thinking)
        elif delta.type == "signature_delta" and index in self.thinking:
            self.thinking[index]["signature"] += delta.signature
        elif delta.type == "input_json_delta" and index in self.calls:
            self.calls[index][2] += delta.partial_json
            yield ToolCallDelta(self.order.index(index), arguments=delta.partial_json)

    def tool_calls(self) -> list[ToolCall]:
        """The calls, their arguments parsed; one whose arguments cannot be used
        carries why (the last of a reply cut at the output limit: cut off)."""
        settled: list[ToolCall] = []
        for index in self.order:
            call_id, name, raw = self.calls[index]
            cut = self.stop == "max_tokens" and index == self.order[-1]
            arguments, why = call_arguments(raw, cut)
            settled.append(ToolCall(call_id, name, arguments, error=why))
        return settled

    def settled(self) -> Done | ProviderError:
        """The whole reply, once the stream has ended (an error if it ended early)."""
        if self.stop is None:
            return ProviderError("anthropic: the stream ended before the reply did", retryable=True)
        calls = self.tool_calls()
        metadata: dict[str, Any] = {"provider": "anthropic", "stop_reason": self.stop}
        if self.thinking:
            metadata["thinking_blocks"] = [self.thinking[i] for i in sorted(self.thinking)]
        return Done(
            Message(
                role="assistant",
                content="".join(self.text),
                reasoning="".join(self.reasoning) or None,
                tool_calls=tuple(calls),
                usage=self.usage,
                stop_reason=_stop_reason(self.stop, bool(calls)),
                model=self.model_id,
                metadata=metadata,
            )
        )


def _stop_reason(stop: str, calls: bool) -> StopReason:
    """The stop reason stored: a cut reply's is ``max_tokens`` even with calls."""
    if stop == "max_tokens" or not calls:
        return STOP_REASONS.get(stop, "end_turn")
    return "tool_use"


def _usage(reported: Any, before: Usage) -> Usage:
    """Fold a usage report into the running one; input includes cached tokens."""
    if reported is None:
        return before
    cache_read = getattr(reported, "cache_read_input_tokens", None)
    cache_write = getattr(reported, "cache_creation_input_tokens", None)
    fresh = getattr(reported, "input_tokens", None)
    read = before.cache_read_tokens if cache_read is None else cache_read
    write = before.cache_write_tokens if cache_write is None else cache_write
    total = before.input_tokens if fresh is None else fresh + read + write
    output = getattr(reported, "output_tokens", None)
    return Usage(
        input_tokens=total,
        output_tokens=before.output_tokens if output is None else output,
        cache_read_tokens=read,
        cache_write_tokens=write,
    )

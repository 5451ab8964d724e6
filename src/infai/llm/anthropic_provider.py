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

import json
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import anthropic

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
)
from .providers import ModelSpec, SdkModel

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
    return [
        {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}
        for spec in request.tools
    ]


class AnthropicModel(SdkModel):
    """A model behind the Anthropic Messages API."""

    provider = "anthropic"
    sdk: ClassVar[Any] = anthropic
    retry_types = RETRY_TYPES

    def __init__(self, spec: ModelSpec, *, client: anthropic.AsyncAnthropic | None = None) -> None:
        super().__init__(
            spec,
            client
            or anthropic.AsyncAnthropic(
                api_key=spec.require_key(),
                base_url=spec.resolved_base_url(),
                max_retries=0,  # retries are ours, and announced
                timeout=spec.timeout,
            ),
        )

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
        text: list[str] = []
        reasoning: list[str] = []
        thinking: dict[int, dict[str, Any]] = {}  # block index -> the block as it arrives
        calls: dict[int, list[str]] = {}  # block index -> [id, name, argument json]
        order: list[int] = []
        usage = Usage()
        stop: str | None = None
        model_id = self.spec.model
        async with stream:
            async for event in stream:
                kind = event.type
                if kind == "message_start":
                    model_id = event.message.model or model_id
                    usage = _usage(event.message.usage, usage)
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        calls[event.index] = [block.id, block.name, ""]
                        order.append(event.index)
                        yield ToolCallDelta(len(order) - 1, block.id, block.name)
                    elif block.type == "thinking":
                        thinking[event.index] = {
                            "type": "thinking",
                            "thinking": "",
                            "signature": "",
                        }
                    elif block.type == "redacted_thinking":
                        thinking[event.index] = {"type": "redacted_thinking", "data": block.data}
                elif kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        text.append(delta.text)
                        yield TextDelta(delta.text)
                    elif delta.type == "thinking_delta":
                        reasoning.append(delta.thinking)
                        if event.index in thinking:
                            thinking[event.index]["thinking"] += delta.thinking
                        yield ReasoningDelta(delta.thinking)
                    elif delta.type == "signature_delta" and event.index in thinking:
                        thinking[event.index]["signature"] += delta.signature
                    elif delta.type == "input_json_delta" and event.index in calls:
                        calls[event.index][2] += delta.partial_json
                        position = order.index(event.index)
                        yield ToolCallDelta(position, arguments=delta.partial_json)
                elif kind == "message_delta":
                    stop = event.delta.stop_reason or stop
                    usage = _usage(event.usage, usage)
        if stop is None:
            yield ProviderError("anthropic: the stream ended before the reply did", retryable=True)
            return
        settled: list[ToolCall] = []
        for index in order:
            call_id, name, raw = calls[index]
            try:
                arguments = json.loads(raw or "{}")
            except ValueError:
                arguments = None
            if not isinstance(arguments, dict):  # answered with an error result, not run
                why = f"its arguments are not a JSON object: {raw[:200]!r}"
                settled.append(ToolCall(call_id, name, {}, error=why))
                continue
            settled.append(ToolCall(call_id, name, arguments))
        metadata: dict[str, Any] = {"provider": "anthropic", "stop_reason": stop}
        if thinking:
            metadata["thinking_blocks"] = [thinking[i] for i in sorted(thinking)]
        yield Done(
            Message(
                role="assistant",
                content="".join(text),
                reasoning="".join(reasoning) or None,
                tool_calls=tuple(settled),
                usage=usage,
                stop_reason="tool_use" if settled else STOP_REASONS.get(stop, "end_turn"),
                model=model_id,
                metadata=metadata,
            )
        )


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

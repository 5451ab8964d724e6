"""The OpenAI provider: Chat Completions with streaming, through the official SDK.

Chat Completions is the dialect every OpenAI-compatible server speaks (Ollama,
vLLM, llama.cpp server, OpenRouter), so one provider reaches them all with a
``base_url``. Messages map one to one (system prompt first, assistant tool
calls as ``function`` calls with JSON-string arguments, results as ``tool``
messages). Reasoning that such servers stream as ``reasoning_content`` or
``reasoning`` becomes reasoning deltas. Tool-call fragments are reassembled by
index; a call whose arguments are not a JSON object is settled with an
``error`` (the loop answers it with an error result) rather than run on a
guess. Usage comes from the final chunk (``stream_options.include_usage``).

A reply is complete when the stream carried a ``finish_reason`` or ended with
``data: [DONE]``: some services (seen behind OpenRouter) end a whole reply
with ``[DONE]`` and never send a reason, and then the stop reason is inferred
(tool calls: tool use; else the end of the turn). A stream that stops with
neither was cut short, and is an error.
"""

from __future__ import annotations

import json
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
    import openai

#: error types or codes, in an error object inside a stream, worth another try
RETRY_TYPES = {"server_error", "rate_limit_error", "rate_limit_exceeded", "overloaded_error"}
STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


def to_openai(request: Request) -> list[dict[str, Any]]:
    """The request's messages in Chat Completions form."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "tool":
            out.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        elif message.role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                item["content"] = message.content or None
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in message.tool_calls
                ]
            out.append(item)
        else:
            out.append({"role": message.role, "content": message.content})
    return out


def tools_to_openai(request: Request) -> list[dict[str, Any]]:
    """The request's tools as Chat Completions ``function`` tools (schemas as given)."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        for spec in request.tools
    ]


class _Call:
    __slots__ = ("id", "name", "arguments")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments = ""


def _index_of(fragment: Any, calls: dict[int, _Call]) -> int:
    """Which call a fragment continues: its index, else (servers that send none) its id."""
    if fragment.index is not None:
        return int(fragment.index)
    for index, call in calls.items():
        if fragment.id and call.id == fragment.id:
            return index
    if fragment.id or not calls:
        return len(calls)
    return max(calls)  # no index and no id: it continues the latest call


class OpenAIModel(SdkModel):
    """A model behind the OpenAI Chat Completions API (or a compatible server)."""

    provider = "openai"
    retry_types = RETRY_TYPES

    def __init__(self, spec: ModelSpec, *, client: openai.AsyncOpenAI | None = None) -> None:
        super().__init__(spec, client)
        # a missing key is said now, as the model is built; the SDK waits for a request
        self._key = spec.require_key() if client is None else ""

    @classmethod
    def _sdk(cls) -> Any:
        import openai

        return openai

    def _make_client(self) -> openai.AsyncOpenAI:
        client: openai.AsyncOpenAI = self._sdk().AsyncOpenAI(
            api_key=self._key,
            base_url=self.spec.resolved_base_url(),
            max_retries=0,  # retries are ours, and announced
            timeout=self.spec.timeout,
        )
        return client

    def _options(self, request: Request) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if request.tools:
            options["tools"] = tools_to_openai(request)
        max_tokens = request.max_tokens or self.spec.max_tokens
        if max_tokens:
            # OpenAI's own API wants the newer name (its reasoning models refuse the
            # old one); compatible servers know the old one best
            official = self.spec.resolved_base_url() is None
            options["max_completion_tokens" if official else "max_tokens"] = max_tokens
        return options

    async def _events(self, request: Request) -> AsyncIterator[StreamEvent]:
        create: Any = self._client.chat.completions.create  # our dicts are its TypedDicts
        stream = await create(
            model=self.spec.model,
            messages=to_openai(request),
            stream=True,
            stream_options={"include_usage": True},
            **self._options(request),
        )
        reply = _Reply(self.spec.model)
        watch = _watch_for_done(stream)
        async with stream:
            async for chunk in stream:
                for event in reply.chunk(chunk):
                    yield event
        reply.done = watch is not None and watch.done
        if reply.finish == "length":
            yield cut_notice(len(reply.calls))
        yield reply.settled()


class _DoneWatch:
    """An SSE decoder that passes every event on and notes whether ``[DONE]`` came.

    The SDK reads ``[DONE]`` itself and ends the iteration without a word, the
    same as when the body just stops; only its decoder sees the difference.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.done = False

    def _note(self, sse: Any) -> Any:
        if str(getattr(sse, "data", "")).startswith("[DONE]"):
            self.done = True
        return sse

    def iter_bytes(self, iterator: Any) -> Iterator[Any]:
        for sse in self.inner.iter_bytes(iterator):
            yield self._note(sse)

    async def aiter_bytes(self, iterator: Any) -> AsyncIterator[Any]:
        async for sse in self.inner.aiter_bytes(iterator):
            yield self._note(sse)


def _watch_for_done(stream: Any) -> _DoneWatch | None:
    """Put a :class:`_DoneWatch` around the stream's SSE decoder (the SDK keeps it
    as ``_decoder`` and first uses it when iterated). An SDK without one gives
    None: only a ``finish_reason`` then says a reply is whole, as before."""
    inner = getattr(stream, "_decoder", None)
    if inner is None or not hasattr(inner, "aiter_bytes"):
        return None
    watch = _DoneWatch(inner)
    stream._decoder = watch
    return watch


class _Reply:
    """A streamed reply as it arrives: its text, reasoning, tool calls and end."""

    def __init__(self, model_id: str) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.finish: str | None = None
        #: the stream ended with ``data: [DONE]``
        self.done = False
        self.usage: Usage | None = None
        self.model_id = model_id

    def chunk(self, chunk: Any) -> Iterator[StreamEvent]:
        """The deltas in one chunk of the stream."""
        self.model_id = chunk.model or self.model_id
        if chunk.usage is not None:
            details = chunk.usage.prompt_tokens_details
            self.usage = Usage(
                input_tokens=chunk.usage.prompt_tokens,
                output_tokens=chunk.usage.completion_tokens,
                cache_read_tokens=(details.cached_tokens or 0) if details else 0,
            )
        for choice in chunk.choices or ():
            self.finish = choice.finish_reason or self.finish
            if choice.delta is not None:  # some servers send a bare finish_reason
                yield from self.delta(choice.delta)

    def delta(self, delta: Any) -> Iterator[StreamEvent]:
        extra = delta.model_extra or {}
        thought = extra.get("reasoning_content") or extra.get("reasoning")
        if isinstance(thought, str) and thought:
            self.reasoning.append(thought)
            yield ReasoningDelta(thought)
        if delta.content:
            self.text.append(delta.content)
            yield TextDelta(delta.content)
        for fragment in delta.tool_calls or ():
            yield self.fragment(fragment)

    def fragment(self, fragment: Any) -> ToolCallDelta:
        """A piece of a tool call, added to the call it continues."""
        index = _index_of(fragment, self.calls)
        call = self.calls.setdefault(index, _Call())
        name = args = None
        if fragment.id:
            call.id = fragment.id
        if fragment.function is not None:
            name = fragment.function.name
            args = fragment.function.arguments
            if name and name != call.name:  # some servers repeat it
                call.name += name
            call.arguments += args or ""
        return ToolCallDelta(index, fragment.id, name, args or "")

    def tool_calls(self) -> list[ToolCall]:
        """The calls, their arguments parsed; one whose arguments cannot be used
        carries why (the last of a reply cut at the output limit: cut off)."""
        settled: list[ToolCall] = []
        last = max(self.calls, default=None)
        for index in sorted(self.calls):
            call = self.calls[index]
            cut = self.finish == "length" and index == last
            arguments, why = call_arguments(call.arguments, cut)
            settled.append(ToolCall(call.id or f"call_{index}", call.name, arguments, error=why))
        return settled

    def settled(self) -> Done | ProviderError:
        """The whole reply, once the stream has ended (an error if it ended early:
        neither a ``finish_reason`` nor ``[DONE]``)."""
        if self.finish is None and not self.done:
            return ProviderError("openai: the stream ended before the reply did", retryable=True)
        calls = self.tool_calls()
        stop = "tool_use" if calls else STOP_REASONS.get(self.finish or "stop", "end_turn")
        if self.finish == "length":  # cut, calls or not: said so in the stored event
            stop = "max_tokens"
        metadata: dict[str, Any] = {"provider": "openai"}
        if self.finish is not None:  # none: inferred from a stream ended by [DONE]
            metadata["finish_reason"] = self.finish
        return Done(
            Message(
                role="assistant",
                content="".join(self.text),
                reasoning="".join(self.reasoning) or None,
                tool_calls=tuple(calls),
                usage=self.usage,
                stop_reason=stop,
                model=self.model_id,
                metadata=metadata,
            )
        )

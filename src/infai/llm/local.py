"""Models that run here, with no provider and no network: the built-in ``offline``
and ``scripted:FILE`` models, and the fakes tests use (:mod:`infai.llm.fakes`).

- :class:`ScriptedModel` replays given replies in order (text, tool calls or
  provider errors) and records every request, so a test can script a whole
  conversation and then check what the model was sent.
- :class:`FunctionModel` answers each request with a function of it.
- :class:`OfflineModel` (``offline``) is deterministic: it answers by quoting
  the last user message, never calls tools, and reports usage estimated at four
  characters per token, so context accounting and compaction thresholds behave
  as with a real model.

All of them stream like a real provider: reasoning and text in small deltas,
tool-call arguments in fragments, then :class:`~infai.llm.messages.Done`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import replace

from infai.store import Usage

from .messages import (
    Done,
    Message,
    ProviderError,
    ReasoningDelta,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from .tokens import estimate_tokens

Reply = Message | ProviderError | str
DELTA_CHARS = 8


def request_tokens(request: Request) -> int:
    """An estimate of a request's input tokens (system, messages, call arguments; not tools)."""
    parts = [request.system, *(m.content for m in request.messages)]
    parts += [json.dumps(c.arguments) for m in request.messages for c in m.tool_calls]
    return sum(estimate_tokens(p) for p in parts)


def settle(reply: Reply, request: Request, model: str) -> Message | ProviderError:
    """The assistant message a reply stands for, with usage and stop reason filled in."""
    if isinstance(reply, ProviderError):
        return reply
    message = Message(role="assistant", content=reply) if isinstance(reply, str) else reply
    stop = message.stop_reason or ("tool_use" if message.tool_calls else "end_turn")
    usage = message.usage or Usage(
        input_tokens=request_tokens(request),
        output_tokens=estimate_tokens(message.content) + estimate_tokens(message.reasoning or ""),
    )
    return replace(message, stop_reason=stop, usage=usage, model=message.model or model)


def _pieces(text: str) -> Iterable[str]:
    return (text[i : i + DELTA_CHARS] for i in range(0, len(text), DELTA_CHARS))


async def stream_reply(reply: Message | ProviderError) -> AsyncIterator[StreamEvent]:
    """Stream a settled reply the way providers do: deltas first, then Done."""
    if isinstance(reply, ProviderError):
        yield reply
        return
    for piece in _pieces(reply.reasoning or ""):
        yield ReasoningDelta(piece)
    for piece in _pieces(reply.content):
        yield TextDelta(piece)
    for index, call in enumerate(reply.tool_calls):
        arguments = json.dumps(call.arguments)
        middle = len(arguments) // 2
        yield ToolCallDelta(index, id=call.id, name=call.name, arguments=arguments[:middle])
        yield ToolCallDelta(index, arguments=arguments[middle:])
    yield Done(reply)


class ScriptedModel:
    """Replays ``replies`` in order, one per request; records the requests."""

    def __init__(
        self, replies: Iterable[Reply], *, name: str = "scripted", context_window: int = 128_000
    ) -> None:
        self._replies = list(replies)
        self._name = name
        self._context_window = context_window
        self.requests: list[Request] = []

    @property
    def name(self) -> str:
        """The name given (also the ``model`` of its messages)."""
        return self._name

    @property
    def context_window(self) -> int:
        """The window given, so tests can drive compaction with small ones."""
        return self._context_window

    @property
    def remaining(self) -> int:
        """Replies not used yet."""
        return len(self._replies)

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Record ``request`` and stream the next reply; none left is a ProviderError."""
        self.requests.append(request)
        if not self._replies:
            error = ProviderError(
                f"scripted model {self._name!r} has no reply left for this request"
            )
            return stream_reply(error)
        return stream_reply(settle(self._replies.pop(0), request, self._name))


class FunctionModel:
    """Answers each request with ``fn(request)``: a message, an error, or text."""

    def __init__(
        self,
        fn: Callable[[Request], Reply],
        *,
        name: str = "function",
        context_window: int = 128_000,
    ) -> None:
        self._fn = fn
        self._name = name
        self._context_window = context_window

    @property
    def name(self) -> str:
        """The name given (also the ``model`` of its messages)."""
        return self._name

    @property
    def context_window(self) -> int:
        """The window given, so tests can drive compaction with small ones."""
        return self._context_window

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Call ``fn`` at once (not when iterated) and stream its reply as a provider would."""
        return stream_reply(settle(self._fn(request), request, self._name))


class OfflineModel(FunctionModel):
    """The built-in ``offline`` model: deterministic, local, no tools.

    Asked for a summary (``purpose="summary"``) it lists the user's requests as
    goals and reports how many messages it summarised, as the JSON object the
    compaction prompt asks for.
    """

    def __init__(self, *, context_window: int = 32_000) -> None:
        super().__init__(self._answer, name="offline", context_window=context_window)

    @staticmethod
    def _answer(request: Request) -> str:
        if request.purpose == "summary":
            return OfflineModel._summary(request)
        last = next((m for m in reversed(request.messages) if m.role == "user"), None)
        if last is None:
            return "offline model: there is no user message to answer."
        first_line = last.content.strip().splitlines()[0] if last.content.strip() else ""
        return (
            f"offline model: you said {first_line!r} "
            f"({len(request.messages)} messages in context). "
            "Configure a real model (infai config model) for real answers."
        )

    @staticmethod
    def _summary(request: Request) -> str:
        asks = [
            m.content.strip().splitlines()[0]
            for m in request.messages[:-1]
            if m.role == "user" and m.content.strip()
        ]
        return json.dumps(
            {
                "summary": f"offline summary of {len(request.messages) - 1} messages",
                "goals": asks[-5:],
                "constraints": [],
                "decisions": [],
                "files_changed": [],
                "unresolved": [],
                "facts": [],
            }
        )

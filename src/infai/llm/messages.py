"""The provider-neutral message model and the events a model streams.

A :class:`Message` is what the conversation holds: a role, text, optional
reasoning, the tool calls an assistant asked for, or (role ``tool``) the result
of one; plus usage, stop reason and provider metadata for assistant replies.
A model streams :data:`StreamEvent` values, a tagged union (``kind``): deltas
that shells show live and nobody persists, :class:`Notice` for things the user
should see (a retry after a rate limit), :class:`ProviderError` when the
provider failed (data, not an exception), and :class:`Done` with the settled
message, always last. :func:`collect` folds a stream into its outcome.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from infai.store import Usage

Role = Literal["system", "user", "assistant", "tool"]
StopReason = Literal["end_turn", "tool_use", "max_tokens", "error", "cancelled"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool invocation the model asked for; ``arguments`` is a JSON object.

    ``error`` says why the call cannot run as sent (its arguments were not a JSON
    object); the loop answers such a call with an error result, never runs it.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: its name, what it does, its JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation, as every provider's format is built from."""

    role: Role
    content: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    #: for role "tool": the call this message answers, and whether it failed
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    usage: Usage | None = None
    stop_reason: StopReason | None = None
    model: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Request:
    """What a model is asked: the system prompt is separate from the messages.

    ``purpose`` is ``"summary"`` when the harness asks for a compaction summary
    (a JSON object, see :mod:`infai.agent.compaction`), so a model may treat it
    specially; providers ignore it.
    """

    messages: tuple[Message, ...]
    system: str = ""
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    purpose: Literal["chat", "summary"] = "chat"


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply's visible text, in order."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (thinking), shown apart from the reply."""

    text: str
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of tool call ``index``: its id and name once, argument JSON in pieces."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user should see that is not part of the reply (a retry)."""

    message: str
    kind: Literal["notice"] = "notice"


@dataclass(frozen=True, slots=True)
class ProviderError:
    """The provider failed; ``retryable`` says whether trying again may help.

    ``retry_after`` is the wait in seconds the provider asked for, if it did.
    """

    message: str
    status: int | None = None
    retryable: bool = False
    retry_after: float | None = None
    kind: Literal["error"] = "error"


@dataclass(frozen=True, slots=True)
class Done:
    """The settled message; always the last event of a successful stream."""

    message: Message
    kind: Literal["done"] = "done"


StreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | Notice | ProviderError | Done


class Model(Protocol):
    """A model: a name, a context window, and a stream of events per request."""

    @property
    def name(self) -> str:
        """The name the user knows the model by (a config entry's, or provider:model)."""

    @property
    def context_window(self) -> int:
        """Tokens the model accepts; compaction keeps the context under it."""

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Deltas, then :class:`Done` or :class:`ProviderError`; failures are events,
        not exceptions (drain it with :func:`collect`)."""


def call_arguments(raw: str, cut: bool = False) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments from the JSON text the model streamed, and why they
    cannot be used (None: they can). With ``cut`` (the reply stopped at the output
    limit while this call was being written) text that is not a JSON object is said
    to be cut off, so the model asks for less at once instead of fixing its JSON."""
    try:
        arguments = json.loads(raw or "{}")
    except (ValueError, RecursionError):  # nested past what json parses
        arguments = None
    if isinstance(arguments, dict):
        return arguments, None
    if cut:
        return {}, (
            "its arguments were cut off: the reply reached the output limit (max_tokens) "
            f"after {len(raw)} characters of them, before they were complete; "
            "ask for less in one call (split a large write into several edits)"
        )
    return {}, f"its arguments are not a JSON object: {raw[:200]!r}"


def cut_notice(calls: int) -> Notice:
    """What the user is told of a reply cut at the output limit (its stop reason is
    ``max_tokens``, whatever tool calls it holds)."""
    what = f" while writing a tool call ({calls} in the reply)" if calls else ""
    return Notice(f"the reply was cut at the model's output limit (max_tokens){what}")


async def collect(events: AsyncIterator[StreamEvent]) -> Message | ProviderError:
    """Drain a stream: the settled message, or the error that ended it.

    A stream that ends without :class:`Done` or :class:`ProviderError` is itself
    a provider error (a truncated stream is never mistaken for a reply).
    """
    async for event in events:
        if isinstance(event, Done):
            return event.message
        if isinstance(event, ProviderError):
            return event
    return ProviderError("the model's stream ended without a reply", retryable=True)


async def close_model(model: Model) -> None:
    """Release what a model holds (an SDK client's connections), if anything.

    Call it in the event loop the model streamed in, before that loop ends.
    Closing a model twice is harmless (infai's own models close once).
    """
    closer = getattr(model, "aclose", None)
    if closer is not None:
        await closer()

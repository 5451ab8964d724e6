"""What the SDK-backed providers share: their settings, retries, and errors.

A :class:`ModelSpec` says how to reach one model: the provider (a name in the
provider registry: :mod:`~infai.llm.provider_registry`), the provider's model
id, an optional base URL (an OpenAI-compatible server such as Ollama, vLLM or
llama.cpp), the environment variable that holds the key, and the context
window. Configuration files produce specs; so does a plain ``provider:model``
name. What a provider's name stands for (how its models are built, its key
variable, its base URL and context window by default) is its registration, a
:class:`~infai.llm.provider_registry.ProviderInfo`.

Retries are the harness's, not the SDK's (whose retries are silent): an error
that may pass (a rate limit, an overloaded or failing server, a timeout, a lost
connection) is retried with exponential backoff, honouring ``Retry-After``, and
each retry is announced with a :class:`~infai.llm.messages.Notice` the shells
show. A server's ``x-should-retry`` header overrides the status code's verdict,
and a ``Retry-After`` longer than two minutes ends the attempt with the error
rather than hanging the turn. Only failures before the first delta are retried: once text has been
shown, a silent restart would show it twice, so the error ends the stream as
data and the user decides.

Usage is normalised: ``input_tokens`` is the whole prompt (cached tokens
included, as OpenAI counts it; Anthropic's separate cache counts are added
back), so the compaction threshold means the same for every provider.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .messages import (
    Notice,
    ProviderError,
    ReasoningDelta,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from .provider_registry import DEFAULT_CONTEXT_WINDOW, ProviderInfo, provider_named
from .provider_registry import ModelUnavailable as ModelUnavailable

#: HTTP statuses worth another try: timeout, conflict, rate limit, server trouble
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently transient errors are retried."""

    attempts: int = 4
    base_delay: float = 1.0
    max_delay: float = 30.0
    #: a server asking for a longer wait than this is not retried (the error is shown)
    max_retry_after: float = 120.0

    def delay(self, attempt: int, retry_after: float | None) -> float | None:
        """The wait before retry number ``attempt`` (0-based), jittered; None: give up."""
        if retry_after is not None and retry_after >= 0:
            return retry_after if retry_after <= self.max_retry_after else None
        backoff = self.base_delay * 2.0**attempt
        return min(self.max_delay, backoff * (0.75 + random.random() / 2))


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """How to reach one model through a provider's SDK."""

    #: a registered provider's name (:func:`~infai.llm.provider_registry.provider_named`)
    provider: str
    model: str
    base_url: str | None = None
    #: the environment variable holding the API key (the SDK's own by default)
    key_env: str | None = None
    #: the API key itself, when the user's config file holds it (``api_key``; the file
    #: is then 0600); else the environment's (``key_env``)
    key: str | None = field(default=None, repr=False)
    #: no key from the environment at all (a project's model that sends elsewhere:
    #: :func:`infai.agent.config.load_config`)
    keyless: bool = False
    context_window: int = DEFAULT_CONTEXT_WINDOW
    max_tokens: int | None = None
    #: Anthropic extended thinking with a token budget (None: off)
    thinking_budget: int | None = None
    #: Anthropic adaptive thinking (the model decides; newer models require it)
    adaptive_thinking: bool = False
    #: the name the user knows it by (a config entry's name, or provider:model)
    name: str | None = None
    retry: RetryPolicy = RetryPolicy()
    #: the request timeout, seconds
    timeout: float = 600.0

    @property
    def display_name(self) -> str:
        """The name to show: the configured ``name``, else ``provider:model``."""
        return self.name or f"{self.provider}:{self.model}"

    @property
    def info(self) -> ProviderInfo:
        """The provider's registration; ModelUnavailable for a name none registered."""
        return provider_named(self.provider)

    def key_variable(self) -> str | None:
        """Where the key is looked for: ``key_env``, else the provider's variable
        (None for a keyless model)."""
        if self.keyless:
            return None
        return self.key_env or self.info.key_env

    def api_key(self) -> str | None:
        """The key: the config's ``api_key``, else the environment's
        (:meth:`key_variable`); None if neither."""
        if self.key:
            return self.key
        env = self.key_variable()
        return (os.environ.get(env) or None) if env else None

    def resolved_base_url(self) -> str | None:
        """``base_url``, else the provider's base-URL environment variable, else its
        own default (a profile's endpoint); None: the SDK's."""
        info = self.info
        from_env = os.environ.get(info.base_env) if info.base_env else None
        return self.base_url or from_env or info.base_url

    def require_key(self) -> str:
        """The API key; a server the user pointed at (a base URL given here or in the
        provider's base-URL variable) may do without one, and so may a provider
        registered as needing none (a local Ollama)."""
        key = self.api_key()
        if key:
            return key
        info = self.info
        chosen = self.base_url or (info.base_env and os.environ.get(info.base_env))
        if chosen or not info.key_required:
            return "not-needed"
        env = self.key_variable() or f"{self.provider.upper()}_API_KEY"
        raise ModelUnavailable(
            f"model {self.display_name!r} needs an API key: set {env} "
            f"(or give the model a base_url for a local server)"
        )


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds only), if any."""
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return float(millis) / 1000
        seconds = headers.get("retry-after")
        return float(seconds) if seconds is not None else None
    except (TypeError, ValueError):
        return None


def body_message(body: object, fallback: str) -> tuple[str, str]:
    """The message and type in an error body (``{"error": {...}}`` or the inner object)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message")
            kind = inner.get("type")
            return (
                message if isinstance(message, str) and message else fallback,
                kind if isinstance(kind, str) else "error",
            )
    return fallback, "error"


def status_error(provider: str, status: int, message: str, headers: Any) -> ProviderError:
    """An HTTP error as data, with a message that says what happened."""
    what = {
        401: "the API key was refused",
        403: "permission denied",
        404: "not found (check the model name and base URL)",
        429: "rate limited",
        529: "overloaded",
    }.get(status, "server error" if status >= 500 else "request refused")
    retryable = status in RETRY_STATUSES
    should = headers.get("x-should-retry") if headers is not None else None
    if should in ("true", "false"):  # the server knows better than the status code
        retryable = should == "true"
    return ProviderError(
        f"{provider}: {what} (HTTP {status}): {message}",
        status=status,
        retryable=retryable,
        retry_after=parse_retry_after(headers),
    )


Attempt = Callable[[Request], AsyncIterator[StreamEvent]]


async def errors_as_data(
    events: AsyncIterator[StreamEvent], provider: str, sdk: Any, retry_types: set[str]
) -> AsyncIterator[StreamEvent]:
    """``events``, with the SDK's exceptions turned into a final :class:`ProviderError`.

    ``sdk`` is the SDK module (``openai`` or ``anthropic``: their exception
    trees have the same shape). An error reported inside a stream (a status
    error with status 200, or an API error with no status) is retried only
    when its type or code is in ``retry_types``.
    """
    import httpx2

    try:
        async for event in events:
            yield event
    except sdk.APIStatusError as exc:
        message, kind = body_message(exc.body, exc.message)
        if exc.status_code == 200:  # an error event inside the stream
            failed = f"{provider}: the stream failed ({kind}): {message}"
            yield ProviderError(failed, retryable=kind in retry_types)
        else:
            yield status_error(provider, exc.status_code, message, exc.response.headers)
    except (sdk.APIConnectionError, httpx2.TransportError) as exc:
        yield ProviderError(f"{provider}: the connection failed: {exc}", retryable=True)
    except sdk.APIError as exc:  # an error object inside the stream
        message, kind = body_message(exc.body, exc.message)
        code = exc.body.get("code") if isinstance(exc.body, dict) else None
        retry = kind in retry_types or code in retry_types
        yield ProviderError(f"{provider}: the stream failed ({kind}): {message}", retryable=retry)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        yield ProviderError(f"{provider}: malformed stream: {type(exc).__name__}: {exc}")


async def with_retries(
    attempt: Attempt, request: Request, policy: RetryPolicy, provider: str
) -> AsyncGenerator[StreamEvent, None]:
    """Run ``attempt``, retrying a retryable error that came before any delta."""
    for number in range(policy.attempts):
        started = False
        async for event in attempt(request):
            if isinstance(event, ProviderError) and event.retryable and not started:
                wait = policy.delay(number, event.retry_after)
                if wait is not None and number + 1 < policy.attempts:
                    yield Notice(
                        f"{event.message}; retrying in {wait:.1f}s "
                        f"(attempt {number + 2} of {policy.attempts})"
                    )
                    await asyncio.sleep(wait)
                    break
            if isinstance(event, TextDelta | ReasoningDelta | ToolCallDelta):
                started = True
            yield event
            if isinstance(event, ProviderError):
                return
        else:
            return
    # unreachable: the last attempt never breaks


class SdkModel:
    """What the SDK-backed models share: a spec, a client, retries, errors as data.

    A subclass names its ``provider``, the error types worth retrying inside a
    stream, how to import its SDK (:meth:`_sdk`) and make its client
    (:meth:`_make_client`), and implements :meth:`_events` (one attempt). The SDK
    is imported, and the client made, on the first request (or by :meth:`prepare`),
    not when the model is built: building one is cheap, so a shell that builds
    its model at start draws its first screen without waiting for the SDK.
    """

    provider: ClassVar[str]
    retry_types: ClassVar[set[str]]

    def __init__(self, spec: ModelSpec, client: Any = None) -> None:
        self.spec = spec
        self._client_made: Any = client
        self._closed = False

    @classmethod
    def _sdk(cls) -> Any:
        """The SDK module (imported now, if not yet)."""
        raise NotImplementedError

    def _make_client(self) -> Any:
        raise NotImplementedError

    @property
    def sdk(self) -> Any:
        """The SDK module (its exception tree answers what went wrong)."""
        return self._sdk()

    @property
    def _client(self) -> Any:
        """The SDK client, made on first use (in the loop that then uses it)."""
        if self._client_made is None:
            self._client_made = self._make_client()
        return self._client_made

    def prepare(self) -> None:
        """Import the SDK now (e.g. in a thread while the user types), so the first
        request does not wait for it; harmless to call more than once."""
        self._sdk()
        self._prepared = True

    #: the SDK has been imported (by :meth:`prepare`); until then a request imports
    #: it in a worker thread first, never in the event loop (a server's other
    #: sessions would stall for the half second an SDK takes to import)
    _prepared = False

    @property
    def name(self) -> str:
        """The spec's display name."""
        return self.spec.display_name

    @property
    def context_window(self) -> int:
        """The spec's context window (configured; the SDK is not asked)."""
        return self.spec.context_window

    async def aclose(self) -> None:
        """Close the SDK client's connections (in the event loop that used them).

        Closing twice is harmless: a session closes its model, and a shell that
        still closes it too does no harm.
        """
        if self._closed:
            return
        self._closed = True
        if self._client_made is not None:  # never used: no client, nothing to close
            await self._client_made.close()

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Stream one reply; a transient error before the first delta is retried per the
        spec's :class:`RetryPolicy` (announced by a :class:`Notice`), and SDK exceptions
        arrive as :class:`ProviderError` events (named by the spec's provider: an
        OpenAI-compatible profile's errors say ``groq:``, not ``openai:``)."""
        return self._stream(request)

    async def _stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        if not self._prepared:
            await asyncio.to_thread(self.prepare)
        attempts = with_retries(self._attempt, request, self.spec.retry, self.spec.provider)
        async with aclosing(attempts):  # a reader that stops early closes the stream now
            async for event in attempts:
                yield event

    def _attempt(self, request: Request) -> AsyncIterator[StreamEvent]:
        events = self._events(request)
        return errors_as_data(events, self.spec.provider, self.sdk, self.retry_types)

    def _events(self, request: Request) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

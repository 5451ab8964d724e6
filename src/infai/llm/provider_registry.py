"""Providers by name: a registry, not a ``Literal`` and an if/else.

A provider is a :class:`ProviderInfo`: its name (what ``provider = "..."`` in a
``[models.NAME]`` table and the ``NAME:MODEL`` form of a model name say), how a
model is built for a :class:`~infai.llm.providers.ModelSpec`, and its defaults:
the environment variable holding the key, the base URL (and the variable that
may override it), the context window assumed when the configuration gives
none, whether the key may be left out, whether Anthropic's thinking settings
apply. Adding a provider is :func:`register_provider`; an OpenAI-compatible
service is one call of :func:`openai_compatible` (a base URL, a key variable,
a default window), since the OpenAI SDK speaks to all of them.

Registered here, as such registrations:

- ``openai`` and ``anthropic``: the official SDKs, reached at
  ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` when set (a base URL given
  that way, or in the configuration, means a server that may need no key);
- the OpenAI-compatible profiles ``openrouter``, ``ollama`` (a local server:
  no key needed), ``groq``, ``deepseek`` and ``gemini`` (Google's OpenAI
  endpoint); see :data:`PROFILES` for each one's endpoint, key variable and
  default window.

A name no registration has is offered to the finders (:func:`add_finder`: the
agent layer adds one that loads an installed plugin's provider of that name)
before it is an error, and the error lists every registered name. The SDKs are
imported only when a model is built, never at registration: start-up stays fast.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infai.errors import InfaiError

from .messages import Model

#: builds a model for a :class:`~infai.llm.providers.ModelSpec`; or ``"module:attr"``
#: naming such a callable (a model class), imported only when a model is built
Builder = Callable[[Any], Model] | str

DEFAULT_CONTEXT_WINDOW = 128_000
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
#: names the model registry reads itself, which no provider may take
RESERVED = frozenset({"offline", "scripted"})


class ModelUnavailable(InfaiError):
    """A model cannot be built as asked (unknown name, missing key, bad setting)."""


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """A provider, as registered: how to build its models, and its defaults."""

    name: str
    #: a model for a spec of this provider; imports its SDK when called, not before
    build: Builder
    #: the environment variable holding the key (None: the provider takes none)
    key_env: str | None = None
    #: the endpoint used when the spec and ``base_env`` give none (None: the SDK's)
    base_url: str | None = None
    #: an environment variable that overrides ``base_url`` (the user points elsewhere)
    base_env: str | None = None
    #: the context window of a model whose configuration gives none
    context_window: int = DEFAULT_CONTEXT_WINDOW
    #: False: a missing key is no error (a local server)
    key_required: bool = True
    #: whether Anthropic's thinking settings (``thinking``, ``thinking_budget``) apply
    thinking: bool = False
    #: one line for ``infai models`` and ``infai plugins``
    description: str = ""

    def model(self, spec: Any) -> Model:
        """A model for ``spec`` (a :class:`~infai.llm.providers.ModelSpec` of this
        provider), importing the builder named by a ``"module:attr"`` string now."""
        build = self.build
        if isinstance(build, str):
            module, _, attr = build.partition(":")
            try:
                build = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as exc:
                raise ModelUnavailable(
                    f"provider {self.name!r}: cannot load {build}: {exc}"
                ) from None
        built: Model = build(spec)
        return built


_lock = threading.Lock()
_registered: dict[str, ProviderInfo] = {}
#: asked, in order, for a name not registered; one may register it (a plugin)
_finders: list[Callable[[str], ProviderInfo | None]] = []


def register_provider(info: ProviderInfo, *, replace: bool = False) -> ProviderInfo:
    """Make ``info`` the provider of its name; returns it.

    A name is lower-case letters, digits, ``-`` and ``_`` (it is written in
    ``NAME:MODEL``). Registering a taken name again is a ValueError unless
    ``replace`` (a test, or a user deliberately overriding a built-in).
    """
    if not isinstance(info, ProviderInfo):
        raise TypeError(f"a provider is registered as a ProviderInfo, not {type(info).__name__}")
    if not _NAME.fullmatch(info.name) or info.name in RESERVED:
        raise ValueError(
            f"provider name {info.name!r}: lower-case letters, digits, '-' and '_', "
            f"starting with a letter, and not {' or '.join(sorted(RESERVED))}"
        )
    if info.context_window <= 0:
        raise ValueError(f"provider {info.name!r}: context_window must be positive")
    with _lock:
        if info.name in _registered and not replace and _registered[info.name] != info:
            raise ValueError(f"provider {info.name!r} is already registered")
        _registered[info.name] = info
    return info


def unregister_provider(name: str) -> None:
    """Forget the provider ``name`` (tests that register one of their own)."""
    with _lock:
        _registered.pop(name, None)


def add_finder(finder: Callable[[str], ProviderInfo | None]) -> None:
    """Ask ``finder`` for a provider name nobody registered (once per finder)."""
    with _lock:
        if finder not in _finders:
            _finders.append(finder)


def registered() -> dict[str, ProviderInfo]:
    """The providers registered so far, by name (a finder's are there once found)."""
    with _lock:
        return dict(_registered)


def provider_names() -> list[str]:
    """The registered providers' names, sorted (what ``PROVIDER:MODEL`` may start with)."""
    return sorted(registered())


def find_provider(name: str) -> ProviderInfo | None:
    """The provider called ``name``: registered, else one a finder supplies (and
    which is then registered); None when there is none."""
    with _lock:
        info = _registered.get(name)
        finders = list(_finders)
    if info is not None:
        return info
    for finder in finders:
        found = finder(name)
        if found is not None and found.name == name:
            return register_provider(found, replace=True)
    return None


def provider_named(name: str) -> ProviderInfo:
    """The provider called ``name``, or ModelUnavailable listing every registered name."""
    info = find_provider(name)
    if info is None:
        names = ", ".join(sorted(registered()))
        raise ModelUnavailable(f"unknown provider {name!r} (registered: {names})")
    return info


_OPENAI = "infai.llm.openai_provider:OpenAIModel"
_ANTHROPIC = "infai.llm.anthropic_provider:AnthropicModel"


def openai_compatible(
    name: str,
    base_url: str,
    key_env: str | None,
    context_window: int = DEFAULT_CONTEXT_WINDOW,
    *,
    key_required: bool = True,
    description: str = "",
) -> ProviderInfo:
    """A provider speaking OpenAI's Chat Completions at ``base_url`` with the key in
    ``key_env``: a service that is one registration, no code of its own."""
    return ProviderInfo(
        name=name,
        build=_OPENAI,
        key_env=key_env,
        base_url=base_url,
        context_window=context_window,
        key_required=key_required,
        description=description or f"OpenAI-compatible at {base_url}",
    )


#: the OpenAI-compatible services infai knows by name (windows: a model's own
#: configuration says better; these are what is assumed when it says nothing)
PROFILES = (
    openai_compatible("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", 128_000),
    # Ollama's own default context is 4k tokens (more with more VRAM, or
    # OLLAMA_CONTEXT_LENGTH); a longer prompt is cut silently, so assume the least
    openai_compatible(
        "ollama", "http://localhost:11434/v1", "OLLAMA_API_KEY", 4_096, key_required=False
    ),
    openai_compatible("groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY", 131_072),
    openai_compatible("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", 128_000),
    openai_compatible(
        "gemini",
        "https://generativelanguage.googleapis.com/v1beta/openai/",
        "GEMINI_API_KEY",
        1_048_576,
    ),
)

register_provider(
    ProviderInfo(
        "openai",
        _OPENAI,
        key_env="OPENAI_API_KEY",
        base_env="OPENAI_BASE_URL",
        context_window=128_000,
        description="OpenAI's Chat Completions (or a compatible server at OPENAI_BASE_URL)",
    )
)
register_provider(
    ProviderInfo(
        "anthropic",
        _ANTHROPIC,
        key_env="ANTHROPIC_API_KEY",
        base_env="ANTHROPIC_BASE_URL",
        context_window=200_000,
        thinking=True,
        description="Anthropic's Messages API",
    )
)
for _profile in PROFILES:
    register_provider(_profile)


__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "PROFILES",
    "RESERVED",
    "Builder",
    "ModelUnavailable",
    "ProviderInfo",
    "add_finder",
    "find_provider",
    "openai_compatible",
    "provider_named",
    "provider_names",
    "register_provider",
    "registered",
    "unregister_provider",
]

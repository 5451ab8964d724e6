"""Models by name.

- ``offline``: the built-in deterministic model (no key, no network).
- ``scripted:FILE``: a :class:`~infai.llm.fakes.ScriptedModel` replaying the
  replies in a JSON file, a list whose items are a string (a text reply), an
  object with ``content`` and optional ``reasoning`` and ``tool_calls``
  (``[{"id", "name", "arguments"}]``), or ``{"error": ..., "status": ...}``.
  Tests and demos script whole conversations with it.
- ``PROVIDER:MODEL``, for any registered provider
  (:mod:`~infai.llm.provider_registry`: ``openai:gpt-4.1``,
  ``anthropic:claude-sonnet-4-5``, ``ollama:qwen2.5-coder:14b``,
  ``openrouter:...``, an installed plugin's): the model through that
  provider, with its defaults (key variable, endpoint, context window).
- any other name: a model from configuration (``[models.NAME]``), passed in as
  ``configured``.

A name that is none of these is a clear error listing what is available, never
a silent fallback. The SDKs are imported only when such a model is built.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .local import OfflineModel, Reply, ScriptedModel
from .messages import Message, Model, ProviderError, ToolCall
from .provider_registry import find_provider, provider_named, registered
from .providers import ModelSpec, ModelUnavailable


def _reply(item: Any, where: str) -> Reply:
    if isinstance(item, str):
        return item
    if not isinstance(item, dict):
        raise ModelUnavailable(f"{where}: a reply must be a string or an object")
    if "error" in item:
        return ProviderError(str(item["error"]), item.get("status"), bool(item.get("retryable")))
    calls = tuple(
        ToolCall(str(c["id"]), str(c["name"]), dict(c.get("arguments", {})))
        for c in item.get("tool_calls", [])
    )
    return Message(
        role="assistant",
        content=str(item.get("content", "")),
        reasoning=item.get("reasoning"),
        tool_calls=calls,
    )


def load_script(path: Path) -> list[Reply]:
    """The replies in a script file (see the module docstring)."""
    try:
        items = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"cannot read model script {path}: {exc}") from None
    if not isinstance(items, list):
        raise ModelUnavailable(f"{path}: a model script is a JSON list of replies")
    try:
        return [_reply(item, f"{path}: reply {i + 1}") for i, item in enumerate(items)]
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelUnavailable(f"{path}: malformed reply: {exc}") from None


def spec_for(name: str, configured: Mapping[str, ModelSpec] | None = None) -> ModelSpec | None:
    """The SDK model spec ``name`` stands for, or None for a built-in model."""
    if configured and name in configured:
        return configured[name]
    provider, sep, model = name.partition(":")
    info = find_provider(provider) if sep and provider != "scripted" else None
    if info is not None:
        if not model:
            raise ModelUnavailable(f"model name {name!r} lacks the model after '{provider}:'")
        return ModelSpec(
            provider=provider, model=model, context_window=info.context_window, name=name
        )
    return None


def build_model(name: str, configured: Mapping[str, ModelSpec] | None = None) -> Model:
    """The model called ``name``; raises :class:`ModelUnavailable` saying why not."""
    if name == "offline":  # always the built-in: a configuration cannot redefine it
        return OfflineModel()
    if name.startswith("scripted:"):
        path = Path(name.removeprefix("scripted:"))
        return ScriptedModel(load_script(path), name=name)
    spec = spec_for(name, configured)
    if spec is None:
        names = ", ".join(sorted(configured or ())) or "none"
        providers = ", ".join(sorted(registered()))
        raise ModelUnavailable(
            f"unknown model {name!r}: use 'offline', 'scripted:FILE', 'PROVIDER:MODEL' "
            f"(providers: {providers}) or a configured name (configured: {names})"
        )
    return build_spec(spec)


def build_spec(spec: ModelSpec) -> Model:
    """A model for ``spec``, built by its provider's registration (which imports
    the SDK it needs only now)."""
    return provider_named(spec.provider).model(spec)

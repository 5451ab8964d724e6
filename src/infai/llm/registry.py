"""Models by name.

- ``offline``: the built-in deterministic model (no key, no network).
- ``scripted:FILE``: a :class:`~infai.llm.fakes.ScriptedModel` replaying the
  replies in a JSON file, a list whose items are a string (a text reply), an
  object with ``content`` and optional ``reasoning`` and ``tool_calls``
  (``[{"id", "name", "arguments"}]``), or ``{"error": ..., "status": ...}``.
  Tests and demos script whole conversations with it.

Named providers (``openai:…``, ``anthropic:…``) and models from configuration
are not available yet; asking for one is a clear error, not a silent fallback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .fakes import OfflineModel, Reply, ScriptedModel
from .messages import Message, Model, ProviderError, ToolCall


class UnknownModel(ValueError):
    """No model by that name can be built here."""


def _reply(item: Any, where: str) -> Reply:
    if isinstance(item, str):
        return item
    if not isinstance(item, dict):
        raise UnknownModel(f"{where}: a reply must be a string or an object")
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
        raise UnknownModel(f"cannot read model script {path}: {exc}") from None
    if not isinstance(items, list):
        raise UnknownModel(f"{path}: a model script is a JSON list of replies")
    try:
        return [_reply(item, f"{path}: reply {i + 1}") for i, item in enumerate(items)]
    except (KeyError, TypeError, ValueError) as exc:
        raise UnknownModel(f"{path}: malformed reply: {exc}") from None


def build_model(name: str) -> Model:
    """The model called ``name``; raises :class:`UnknownModel` with what is available."""
    if name == "offline":
        return OfflineModel()
    if name.startswith("scripted:"):
        path = Path(name.removeprefix("scripted:"))
        return ScriptedModel(load_script(path), name=name)
    raise UnknownModel(
        f"unknown model {name!r}: available are 'offline' and 'scripted:FILE' "
        "(the openai and anthropic providers are not built yet)"
    )

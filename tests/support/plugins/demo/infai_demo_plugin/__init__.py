"""A demonstration infai plugin: a tool, a provider, a context rule, a hook handler."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from infai.llm import FunctionModel, Model, ProviderInfo, Request
from infai.tools import tool

# the test reads this file to learn when the plugin was imported (loaded only when used)
_MARK = os.environ.get("DEMO_PLUGIN_IMPORTED")
if _MARK:
    with open(_MARK, "a") as mark:
        mark.write(f"imported by {os.getpid()}\n")


@tool(reads=("path",))
def shout(path: Path, times: int = 1) -> str:
    """Read a file and say it loudly.

    Args:
        path: the file to read
        times: how often to repeat it
    """
    return " ".join([path.read_text().strip().upper()] * times)


def _demo_model(spec: Any) -> Model:
    def answer(request: Request) -> str:
        last = request.messages[-1].content if request.messages else ""
        return f"demo model {spec.model} heard: {last}"

    return FunctionModel(answer, name=spec.display_name, context_window=spec.context_window)


provider = ProviderInfo("demo", _demo_model, key_env=None, context_window=32_000)


class _Note:
    """A context rule: a user message marked PRIVATE reaches the model as a note."""

    name = "demo-note"

    def apply(self, parts: Any) -> Iterator[Any]:
        """Shorten each user message that says PRIVATE; leave the rest alone."""
        for part in parts:
            if part.kind == "message" and part.event.role == "user" and "PRIVATE" in part.text:
                yield part.shorten("[a private note, left out by demo-note]", "marked PRIVATE")


context_rule = _Note()


def guard(payload: dict[str, Any]) -> dict[str, Any] | None:
    """A PreToolUse hook handler: no shouting at secrets."""
    if "secret" in str(payload.get("tool_input", {}).get("path", "")):
        return {"decision": "block", "reason": "the demo guard keeps secrets quiet"}
    return None

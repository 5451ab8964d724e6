"""The tool protocol, the toolbox the loop draws from, and the permission seam."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from infai.llm import ToolSpec


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where a tool runs: the session's working directory and its id, and (while a
    call runs) the id of the stored ``tool_call`` event that asked for it."""

    working_dir: Path
    session_id: str
    call_event_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool hands back to the model (``is_error``: it failed or was refused)."""

    content: str
    is_error: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


class Tool(Protocol):
    """A tool: a spec the model sees, and the code that runs it."""

    @property
    def spec(self) -> ToolSpec:
        """The name, description and JSON schema of arguments the model is shown."""

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """Run one call whose permission was already decided; report failure as an
        error output, and keep blocking work off the event loop."""


@dataclass(frozen=True, slots=True)
class Decision:
    """A permission decision: ``allow`` or ``deny``, who made it, and why."""

    verdict: Literal["allow", "deny"]
    by: str
    reason: str = ""

    @property
    def allowed(self) -> bool:
        """Whether the call may run."""
        return self.verdict == "allow"


class Permissions(Protocol):
    """Decides whether a tool call may run (asking the user if the policy says so)."""

    async def decide(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> Decision:
        """The decision for one call, before it runs; may wait for a person to answer."""


class AllowAll:
    """Allows every call: for tests and for tools with no side effects."""

    async def decide(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> Decision:
        """Allow, without looking at the call."""
        return Decision("allow", by="allow-all")


class Toolbox:
    """The tools offered to a model, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Offer ``tool``; a second tool of the same name is a ValueError (a programming error)."""
        name = tool.spec.name
        if name in self._tools:
            raise ValueError(f"two tools are named {name!r}")
        self._tools[name] = tool

    def get(self, name: str) -> Tool | None:
        """The tool the model named, or None (the loop answers an unknown tool as an error)."""
        return self._tools.get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Every tool's spec in the order added (what a request offers the model)."""
        return tuple(tool.spec for tool in self._tools.values())

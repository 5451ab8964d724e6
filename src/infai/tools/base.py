"""The tool protocol, the toolbox the loop draws from, and the permission seam."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from infai.llm import ToolSpec

from .paths import Resolved, resolve

#: may this file be read or named? (a POSIX path relative to the working directory,
#: absolute outside it; see :func:`~infai.tools.paths.relative_name`)
Readable = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where a tool runs: the session's working directory and its id, and (while a
    call runs) the id of the stored ``tool_call`` event that asked for it.

    ``readable`` is the read policy the searching tools apply to every file they
    would read or name (``None``: all may be); the permission policy supplies it.
    ``reads_denied``: some read rule denies a path, so a file with several hard
    links may be a denied file under another name: the searches leave such
    files out (the read policy judges names, and a link's other names are not
    known without a walk of the whole disk).
    :meth:`resolve` resolves a path once per call: the policy that checks a path
    and the tool that then uses it share that one resolution.
    """

    working_dir: Path
    session_id: str
    call_event_id: str | None = None
    readable: Readable | None = None
    reads_denied: bool = False
    #: the read deny rules' patterns: the files they name are hidden from sandboxed
    #: commands too (:mod:`~infai.tools.read_denied`)
    denied_reads: tuple[str, ...] = ()
    _resolved: dict[str, Resolved] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def resolve(self, given: str) -> Resolved:
        """``given`` resolved against the working directory (see
        :func:`~infai.tools.paths.resolve`), the same answer every time it is asked
        during one call (a context with a ``call_event_id``): what the policy
        checked is what the tool acts on, whatever changes on disk in between."""
        if self.call_event_id is None:
            return resolve(self.working_dir, given)
        found = self._resolved.get(given)
        if found is None:
            found = self._resolved[given] = resolve(self.working_dir, given)
        return found

    def may_read(self, name: str) -> bool:
        """Whether ``readable`` lets the file named ``name`` be read or named."""
        return self.readable is None or self.readable(name)


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

    def denial(self) -> str:
        """What the model is told of a denied call, each part said once: the user's
        own reason as it stands (``denied by the user: not now``), else who denied
        it and why (``permission denied by rule '…'``)."""
        if self.by == "user":
            return self.reason or "denied by the user"
        why = f": {self.reason}" if self.reason else ""
        return f"permission denied by {self.by}{why}"


class Permissions(Protocol):
    """Decides whether a tool call may run (asking the user if the policy says so)."""

    async def decide(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> Decision:
        """The decision for one call, before it runs; may wait for a person to answer."""


class AllowAll:
    """Allows every call: for tests and for tools with no side effects."""

    async def decide(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> Decision:
        """Allow, without looking at the call."""
        return Decision("allow", by="allow-all")


class ToolSource(Protocol):
    """Tools that come and go while a session runs (an MCP server's): the toolbox
    asks for the current ones each time, and lets the source get ready once per
    model request (connect, restart), saying what it could not do."""

    def tools(self) -> list[Tool]:
        """The tools available now (a server that is down offers none)."""

    async def prepare(self) -> list[str]:
        """Get the tools ready for the next request; one-line notices of what failed."""


class Toolbox:
    """The tools offered to a model, by name: its own, then those of attached
    sources (a source's tool whose name is taken is left out)."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._sources: list[ToolSource] = []
        self._told: set[str] = set()
        for tool in tools:
            self.add(tool)

    def attach(self, source: ToolSource) -> None:
        """Offer ``source``'s tools too, as they are at each request."""
        self._sources.append(source)

    async def prepare(self) -> list[str]:
        """Let every attached source get ready (before a request is built); their
        notices, and one for each source tool left out because its name is taken."""
        notices = [notice for source in self._sources for notice in await source.prepare()]
        seen = set(self._tools)
        for source in self._sources:
            for tool in source.tools():
                name = tool.spec.name
                if name in seen and name not in self._told:
                    notices.append(f"tool {name!r} left out: another tool has that name")
                    self._told.add(name)  # said once
                seen.add(name)
        return notices

    def _all(self) -> dict[str, Tool]:
        if not self._sources:
            return self._tools
        found = dict(self._tools)
        for source in self._sources:
            for tool in source.tools():
                found.setdefault(tool.spec.name, tool)
        return found

    def add(self, tool: Tool) -> None:
        """Offer ``tool``; a second tool of the same name is a ValueError (a programming error)."""
        name = tool.spec.name
        if name in self._tools:
            raise ValueError(f"two tools are named {name!r}")
        self._tools[name] = tool

    def get(self, name: str) -> Tool | None:
        """The tool the model named, or None (the loop answers an unknown tool as an error)."""
        return self._all().get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Every tool's spec in the order added (what a request offers the model)."""
        return tuple(tool.spec for tool in self._all().values())

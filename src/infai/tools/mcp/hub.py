"""The MCP servers of one working directory, as a source of tools for the toolbox.

:class:`McpHub` holds a :class:`~.connection.Connection` per configured
server and offers every usable tool of every server that is up as an
:class:`McpTool` named ``mcp__SERVER__TOOL``. Before each model request the
toolbox calls :meth:`McpHub.prepare`: servers not started yet (or down, and
due for another try) are started side by side, each within its
``startup_timeout``; one that fails gives a one-line notice and offers no
tools this time, and the others go on. A tool the server lists with a schema
infai cannot use (:func:`~.adapt.schema_problem`), or whose name another of
its tools already took once made safe, is left out with a notice, said once
per start; the server's other tools stay. A server that said its tool list
changed (:attr:`~.connection.Connection.changed`) is listed again in that
same :meth:`~McpHub.prepare`, so the request offers what it offers now: a new
tool is there, a removed one is gone, and a call to a tool it no longer
offers (the model saw it before the change) is an error output, never sent.

A call goes to the server on the event loop, within its ``call_timeout``;
every failure is an error output, never an exception: a timeout (the SDK
then sends ``notifications/cancelled``, and the server stops the work), an
error the server answered, a connection that closed (the server is marked
down and started again by the next call, :data:`~.connection.MAX_STARTS`
starts in all). Permission is not decided here: the loop asks the policy
before :meth:`McpTool.run`, like for every tool; :meth:`McpHub.default_allow`
is what the policy consults for a server configured ``trust_read_only``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types
from mcp import MCPError

from infai.llm import ToolSpec

from ..base import Tool, ToolContext, ToolOutput
from ..sandbox import Sandbox
from ..seccomp import filter_program
from .adapt import schema_problem, to_output
from .config import ServerConfig, tool_name
from .connection import MAX_STARTS, Connection, StartFailed

#: the longest tool description passed on to the model
MAX_DESCRIPTION = 2000


@dataclass(frozen=True)
class McpTool:
    """One tool of one server, as infai offers it (a :class:`~infai.tools.base.Tool`)."""

    spec: ToolSpec
    server: str
    #: the tool's own name on its server
    remote: str
    read_only: bool
    hub: McpHub

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """Call the tool on its server (permission was decided before)."""
        return await self.hub.call(self.server, self.remote, arguments)


@dataclass(frozen=True)
class Listing:
    """What a server's tools came to: the usable ones, and why the others are not."""

    tools: tuple[McpTool, ...]
    unavailable: tuple[tuple[str, str], ...]


class McpHub:
    """Every configured MCP server of one working directory (the module docstring).

    Create it anywhere; it starts nothing until :meth:`prepare` (or a call)
    runs on an event loop, and :meth:`aclose` must run on that same loop.
    """

    def __init__(self, servers: Sequence[ServerConfig], sandbox: Sandbox, working_dir: Path):
        self.servers = {server.name: server for server in servers}
        self.sandbox = sandbox
        self.working_dir = working_dir
        self._connections = {
            s.name: Connection(s, sandbox, working_dir, self._seccomp_file)
            for s in servers
            if s.enabled
        }
        self._listings: dict[str, Listing] = {}
        self._seccomp_dir: str | None = None

    # -- the tool source ---------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The usable tools of every server that is up."""
        found: list[Tool] = []
        for name, conn in self._connections.items():
            if conn.state == "ready" and name in self._listings:
                found += self._listings[name].tools
        return found

    async def prepare(self, only: str | None = None) -> list[str]:
        """Start what is due to start (side by side; ``only``: that server alone);
        notices of what failed, of tools left out (once per start), and of a
        server whose lost listen stream was given up on (once: :mod:`.connection`)."""
        mine = [c for c in self._connections.values() if only in (None, c.config.name)]
        due = [c for c in mine if not c.ready and c.may_start()]
        changed = [c for c in mine if c.changed and c.ready]
        results = await asyncio.gather(
            *(self._start(c) for c in due), *(self._relist(c) for c in changed)
        )
        notices = [notice for found in results for notice in found]
        for conn in mine:  # said once: a listen stream given up on
            notices += conn.notices
            conn.notices = []
        for conn in due:
            if conn.state != "ready" and conn.starts >= MAX_STARTS:
                notices.append(
                    f"mcp: server {conn.config.name!r} given up after {conn.starts} starts; "
                    "`infai mcp ls` shows why"
                )
        return notices

    async def _start(self, conn: Connection) -> list[str]:
        name = conn.config.name
        try:
            await conn.start()
        except StartFailed as exc:
            return [f"mcp: server {name!r} is unavailable this turn: {exc}"]
        listing = self._listings[name] = self._adapt(conn)
        return [
            f"mcp: tool {tool!r} of server {name!r} is unavailable: {why}"
            for tool, why in listing.unavailable
        ]

    async def _relist(self, conn: Connection) -> list[str]:
        """List a server's changed tools again; notices of tools newly left out, or
        of why the listing failed (the server is then started again when due)."""
        name = conn.config.name
        try:
            if not await conn.relist():
                return []
        except Exception as exc:  # closed, refused, timed out: start it afresh
            conn.mark_down(f"listing its changed tools failed: {exc}")
            return [f"mcp: server {name!r} changed its tools but did not list them: {exc}"]
        before = self._listings.get(name)
        said = set(before.unavailable) if before else set()
        listing = self._listings[name] = self._adapt(conn)
        return [
            f"mcp: tool {tool!r} of server {name!r} is unavailable: {why}"
            for tool, why in listing.unavailable
            if (tool, why) not in said
        ]

    def _adapt(self, conn: Connection) -> Listing:
        """The server's listed tools as infai tools (the module docstring)."""
        config = conn.config
        usable: list[McpTool] = []
        unavailable: list[tuple[str, str]] = []
        taken: dict[str, str] = {}
        for tool in conn.listed:
            if not config.offers(tool.name):
                continue
            if why := schema_problem(tool.input_schema):
                unavailable.append((tool.name, why))
                continue
            name = tool_name(config.name, tool.name)
            if name in taken:
                unavailable.append((tool.name, f"its name becomes {name!r}, as {taken[name]!r}'s"))
                continue
            taken[name] = tool.name
            description = (tool.description or tool.title or tool.name)[:MAX_DESCRIPTION]
            hints = tool.annotations
            usable.append(
                McpTool(
                    ToolSpec(name, description, dict(tool.input_schema)),
                    config.name,
                    tool.name,
                    bool(hints is not None and hints.read_only_hint),
                    self,
                )
            )
        return Listing(tuple(usable), tuple(unavailable))

    # -- calls ---------------------------------------------------------------------------

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        """Call ``tool`` of ``server``: its result, or an error output saying what failed.

        An HTTP server that answers that it no longer knows the client's session
        (it restarted, or expired it) has not run the call: the session is opened
        afresh and the call sent once more. Any other failure is not repeated.
        """
        conn = self._connections.get(server)
        if conn is None:
            return ToolOutput(f"MCP server {server!r} is not configured or not enabled", True)
        for _ in range(2):
            if not conn.ready and (refused := await self._restart(conn)):
                return refused
            if (gone := self._not_offered(server, tool)) is not None:
                return gone
            try:
                result = await conn.call(tool, arguments)
            except MCPError as exc:
                if conn.config.url is not None and _session_gone(exc):
                    conn.mark_down(f"the server ended the session ({exc.message})")
                    continue
                return self._failed(conn, tool, exc)
            except (StartFailed, OSError, ConnectionError) as exc:
                conn.mark_down(f"the connection failed: {exc}")
                return ToolOutput(self._down(server, tool, str(exc)), True)
            except Exception as exc:  # a malformed answer, a transport's own error
                conn.mark_down(f"{type(exc).__name__}: {exc}")
                return ToolOutput(self._down(server, tool, f"{type(exc).__name__}: {exc}"), True)
            return to_output(result, server, tool)
        return ToolOutput(f"MCP server {server!r} ended a new session at once; not retried", True)

    def _not_offered(self, server: str, tool: str) -> ToolOutput | None:
        """An error output if ``server``'s current tools do not include ``tool`` (it
        was removed since the model was offered it, or was never usable)."""
        listing = self._listings.get(server)
        if listing is None or any(t.remote == tool for t in listing.tools):
            return None
        return ToolOutput(
            f"MCP server {server!r} does not offer the tool {tool!r} now (its tool list "
            "changed, or the tool is unavailable); the call was not sent",
            True,
        )

    async def _restart(self, conn: Connection) -> ToolOutput | None:
        """Start a server that is down for a call; an error output if it cannot be."""
        server = conn.config.name
        if conn.starts >= MAX_STARTS:
            why = f"given up after {conn.starts} starts: {conn.problem}"
            return ToolOutput(f"MCP server {server!r} is unavailable ({why})", True)
        notices = await self._start(conn)
        if conn.ready:
            return None
        return ToolOutput(notices[0] if notices else f"{server!r} did not start", True)

    def _failed(self, conn: Connection, tool: str, exc: MCPError) -> ToolOutput:
        server = conn.config.name
        if exc.code == mcp_types.REQUEST_TIMEOUT:
            return ToolOutput(
                f"MCP tool {tool!r} of server {server!r} gave no answer within "
                f"{conn.config.call_timeout:g}s (call_timeout); the call was cancelled",
                True,
            )
        if exc.code == mcp_types.CONNECTION_CLOSED:
            conn.mark_down("the server closed the connection during a call")
            return ToolOutput(self._down(server, tool, "the server closed the connection"), True)
        return ToolOutput(
            f"MCP server {server!r} refused the call of {tool!r}: {exc.message}", True
        )

    @staticmethod
    def _down(server: str, tool: str, why: str) -> str:
        return (
            f"MCP tool {tool!r} of server {server!r} failed: {why}; the server will be "
            "started again on the next call"
        )

    # -- policy and listing ------------------------------------------------------------

    def default_allow(self, name: str) -> str | None:
        """Why the policy may allow ``name`` by default (None: it may not): a tool its
        server marks read-only, of a server configured ``trust_read_only``."""
        for tool in self.tools():
            if (
                isinstance(tool, McpTool)
                and tool.spec.name == name
                and tool.read_only
                and self.servers[tool.server].trust_read_only
            ):
                return f"server {tool.server!r} marks it read-only, and you trust that"
        return None

    def status(self) -> list[dict[str, Any]]:
        """Each configured server: its state, its tools, and why any are unavailable."""
        rows = []
        for name, server in self.servers.items():
            conn = self._connections.get(name)
            listing = self._listings.get(name)
            row: dict[str, Any] = {
                "name": name,
                "transport": server.transport,
                "target": server.url or " ".join([server.command or "", *server.args]),
                "source": str(server.source) if server.source else None,
                "state": "disabled" if conn is None else conn.state,
                "problem": conn.problem if conn is not None else "enabled = false",
                "confined": conn.confined if conn is not None else None,
                "starts": conn.starts if conn is not None else 0,
                # a 2026-07-28 stream brings its tool-list changes (older: unasked)
                "listening": conn.listening if conn is not None else False,
                "tools": [
                    {"name": t.spec.name, "remote": t.remote, "read_only": t.read_only}
                    for t in (listing.tools if listing else ())
                ],
                "unavailable": [
                    {"remote": tool, "why": why}
                    for tool, why in (listing.unavailable if listing else ())
                ],
            }
            rows.append(row)
        return rows

    def tool(self, server: str, tool: str) -> McpTool | None:
        """The usable tool ``tool`` (its own name, or the name infai gives it) of ``server``."""
        listing = self._listings.get(server)
        for found in listing.tools if listing else ():
            if tool in (found.remote, found.spec.name):
                return found
        return None

    # -- lifetime ----------------------------------------------------------------------

    def _seccomp_file(self) -> Path | None:
        """The seccomp program as a file only infai's user can read (written once)."""
        program = filter_program()
        if program is None:
            return None
        if self._seccomp_dir is None:
            self._seccomp_dir = tempfile.mkdtemp(prefix="infai-mcp-")
        path = Path(self._seccomp_dir) / "seccomp.bpf"
        if not path.exists():
            path.write_bytes(program)
        return path

    async def aclose(self) -> None:
        """Stop every server (on the loop that started them)."""
        await asyncio.gather(*(c.stop() for c in self._connections.values()))
        if self._seccomp_dir is not None:
            with contextlib.suppress(OSError):
                for entry in os.listdir(self._seccomp_dir):
                    os.unlink(os.path.join(self._seccomp_dir, entry))
                os.rmdir(self._seccomp_dir)
            self._seccomp_dir = None


def _session_gone(exc: MCPError) -> bool:
    """Whether an HTTP server's error says it does not know the client's session (HTTP
    404 on a request carrying a session id: "Session not found"/"Session terminated")."""
    text = exc.message.lower()
    return (
        exc.code == mcp_types.INVALID_REQUEST
        and "session" in text
        and ("not found" in text or "terminated" in text or "expired" in text)
    )


__all__ = ["McpHub", "McpTool"]

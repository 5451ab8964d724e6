"""Real MCP servers for the tests, written with the SDK's own server API (``MCPServer``).

Run as a program: ``python mcp_servers.py stdio LOG`` serves over stdin/stdout;
``python mcp_servers.py http LOG PORTFILE [HEADER=VALUE]`` serves streamable
HTTP on 127.0.0.1 at a free port, which it writes to PORTFILE once listening
(with a required header, requests without it are refused). Every tool call
is appended to LOG (``call NAME ARGS``), and a call cancelled by the client
appends ``cancelled NAME``: the tests read the server's own log to see what
reached it. ``python mcp_servers.py fail`` says something on stderr and exits.

``python mcp_servers.py growing LOG`` (or ``http-growing LOG PORTFILE``, over
streamable HTTP) serves a server whose tools change: it
logs ``list`` for every ``tools/list`` it answers, and its tool ``grow`` adds
a tool ``fresh``, removes ``echo`` and says its tool list changed, the way
the connection's protocol does it (a plain notification on a handshake-era
connection, an event on ``subscriptions/listen`` streams on a 2026-07-28 one).
``dropping`` (``http-dropping``) is that server, which also logs ``listen``
for every ``subscriptions/listen`` request and has a tool ``drop`` that ends
every open listen stream while the connection stays up (``how="error"``: the
request is answered with an error, an abrupt drop; ``how="close"``: the
server's graceful close; ``how="exit"``: the server exits instead).
``flapping`` (``http-flapping``) is the same, but it ends each listen stream
with an error right after acknowledging it (a server that keeps dropping).
With ``MCP_TEST_STARTS`` set, every stdio server appends a line to that file
when it starts (how many server processes a test started).
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and sys.argv[1:2] == ["fail"]:  # before the slow imports
    escape = "\x1b[2J\x1b]0;owned\x07" if sys.argv[2:3] == ["esc"] else ""
    print(f"fatal: {escape}cannot reach the database", file=sys.stderr)
    sys.exit(2)

import json
import os
import socket
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

BIG = 1024 * 1024


def build(log: Path) -> MCPServer:
    server = MCPServer("infai-test")

    def note(line: str) -> None:
        with log.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    @server.tool(description="Say the text back.")
    def echo(text: str) -> str:
        note(f"call echo {json.dumps({'text': text})}")
        return f"echo: {text}"

    @server.tool(description="Count things.", annotations=ToolAnnotations(read_only_hint=True))
    def count(n: int) -> dict[str, Any]:
        note(f"call count {n}")
        return {"count": n, "twice": 2 * n}

    @server.tool(description="A megabyte of text.")
    def big() -> str:
        note("call big")
        return "x" * BIG

    @server.tool(description="Never answers.")
    async def hang() -> str:
        note("call hang")
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            note("cancelled hang")
            raise
        return "woke"

    @server.tool(description="Starts a daemon of its own, in a session of its own.")
    def spawn() -> str:
        import subprocess

        daemon = subprocess.Popen(["sleep", "120"], start_new_session=True)
        note(f"call spawn {daemon.pid}")
        return "spawned"

    @server.tool(description="Exits while answering.")
    def die() -> str:
        note("call die")
        os._exit(3)

    @server.tool(description="Writes a file.")
    def write(path: str) -> str:
        note(f"call write {path}")
        Path(path).write_text("written by an MCP server\n")
        return f"wrote {path}"

    @server.tool(name="weird.name!", description="A name providers refuse.")
    def weird() -> str:
        return "weird"

    @server.tool(description="Its schema is made unusable below.")
    def broken(x: int) -> str:
        return "never"

    tool = server._tool_manager.get_tool("broken")  # a schema no client could use
    assert tool is not None
    tool.parameters = {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}
    return server


def build_growing(log: Path, drops: str = "") -> MCPServer:
    """A server whose tool ``grow`` changes its tools (``drops``: "dropping" or
    "flapping", its listen streams can be ended; the module docstring)."""
    from mcp_types import SubscriptionsListenRequestParams
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    def note(line: str) -> None:
        with log.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    class Listing(MCPServer):
        async def list_tools(self) -> Any:
            note("list")
            return await super().list_tools()

    server = Listing("infai-test-growing")

    @server.tool(description="Say the text back.")
    def echo(text: str) -> str:
        note(f"call echo {json.dumps({'text': text})}")
        return f"echo: {text}"

    def fresh(n: int) -> str:
        note(f"call fresh {n}")
        return f"fresh: {n}"

    @server.tool(description="Adds 'fresh', removes 'echo', says the tool list changed.")
    async def grow(ctx: Context) -> str:
        note("call grow")
        server.add_tool(fresh, description="A tool added while the session runs.")
        server.remove_tool("echo")
        if ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await ctx.notify_tools_changed()
        else:
            await ctx.session.send_tool_list_changed()
        return "grown"

    if not drops:
        return server
    inner = server._lowlevel_server._request_handlers["subscriptions/listen"].handler
    listen = Dropper(inner, drops == "flapping", note)
    server._lowlevel_server.add_request_handler(
        "subscriptions/listen", SubscriptionsListenRequestParams, listen
    )

    @server.tool(description="Ends every open listen stream (how: 'error', 'close' or 'exit').")
    def drop(how: str = "error") -> str:
        note(f"call drop {how}")
        if how == "exit":  # the whole connection ends
            os._exit(3)
        listen.drop(how)
        return "dropped"

    return server


class Dropper:
    """The server's own ``subscriptions/listen`` handler, wrapped so that a stream can
    be ended while the connection stays up: ``drop("error")`` answers each open
    listen request with an error (the client sees the stream lost), ``drop("close")``
    closes them the server's graceful way; ``always``: each stream is answered with
    an error as soon as its acknowledgment is sent."""

    def __init__(self, inner: Any, always: bool, note: Any) -> None:
        self.inner, self.always, self.note = inner, always, note
        self.open: set[anyio.Event] = set()

    def drop(self, how: str) -> None:
        if how == "close":
            self.inner.close()
            return
        for stream in self.open:
            stream.set()

    async def __call__(self, ctx: Any, params: Any) -> Any:
        import dataclasses

        from mcp import MCPError
        from mcp_types import INTERNAL_ERROR

        self.note("listen")
        stop = anyio.Event()
        if self.always:
            ctx = dataclasses.replace(ctx, session=_ThenSet(ctx.session, stop))
        self.open.add(stop)
        result: Any = None
        try:
            async with anyio.create_task_group() as group:

                async def serve() -> None:
                    nonlocal result
                    result = await self.inner(ctx, params)
                    group.cancel_scope.cancel()

                group.start_soon(serve)
                await stop.wait()
                group.cancel_scope.cancel()
        finally:
            self.open.discard(stop)
        if result is not None:
            return result
        raise MCPError(INTERNAL_ERROR, "the test server dropped the stream")


class _ThenSet:
    """A server session whose first notification sent (a listen stream's
    acknowledgment) then sets ``event``."""

    def __init__(self, session: Any, event: anyio.Event) -> None:
        self._session, self._event = session, event

    async def send_notification(self, *args: Any, **kwargs: Any) -> None:
        await self._session.send_notification(*args, **kwargs)
        self._event.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


async def serve_http(server: MCPServer, portfile: Path, header: str | None) -> None:
    import uvicorn

    app: Any = server.streamable_http_app()
    if header:
        name, _, value = header.partition("=")
        inner = app

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                got = dict(scope["headers"]).get(name.lower().encode())
                if got != value.encode():
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b"no"})
                    return
            await inner(scope, receive, send)

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart on the same port
    sock.bind(("127.0.0.1", int(os.environ.get("MCP_TEST_PORT", "0"))))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    portfile.write_text(str(sock.getsockname()[1]))
    await http.serve(sockets=[sock])


def main(argv: list[str]) -> None:
    kind = argv[1]
    if starts := os.environ.get("MCP_TEST_STARTS"):
        with open(starts, "a", encoding="utf-8") as handle:
            handle.write(f"start {os.getpid()}\n")
    family = kind.removeprefix("http-")
    if family in ("growing", "dropping", "flapping"):
        server = build_growing(Path(argv[2]), "" if family == "growing" else family)
    else:
        server = build(Path(argv[2]))
    if kind in ("stdio", "growing", "dropping", "flapping"):
        server.run("stdio")
    else:
        anyio.run(serve_http, server, Path(argv[3]), argv[4] if len(argv) > 4 else None)


if __name__ == "__main__":
    main(sys.argv)


# -- for the tests: configurations and a running HTTP server -------------------------------

SCRIPT = Path(__file__).resolve()


def stdio_server(name: str, log: Path, **settings: Any) -> Any:
    """The ServerConfig of this module's stdio server, logging to ``log``."""
    from infai.tools.mcp import ServerConfig

    return ServerConfig(
        name, command=sys.executable, args=(str(SCRIPT), "stdio", str(log)), **settings
    )


def growing_server(name: str, log: Path, kind: str = "growing", **settings: Any) -> Any:
    """The ServerConfig of this module's server whose tools change (``growing``; or
    ``dropping``/``flapping``, whose listen streams end: the module docstring)."""
    from infai.tools.mcp import ServerConfig

    return ServerConfig(
        name, command=sys.executable, args=(str(SCRIPT), kind, str(log)), **settings
    )


class HttpServer:
    """This module's streamable-HTTP server in a subprocess (``start``/``stop``; the
    port stays the same across a restart, so a client's session can be dropped)."""

    def __init__(
        self, log: Path, portfile: Path, header: str | None = None, kind: str = "http"
    ) -> None:
        self.log, self.portfile, self.header, self.kind = log, portfile, header, kind
        self.port = 0
        self.process: Any = None

    def start(self, timeout: float = 60.0) -> HttpServer:
        import subprocess
        import time

        self.portfile.unlink(missing_ok=True)
        argv = [sys.executable, str(SCRIPT), self.kind, str(self.log), str(self.portfile)]
        env = {**os.environ, "MCP_TEST_PORT": str(self.port)}
        self.process = subprocess.Popen([*argv, *([self.header] if self.header else [])], env=env)
        deadline = time.monotonic() + timeout
        while not (self.portfile.exists() and self.portfile.read_text()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the MCP HTTP server did not start")
            time.sleep(0.05)
        self.port = int(self.portfile.read_text())
        while True:  # listening once a connection is accepted
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

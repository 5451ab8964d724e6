"""One MCP server's connection: started, listed, called, restarted, stopped.

The SDK's client is a context manager whose task groups must be entered and
left by one task, so each connection is held open by a task of its own
(:meth:`Connection._hold`) on the event loop that first needs it; calls are
made from the loop's other tasks over the client it holds, and never block
the loop. Stopping sets an event the holding task waits on; it then leaves
the client, which for a stdio server closes its stdin and, if it lingers,
kills its process group (the SDK's shutdown), bounded in time.

A stdio server is started inside the sandbox (:meth:`~infai.tools.sandbox.Sandbox.launch_argv`):
bubblewrap, in PID and other namespaces of its own, with ``--die-with-parent``
(if infai is killed, even by SIGKILL, the kernel kills bubblewrap and so the
whole namespace: no server outlives infai), the environment scrubbed as for
shell commands plus the server's own ``env``, and no network unless its
config says ``network = true``. The SDK starts a program without passing it
descriptors, so the seccomp program reaches bubblewrap through a file the hub
writes once: ``/bin/sh`` opens it as descriptor 3, then execs bubblewrap.
What the server writes to stderr goes to a file of the connection's own, whose
last line is the notice when it fails to start.

Health: a call that fails because the connection closed (the server exited,
the HTTP server went away) marks the connection down; the next call starts it
again, a new process or a new client with a new HTTP session (never the old
session id), at most :data:`MAX_STARTS` times in all (an HTTP server that
answers it no longer knows the session is reconnected at once, by the hub).
Before a call, a connection whose dispatcher has already seen the end of its
stream counts as down (read from the SDK's dispatcher; where that is not
there, the call after the failing one restarts it).

A changing tool list: a server may say its tools changed
(``notifications/tools/list_changed``). The SDK hands every server
notification to the client's ``message_handler``; on a handshake-era
connection the server sends it unasked, while on a 2026-07-28 connection it
sends it only on a ``subscriptions/listen`` stream, which the holding task
opens (asking for tool-list changes only) before the connection counts as
started, and keeps open. Either way :attr:`Connection.changed` is set, and
the hub lists the tools again (:meth:`Connection.relist`, past the SDK's
response cache) before the next model request.

A listen stream that ends while the connection is up (the server dropped it,
answered it with an error, or closed it gracefully) is opened again by the
watcher task, after a pause that starts at :data:`LISTEN_RETRY` and doubles
with each reopening within :data:`LISTEN_WINDOW` (at most
:data:`LISTEN_RETRY_MAX`); once reopened, the tools are listed again once,
since the SDK replays nothing that was missed while it was down. A server
that needs more than :data:`LISTEN_REOPENS` reopenings within that window is
given up on: one notice says its changes are no longer followed, and the
tools are listed once more; its calls go on. The watcher stops, without a
notice, when the connection itself ends (the restart opens a stream of its
own) or is stopped (the session ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO, cast

import httpx2
import mcp_types
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.caching import CacheMode
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..offload import off_loop
from ..sandbox import Sandbox, SandboxUnavailable
from .config import MissingVariable, ServerConfig, expand_all

# The SDK logs what it does about a failing server (a session it could not end, a
# process it had to kill); infai says what matters in its own notices, and no
# library's log line may reach a terminal the TUI draws on.
logging.getLogger("mcp").addHandler(logging.NullHandler())

#: starts of one server in a hub's life (the first and the restarts)
MAX_STARTS = 4
#: a server that failed to start is not tried again sooner than this (seconds)
RETRY_AFTER = 10.0
#: how long stopping a connection may take before its task is abandoned
STOP_TIMEOUT = 10.0
#: descriptor number at which a sandboxed server's bubblewrap finds the seccomp program
SECCOMP_FD = 3
#: how many tool-list pages are read at most (a server paging forever ends here)
MAX_PAGES = 50
#: how long a server may take to acknowledge the tool-change subscription (seconds)
LISTEN_TIMEOUT = 10.0
#: the pause before a lost listen stream is first opened again (seconds; it doubles)
LISTEN_RETRY = 0.5
#: the longest pause before a lost listen stream is opened again (seconds)
LISTEN_RETRY_MAX = 30.0
#: reopenings of a lost listen stream allowed within LISTEN_WINDOW; one more gives up
LISTEN_REOPENS = 5
#: the period in which LISTEN_REOPENS are counted (seconds)
LISTEN_WINDOW = 300.0

#: the clock and the pause of reopening a listen stream (seams: tests drive them)
retry_clock: Callable[[], float] = time.monotonic
retry_pause: Callable[[float], Awaitable[None]] = asyncio.sleep

SeccompFile = Callable[[], Path | None]


class StartFailed(Exception):
    """A server could not be started or listed (the message says why, in one line)."""


class Connection:
    """A server's client, the tools it listed, and whether it is up."""

    def __init__(
        self, config: ServerConfig, sandbox: Sandbox, root: Path, seccomp: SeccompFile
    ) -> None:
        self.config = config
        self.sandbox = sandbox
        self.root = root
        self._seccomp = seccomp
        self.client: Client | None = None
        self.listed: list[mcp_types.Tool] = []
        #: "stopped" (not started yet), "ready", "down" (failed or exited)
        self.state = "stopped"
        self.problem = ""
        self.starts = 0
        self.failed_at = 0.0
        self.confined: bool | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._errlog: TextIO | None = None
        self._http: httpx2.AsyncClient | None = None
        #: the server said its tools changed since they were last listed
        self.changed = False
        #: whether a ``subscriptions/listen`` stream delivers that (2026-07-28)
        self.listening = False
        #: said once each, at the hub's next :meth:`~.hub.McpHub.prepare`
        self.notices: list[str] = []

    # -- state -------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether calls can be made now (started, and its stream not seen to end)."""
        if self.state != "ready" or self.client is None:
            return False
        dispatcher = getattr(self.client.session, "_dispatcher", None)
        if getattr(dispatcher, "_closed", False):
            self.state, self.problem = "down", "the server closed the connection"
            return False
        return True

    def may_start(self, now: float | None = None) -> bool:
        """Whether a start may be tried now (within the budget, not right after a failure)."""
        if self.starts >= MAX_STARTS:
            return False
        now = time.monotonic() if now is None else now
        return self.state == "stopped" or now - self.failed_at >= RETRY_AFTER or self.starts == 0

    # -- starting ----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the server (stopping what is left of an earlier start) and list its
        tools, within ``startup_timeout``; raises :class:`StartFailed`."""
        async with self._lock:
            if self.ready:  # another task started it while this one waited
                return
            await self._stop_task()
            self.starts += 1
            try:
                await self._start()
            except StartFailed as exc:
                self.state, self.problem, self.failed_at = "down", str(exc), time.monotonic()
                await self._stop_task()
                raise
            self.state, self.problem = "ready", ""

    async def _start(self) -> None:
        listed: asyncio.Future[list[mcp_types.Tool]] = asyncio.get_running_loop().create_future()
        listed.add_done_callback(_seen)  # a failure after the timeout has no one waiting
        self._stop = asyncio.Event()
        try:  # off the loop: probing bwrap, reading git's config, loading certificates
            client = await off_loop(self._client)
        except StartFailed:
            raise
        except (MissingVariable, SandboxUnavailable, OSError, ValueError) as exc:
            raise StartFailed(str(exc)) from None
        http, self._http = self._http, None  # this start's own, closed by its task
        self._task = asyncio.create_task(self._hold(client, listed, http))
        try:
            self.listed = await asyncio.wait_for(
                asyncio.shield(listed), self.config.startup_timeout
            )
        except TimeoutError:
            raise StartFailed(
                f"no answer within {self.config.startup_timeout:g}s (startup_timeout)"
                + self._stderr_tail()
            ) from None
        except Exception as exc:
            raise StartFailed(_one_line(exc) + self._stderr_tail()) from None
        self.client = client

    async def _hold(
        self,
        client: Client,
        listed: asyncio.Future[list[mcp_types.Tool]],
        http: httpx2.AsyncClient | None,
    ) -> None:
        """Enter the client, list its tools, and keep it open until stopped; then
        close the HTTP client it was given (the SDK leaves a given one open)."""
        try:
            async with client:
                self.changed = False
                tools = await _list(client)
                watcher = await self._listen(client)
                if not listed.done():
                    listed.set_result(tools)
                try:
                    await self._stop.wait()
                finally:
                    if watcher is not None:
                        watcher.cancel()
                        await asyncio.wait([watcher])
        except BaseException as exc:
            if not listed.done():
                listed.set_exception(
                    exc if isinstance(exc, Exception) else StartFailed("stopped while starting")
                )
            if not isinstance(exc, Exception):
                raise
        finally:
            if self.client is client:
                self.client = None
            if http is not None:
                with contextlib.suppress(Exception):
                    await http.aclose()
            if self.state == "ready":
                self.state, self.problem = "down", "the connection ended"

    async def _listen(self, client: Client) -> asyncio.Task[None] | None:
        """On a 2026-07-28 connection, subscribe to tool-list changes and follow
        them (a task that keeps the stream open, :meth:`_follow`), once the first
        stream is open; None where there is no such stream (an older protocol:
        the notification comes unasked), the server does not declare
        ``tools.listChanged``, or it refuses the first (then its changes go unseen
        until a restart)."""
        self.listening = False
        if client.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        declared = client.session.server_capabilities
        tools = declared.tools if declared is not None else None
        if tools is None or not tools.list_changed:
            return None  # it never says: no subscription to wait for at start
        opened: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        follower = asyncio.create_task(self._follow(client, opened))
        try:
            if await asyncio.shield(opened):
                return follower
        except BaseException:
            follower.cancel()
            raise
        await asyncio.wait([follower])
        return None

    async def _follow(self, client: Client, opened: asyncio.Future[bool]) -> None:
        """Hold a listen stream open for as long as the connection is: open it (saying
        whether in ``opened``), read it to its end, and open it again after a pause
        (the module docstring); until given up, or the connection ends."""
        stop = self._stop
        try:
            first = await self._stream(client, opened)
        finally:
            if not opened.done():
                opened.set_result(False)
        if not first:
            return
        reopened: deque[float] = deque()  # when, within the window
        while _alive(client, stop):
            now = retry_clock()
            while reopened and now - reopened[0] >= LISTEN_WINDOW:
                reopened.popleft()
            if len(reopened) >= LISTEN_REOPENS:
                self._give_up()
                return
            reopened.append(now)
            await retry_pause(min(LISTEN_RETRY_MAX, LISTEN_RETRY * 2 ** (len(reopened) - 1)))
            if _alive(client, stop):
                await self._stream(client, None)

    async def _stream(self, client: Client, opened: asyncio.Future[bool] | None) -> bool:
        """Open one listen stream and note each change it delivers, until it ends;
        whether it opened. ``opened``: the first stream, whose opening is said there;
        None: a stream opened again, after which the tools are listed once."""
        was_open = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                async with asyncio.timeout(LISTEN_TIMEOUT):
                    subscription = await stack.enter_async_context(
                        client.listen(tools_list_changed=True)
                    )
                if not subscription.honored.tools_list_changed:
                    return False
                self.listening = was_open = True
                if opened is None:
                    self.changed = True  # what it said while the stream was down is lost
                else:
                    opened.set_result(True)
                try:
                    async for _ in subscription:
                        self.changed = True
                finally:
                    self.listening = False
        except Exception:  # refused, no acknowledgment in time, or SubscriptionLost
            pass
        return was_open

    def _give_up(self) -> None:
        """Stop following a server that keeps losing its listen stream: say so once, and
        list its tools once more (a change may have come while it was down)."""
        self.changed = True
        self.notices.append(
            f"mcp: server {self.config.name!r} lost its tool-change stream "
            f"{LISTEN_REOPENS + 1} times within {LISTEN_WINDOW:g}s; its tool list is no "
            "longer followed until it restarts"
        )

    async def _on_message(self, message: Any) -> None:
        """The SDK's ``message_handler``: every server notification (and transport
        error) arrives here; a tool-list change is noted for the hub."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.changed = True

    async def relist(self) -> bool:
        """List the tools again if the server said they changed (False: nothing to
        do, or another task just did it); raises the SDK's errors and StartFailed."""
        async with self._lock:
            client = self.client
            if not self.changed or not self.ready or client is None:
                return False
            self.changed = False  # a change while listing is listed again next time
            try:
                async with asyncio.timeout(self.config.startup_timeout):
                    self.listed = await _list(client, refresh=True)
            except TimeoutError:
                raise StartFailed(
                    f"no answer within {self.config.startup_timeout:g}s (startup_timeout)"
                ) from None
            return True

    def _client(self) -> Client:
        """The SDK client for this server (not entered yet)."""
        config = self.config
        info = mcp_types.Implementation(name="infai", version="0.1.0")
        if config.url is not None:
            headers = expand_all("header", config.headers)
            self._http = create_mcp_http_client(headers=headers)  # handed to _hold
            transport = streamable_http_client(config.url, http_client=self._http)
            return Client(transport, client_info=info, message_handler=self._on_message)
        env = expand_all("env", config.env)
        where = config.working_dir(self.root)
        if not where.is_dir():
            raise StartFailed(f"cwd {where} is not a directory")
        assert config.command is not None
        launch = self.sandbox.launch_argv(
            [config.command, *config.args],
            where,
            network=config.network,
            seccomp_fd=SECCOMP_FD,
        )
        self.confined = launch.confined
        argv = launch.argv
        if launch.confined and SECCOMP_FD in _fds_named(argv):
            program = self._seccomp()
            if program is not None:
                opener = 'exec 3<"$0" || exit 126; exec "$@"'
                argv = ["/bin/sh", "-c", opener, str(program), *argv]
        self._errlog = _fresh_log(self._errlog)
        params = StdioServerParameters(
            command=argv[0], args=argv[1:], env={**launch.env, **env}, cwd=where
        )
        return Client(
            stdio_client(params, errlog=self._errlog),
            client_info=info,
            message_handler=self._on_message,
        )

    def _stderr_tail(self) -> str:
        """``": <the server's last line on stderr>"`` ("" when it said nothing)."""
        if self._errlog is None:
            return ""
        try:
            self._errlog.seek(0)
            lines = [line.strip() for line in self._errlog.read()[-4096:].splitlines()]
        except (OSError, ValueError):
            return ""
        said = [line for line in lines if line]
        return f" (it said: {said[-1][:300]})" if said else ""

    # -- calling and stopping ----------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call ``tool``; raises the SDK's errors (the hub turns them into outputs)."""
        client = self.client
        if client is None:
            raise StartFailed(self.problem or "not started")
        return await client.call_tool(
            tool, arguments, read_timeout_seconds=self.config.call_timeout
        )

    def mark_down(self, why: str) -> None:
        """Note that the connection failed; the next call starts it again."""
        self.state, self.problem, self.failed_at = "down", why, 0.0

    async def stop(self) -> None:
        """Stop the server (bounded in time) and forget its client."""
        async with self._lock:
            was = self.state
            await self._stop_task()
            if was == "ready":
                self.state, self.problem = "stopped", ""
            if self._errlog is not None:
                self._errlog.close()
                self._errlog = None

    async def _stop_task(self) -> None:
        """End the holding task: asked to stop if it got the client open, else (still
        starting, perhaps hung) cancelled at once; either way the SDK's shutdown runs."""
        task, self._task = self._task, None
        opened, self.client = self.client is not None, None
        if task is None:
            return
        self._stop.set()
        if not opened:
            task.cancel()
        done, _ = await asyncio.wait([task], timeout=STOP_TIMEOUT)
        if not done:
            task.cancel()
            await _quietly(asyncio.wait([task], timeout=STOP_TIMEOUT))
        elif not task.cancelled():
            task.exception()  # seen: a failure here was already reported


async def _list(client: Client, refresh: bool = False) -> list[mcp_types.Tool]:
    """Every tool the server lists, page by page (``refresh``: never from the SDK's
    response cache, which may hold the list from before a change)."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    mode: CacheMode = "refresh" if refresh else "use"
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode=mode)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _alive(client: Client, stop: asyncio.Event) -> bool:
    """Whether ``client``'s connection is still up and not being stopped (read from
    the SDK's dispatcher, as :attr:`Connection.ready` does)."""
    dispatcher = getattr(client.session, "_dispatcher", None)
    return not stop.is_set() and not getattr(dispatcher, "_closed", False)


def _seen(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def _quietly(work: Awaitable[Any]) -> None:
    with contextlib.suppress(Exception):
        await work


def _fds_named(argv: list[str]) -> set[int]:
    """Descriptor numbers bubblewrap's ``--seccomp`` flags name in ``argv``."""
    return {
        int(argv[i + 1])
        for i, word in enumerate(argv[:-1])
        if word == "--seccomp" and argv[i + 1].isdigit()
    }


def _fresh_log(old: TextIO | None) -> TextIO:
    if old is not None:
        old.close()
    return cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))


def _one_line(exc: BaseException) -> str:
    """An exception as one line (an exception group: its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
        return "it closed the connection while starting (exited?)"
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, OSError | ConnectionError) or "connect" in type(exc).__name__.lower():
        return f"cannot connect: {text}"
    return text[:300]


__all__ = ["MAX_STARTS", "Connection", "StartFailed"]

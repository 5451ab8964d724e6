"""The MCP hub against real servers (the SDK's own server API, real subprocesses).

Each test starts what it needs: a stdio server (inside the sandbox where
bubblewrap works) or a streamable-HTTP server on 127.0.0.1. What reached a
server is read from its own log file.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from infai.tools import Sandbox
from infai.tools.mcp import McpHub, ServerConfig
from infai.tools.sandbox import probe
from mcp_servers import SCRIPT, HttpServer, stdio_server


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def run(hub: McpHub, work: Any) -> Any:
    async def go() -> Any:
        try:
            return await work()
        finally:
            await hub.aclose()

    return asyncio.run(go())


def test_tools_are_listed_named_and_called_and_bad_servers_or_schemas_lose_only_themselves(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    failing = ServerConfig("bad", command=sys.executable, args=(str(SCRIPT), "fail"))
    missing = ServerConfig("gone", command=str(tmp_path / "no-such-program"))
    mute = ServerConfig("mute", command="sleep", args=("30",), startup_timeout=1.0)
    hub = McpHub([failing, stdio_server("t", log), missing, mute], Sandbox(), tmp_path)

    async def work() -> Any:
        notices = await hub.prepare()
        names = sorted(tool.spec.name for tool in hub.tools())
        echo = await hub.call("t", "echo", {"text": "hello"})
        count = await hub.call("t", "count", {"n": 4})
        big = await hub.call("t", "big", {})
        return notices, names, echo, count, big

    notices, names, echo, count, big = run(hub, work)
    # a server that cannot start says why in one line; the others go on
    bad, gone = (next(n for n in notices if f"'{s}'" in n) for s in ("bad", "gone"))
    assert bad.startswith("mcp: server 'bad' is unavailable this turn: ")
    assert "\n" not in bad and "fatal: cannot reach the database" in bad
    assert gone.startswith("mcp: server 'gone' is unavailable this turn: ")
    # one that never answers at all is given up on after its startup_timeout
    said = "mcp: server 'mute' is unavailable this turn: no answer within 1s (startup_timeout)"
    assert said in notices
    states = {row["name"]: row["state"] for row in hub.status()}
    assert states == {"bad": "down", "gone": "down", "t": "stopped", "mute": "down"}
    # the tool with an unresolvable $ref is out, with a notice naming it and why
    assert [n for n in notices if "'t'" in n] == [
        "mcp: tool 'broken' of server 't' is unavailable: its input schema refers to "
        "'#/$defs/missing', which is not in it"
    ]
    assert "mcp__t__broken" not in names
    # the others are there; a name providers refuse is made safe
    assert names == sorted(
        f"mcp__t__{n}"
        for n in ("echo", "count", "big", "hang", "spawn", "die", "write", "weird_name_")
    )
    assert echo.content == "echo: hello" and not echo.is_error
    assert count.metadata["structured"] == {"count": 4, "twice": 8}
    assert big.content == "x" * 1024 * 1024  # a megabyte arrives whole
    assert "structured" not in big.metadata  # too large to keep twice
    assert calls(log) == ['call echo {"text": "hello"}', "call count 4", "call big"]
    row = next(r for r in hub.status() if r["name"] == "t")
    why = "its input schema refers to '#/$defs/missing', which is not in it"
    assert row["unavailable"] == [{"remote": "broken", "why": why}]


def test_a_call_that_never_answers_times_out_and_is_cancelled_on_the_server(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    hub = McpHub([stdio_server("t", log, call_timeout=1.0)], Sandbox(), tmp_path)

    async def work() -> Any:
        await asyncio.gather(hub.prepare(), hub.prepare())  # two sessions' requests at once
        assert hub.status()[0]["starts"] == 1
        hung = await hub.call("t", "hang", {})
        for _ in range(200):  # the server notes the cancellation when it arrives
            if "cancelled hang" in calls(log):
                break
            await asyncio.sleep(0.05)
        # a call cancelled by infai (Ctrl-C, a turn cancelled) is cancelled there too
        task = asyncio.create_task(hub.call("t", "hang", {}))
        for _ in range(1200):
            if calls(log).count("call hang") == 2:
                break
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(200):
            if calls(log).count("cancelled hang") == 2:
                break
            await asyncio.sleep(0.05)
        after = await hub.call("t", "echo", {"text": "still here"})
        return hung, after

    hung, after = run(hub, work)
    assert hung.is_error and "gave no answer within 1s" in hung.content
    # notifications/cancelled reached the server, after the timeout and the cancel
    assert calls(log).count("cancelled hang") == 2
    assert after.content == "echo: still here"  # the same server goes on


def test_a_server_that_exits_mid_call_is_an_error_and_restarts_on_the_next_call(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    hub = McpHub([stdio_server("t", log)], Sandbox(), tmp_path)

    async def work() -> Any:
        await hub.prepare()
        died = await hub.call("t", "die", {})
        tools_after = [t.spec.name for t in hub.tools()]
        again = await hub.call("t", "echo", {"text": "back"})
        return died, tools_after, again

    died, tools_after, again = run(hub, work)
    assert died.is_error and "started again on the next call" in died.content
    assert tools_after == []  # down: offered to no request until it is back
    assert again.content == "echo: back"
    assert calls(log) == ["call die", 'call echo {"text": "back"}']


needs_bwrap = pytest.mark.skipif(not probe().ok, reason="bubblewrap cannot run here")


@needs_bwrap
def test_the_sandbox_stops_a_stdio_server_writing_outside_the_working_dir(
    tmp_path: Path,
) -> None:
    work_dir = tmp_path / "work"
    (work_dir / ".git").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    hub = McpHub([stdio_server("t", work_dir / "log")], Sandbox(), work_dir)

    async def work() -> Any:
        await hub.prepare()
        inside = await hub.call("t", "write", {"path": str(work_dir / "in.txt")})
        out = await hub.call("t", "write", {"path": str(outside)})
        git = await hub.call("t", "write", {"path": str(work_dir / ".git" / "config")})
        return inside, out, git, hub.status()[0]["confined"]

    inside, _, git, confined = run(hub, work)
    assert confined is True
    assert not inside.is_error and (work_dir / "in.txt").exists()
    # outside the working directory nothing lands (/tmp is the sandbox's own, here)
    assert not outside.exists()
    assert git.is_error  # the server says no more than that it failed
    assert not (work_dir / ".git" / "config").exists()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_http_server_with_a_header_from_the_environment_and_a_dropped_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """``auto`` negotiates the session-less 2026 protocol with this server;
    ``legacy`` holds a session (``Mcp-Session-Id``) the restarted server no
    longer knows: the client must open a new one, never resend the old id."""
    import functools

    import mcp

    import infai.tools.mcp.connection as connection

    monkeypatch.setattr(connection, "Client", functools.partial(mcp.Client, mode=mode))
    log = tmp_path / "log"
    server = HttpServer(log, tmp_path / "port", "Authorization=Bearer s3cret").start()
    monkeypatch.setenv("TEST_MCP_TOKEN", "s3cret")
    config = ServerConfig(
        "web", url=server.url, headers={"Authorization": "Bearer ${TEST_MCP_TOKEN}"}
    )
    hub = McpHub([config], Sandbox(), tmp_path)

    async def work() -> Any:
        assert await hub.prepare() == [
            "mcp: tool 'broken' of server 'web' is unavailable: its input schema refers "
            "to '#/$defs/missing', which is not in it"
        ]
        first = await hub.call("web", "echo", {"text": "one"})
        await asyncio.to_thread(server.stop)
        await asyncio.to_thread(server.start)  # same port, no sessions: the old one is gone
        dropped = await hub.call("web", "echo", {"text": "two"})
        again = await hub.call("web", "echo", {"text": "three"})
        return first, dropped, again

    try:
        first, dropped, again = run(hub, work)
    finally:
        server.stop()
    assert first.content == "echo: one"
    # the restarted server knows nothing of the client; the call still arrives (once)
    assert dropped.content == "echo: two"
    assert again.content == "echo: three"
    assert calls(log) == [f'call echo {{"text": "{n}"}}' for n in ("one", "two", "three")]

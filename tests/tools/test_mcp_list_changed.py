"""A server whose tools change mid-session: the hub follows ``notifications/tools/list_changed``.

The server is a real stdio subprocess (tests/support/mcp_servers.py,
``growing``), or the same over streamable HTTP on 127.0.0.1, whose tool
``grow`` adds ``fresh``, removes ``echo`` and says so.
It logs every ``tools/list`` it answers, so the tests see that the hub lists
again after the notification, and only then. Both protocol eras are covered:
``auto`` negotiates 2026-07-28 with this server (the change arrives on a
``subscriptions/listen`` stream), ``legacy`` forces the handshake (it arrives
unasked).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp
import pytest

from infai.tools import Sandbox, Toolbox, ToolContext
from infai.tools.mcp import McpHub, ServerConfig
from mcp_servers import HttpServer, growing_server

#: how long a loaded machine may take to deliver the notification (seconds)
PATIENCE = 60.0


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def names(box: Toolbox) -> set[str]:
    return {spec.name for spec in box.specs() if spec.name.startswith("mcp__")}


async def until(box: Toolbox, condition: Any) -> list[str]:
    """Prepare requests, as the loop does, until ``condition(box)`` holds (the
    notification arrives on its own time); the notices of the last prepare."""
    deadline = time.monotonic() + PATIENCE
    while True:
        notices = await box.prepare()
        if condition(box):
            return notices
        if time.monotonic() > deadline:
            raise AssertionError(f"no change seen within {PATIENCE}s: {sorted(names(box))}")
        await asyncio.sleep(0.02)


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerConfig]:
    """The growing server over stdio (a sandboxed subprocess) or streamable HTTP."""
    log = tmp_path / "log"
    if request.param == "stdio":
        yield growing_server("g", log)
        return
    http = HttpServer(log, tmp_path / "port", kind="http-growing").start()
    try:
        yield ServerConfig("g", url=http.url)
    finally:
        http.stop()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_changed_tool_list_is_listed_again_before_the_next_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, server: ServerConfig
) -> None:
    import infai.tools.mcp.connection as connection

    monkeypatch.setattr(connection, "Client", functools.partial(mcp.Client, mode=mode))
    log = tmp_path / "log"
    hub = McpHub([server], Sandbox(), tmp_path)
    box = Toolbox()
    box.attach(hub)
    context = ToolContext(tmp_path, "s1")

    async def work() -> Any:
        try:
            await box.prepare()
            before = names(box)
            old_echo = box.get("mcp__g__echo")
            assert old_echo is not None
            # nothing changed: preparing again lists nothing again
            await box.prepare()
            await box.prepare()
            lists_before = lines(log).count("list")
            # a 2026-07-28 connection holds a subscriptions/listen stream open
            assert hub.status()[0]["listening"] is (mode == "auto")
            grown = await hub.call("g", "grow", {})
            notices = await until(box, lambda b: "mcp__g__fresh" in names(b))
            after = names(box)
            fresh = box.get("mcp__g__fresh")
            assert fresh is not None
            called = await fresh.run({"n": 7}, context)
            # the model saw echo before the change: calling it now is an error output
            stale = await old_echo.run({"text": "late"}, context)
            again = await hub.call("g", "echo", {"text": "late"})
            lists_after = lines(log).count("list")
            await box.prepare()  # the change was listed once; nothing more to do
            return (before, lists_before, grown, notices, after, called, stale, again, lists_after)
        finally:
            await hub.aclose()

    before, lists_before, grown, notices, after, called, stale, again, lists_after = asyncio.run(
        work()
    )
    assert before == {"mcp__g__echo", "mcp__g__grow"}
    assert lists_before == 1  # the start's listing only
    assert grown.content == "grown" and not grown.is_error
    assert notices == []
    # the new tool is offered, the removed one is not
    assert after == {"mcp__g__grow", "mcp__g__fresh"}
    assert called.content == "fresh: 7" and not called.is_error
    for output in (stale, again):
        assert output.is_error
        assert output.content == (
            "MCP server 'g' does not offer the tool 'echo' now (its tool list changed, "
            "or the tool is unavailable); the call was not sent"
        )
    assert lists_after == 2 and lines(log).count("list") == 2  # once more, for the change
    # the removed tool's calls never reached the server
    assert lines(log) == ["list", "call grow", "list", "call fresh 7"]

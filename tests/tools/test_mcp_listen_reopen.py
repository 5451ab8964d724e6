"""A lost ``subscriptions/listen`` stream is opened again, within bounds.

The servers are real (tests/support/mcp_servers.py): ``dropping`` ends its open
listen streams when its tool ``drop`` is called (answered with an error, or
closed gracefully, or by exiting), ``flapping`` ends each one right after
acknowledging it. Both log every ``tools/list`` and ``subscriptions/listen``
they answer. The pause between reopenings and the clock that counts them are
the connection's seams (``retry_pause``, ``retry_clock``), driven here: no test
waits out a real backoff. What the model would be offered is what
``Toolbox.prepare`` leaves in ``Toolbox.specs``, as before each request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import infai.tools.mcp.connection as connection
from infai.tools import Sandbox, Toolbox
from infai.tools.mcp import McpHub, ServerConfig
from infai.tools.mcp.connection import LISTEN_REOPENS, LISTEN_RETRY, LISTEN_WINDOW
from mcp_servers import HttpServer, growing_server

#: how long a loaded machine may take for what is waited on (seconds)
PATIENCE = 60.0

GIVEN_UP = (
    f"mcp: server 'g' lost its tool-change stream {LISTEN_REOPENS + 1} times within "
    f"{LISTEN_WINDOW:g}s; its tool list is no longer followed until it restarts"
)


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def names(box: Toolbox) -> set[str]:
    return {spec.name for spec in box.specs() if spec.name.startswith("mcp__")}


async def until(condition: Callable[[], bool], box: Toolbox | None = None) -> list[str]:
    """Wait for ``condition`` (preparing requests meanwhile, as the loop does, when
    given ``box``); every notice those prepares gave."""
    deadline = time.monotonic() + PATIENCE
    said: list[str] = []
    while True:
        if box is not None:
            said += await box.prepare()
        if condition():
            return said
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {PATIENCE}s")
        await asyncio.sleep(0.02)


class Pauses:
    """The connection's reopening pauses, recorded and driven: each advances the
    fake clock by what it asked for (``step``: by that instead), and waits for
    ``gate`` when one is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, step: float | None = None) -> None:
        self.asked: list[float] = []
        self.now = 1000.0
        self.step = step
        self.gate: asyncio.Event | None = None
        monkeypatch.setattr(connection, "retry_pause", self.pause)
        monkeypatch.setattr(connection, "retry_clock", lambda: self.now)

    async def pause(self, seconds: float) -> None:
        self.asked.append(seconds)
        self.now += seconds if self.step is None else self.step
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(0)


def serve(kind: str, transport: str, tmp_path: Path) -> Iterator[ServerConfig]:
    """The server ``kind`` over stdio (a sandboxed subprocess) or streamable HTTP."""
    log = tmp_path / "log"
    if transport == "stdio":
        yield growing_server("g", log, kind=kind)
        return
    http = HttpServer(log, tmp_path / "port", kind=f"http-{kind}").start()
    try:
        yield ServerConfig("g", url=http.url)
    finally:
        http.stop()


@pytest.fixture(params=["stdio", "http"])
def dropping(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerConfig]:
    yield from serve("dropping", request.param, tmp_path)


@pytest.fixture(params=["stdio", "http"])
def flapping(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerConfig]:
    yield from serve("flapping", request.param, tmp_path)


def run(server: ServerConfig, tmp_path: Path, work: Any) -> Any:
    """``work(hub, box, log)`` on a fresh hub and toolbox; the hub closed after."""
    hub = McpHub([server], Sandbox(), tmp_path)
    box = Toolbox()
    box.attach(hub)

    async def go() -> Any:
        try:
            return await work(hub, box, tmp_path / "log")
        finally:
            await hub.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("how", ["error", "close"])
def test_a_dropped_stream_is_opened_again_and_a_later_change_reaches_the_next_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dropping: ServerConfig, how: str
) -> None:
    pauses = Pauses(monkeypatch)

    async def work(hub: McpHub, box: Toolbox, log: Path) -> Any:
        assert await box.prepare() == []
        before = names(box)
        assert hub.status()[0]["listening"] is True
        dropped = await hub.call("g", "drop", {"how": how})
        # opened again, and (what it said meanwhile is lost) listed again once
        said = await until(lambda: lines(log).count("list") == 2, box)
        assert lines(log).count("listen") == 2
        assert hub.status()[0]["listening"] is True
        await hub.call("g", "grow", {})
        said += await until(lambda: "mcp__g__fresh" in names(box), box)
        return before, dropped, said, names(box)

    before, dropped, said, after = run(dropping, tmp_path, work)
    assert before == {"mcp__g__echo", "mcp__g__grow", "mcp__g__drop"}
    assert dropped.content == "dropped" and not dropped.is_error
    assert said == []
    # the change after the reopening is offered to the next request
    assert after == {"mcp__g__grow", "mcp__g__drop", "mcp__g__fresh"}
    assert pauses.asked == [LISTEN_RETRY]
    assert lines(tmp_path / "log") == [
        "list",
        "listen",
        f"call drop {how}",
        "listen",
        "list",  # once after reopening
        "call grow",
        "list",  # for the change the new stream said
    ]


def test_a_change_made_while_the_stream_was_down_is_listed_once_it_is_open_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dropping: ServerConfig
) -> None:
    pauses = Pauses(monkeypatch)
    pauses.gate = asyncio.Event()

    async def work(hub: McpHub, box: Toolbox, log: Path) -> Any:
        await box.prepare()
        await hub.call("g", "drop", {})
        await until(lambda: pauses.asked == [LISTEN_RETRY])  # lost, not open yet
        await box.prepare()
        grown = await hub.call("g", "grow", {})  # heard by no stream
        assert grown.content == "grown"
        await box.prepare()
        while_down = names(box)
        assert pauses.gate is not None
        pauses.gate.set()
        said = await until(lambda: "mcp__g__fresh" in names(box), box)
        return while_down, said, names(box)

    while_down, said, after = run(dropping, tmp_path, work)
    assert while_down == {"mcp__g__echo", "mcp__g__grow", "mcp__g__drop"}
    assert said == []
    assert after == {"mcp__g__grow", "mcp__g__drop", "mcp__g__fresh"}
    assert lines(tmp_path / "log") == [
        "list",
        "listen",
        "call drop error",
        "call grow",
        "listen",
        "list",  # once after reopening: the change it missed
    ]


def test_a_server_that_keeps_dropping_is_given_up_on_once_without_spinning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flapping: ServerConfig
) -> None:
    pauses = Pauses(monkeypatch)  # no pause really waits: only the count bounds it

    async def work(hub: McpHub, box: Toolbox, log: Path) -> Any:
        await box.prepare()
        said: list[str] = []
        deadline = time.monotonic() + PATIENCE
        while GIVEN_UP not in said:
            said += await box.prepare()
            assert time.monotonic() < deadline, f"not given up within {PATIENCE}s"
            await asyncio.sleep(0.02)
        for _ in range(3):
            said += await box.prepare()
        echoed = await hub.call("g", "echo", {"text": "still here"})
        return said, echoed, hub.status()[0]

    said, echoed, status = run(flapping, tmp_path, work)
    assert said == [GIVEN_UP]  # said once
    # the pause doubled with each reopening, and after the last allowed one it stopped
    assert pauses.asked == [LISTEN_RETRY * 2**n for n in range(LISTEN_REOPENS)]
    assert lines(tmp_path / "log").count("listen") == 1 + LISTEN_REOPENS
    # the connection itself goes on
    assert echoed.content == "echo: still here" and not echoed.is_error
    assert status["state"] == "ready" and status["listening"] is False


def test_reopenings_are_counted_per_period_and_stop_when_the_session_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # half a window passes at each pause: never more than two reopenings in one
    pauses = Pauses(monkeypatch, step=LISTEN_WINDOW / 2)
    server = growing_server("g", tmp_path / "log", kind="flapping")
    enough = 2 * LISTEN_REOPENS + 2

    async def work(hub: McpHub, box: Toolbox, log: Path) -> Any:
        said = await until(lambda: lines(log).count("listen") >= enough, box)
        await hub.aclose()  # the session ends
        asked = len(pauses.asked)
        for _ in range(50):
            await asyncio.sleep(0)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return said, asked, left

    said, asked, left = run(server, tmp_path, work)
    seen = lines(tmp_path / "log").count("listen")
    assert GIVEN_UP not in said
    assert seen >= enough
    # the backoff follows the reopenings of the last window only
    assert pauses.asked[:3] == [LISTEN_RETRY, 2 * LISTEN_RETRY, 2 * LISTEN_RETRY]
    assert max(pauses.asked) == 2 * LISTEN_RETRY
    # once the hub is closed nothing is left trying: no task, no pause, no listen
    assert left == []
    assert len(pauses.asked) == asked and asked in (seen - 1, seen)


def test_a_connection_that_ends_is_not_reopened_by_its_stream_but_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pauses = Pauses(monkeypatch)
    server = growing_server("g", tmp_path / "log", kind="dropping")

    async def work(hub: McpHub, box: Toolbox, log: Path) -> Any:
        await box.prepare()
        gone = await hub.call("g", "drop", {"how": "exit"})
        # the hub starts it again; the new connection opens a stream of its own
        said = await until(lambda: lines(log).count("listen") == 2, box)
        await until(lambda: hub.status()[0]["listening"] is True)
        return gone, said, hub.status()[0]

    gone, said, status = run(server, tmp_path, work)
    assert gone.is_error
    assert said == []
    assert status["state"] == "ready" and status["starts"] == 2
    assert pauses.asked == []  # the old stream was never tried again
    assert lines(tmp_path / "log") == ["list", "listen", "call drop exit", "list", "listen"]

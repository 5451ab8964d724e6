"""A turn whose model calls an MCP server's tool, assembled by the Harness.

The server is a real stdio subprocess (tests/support/mcp_servers.py); the
policy is the one every tool meets: a denied call never reaches the server
(its own log shows no call), an allowed one is answered, and the decision is
recorded with the result like a built-in tool's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.agent import Config, Harness, Saved, Streamed, TurnEnded
from infai.llm import Message, Model, Notice, ScriptedModel, ToolCall
from infai.store import SessionStore, ToolResultRecord, open_store
from infai.tools import Rule
from mcp_servers import stdio_server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    opened = open_store(str(tmp_path / "home"))
    try:
        yield opened
    finally:
        opened.close()


class Space(Harness):
    """A harness whose every model is the scripted one given."""

    def __init__(self, *args: Any, model: Model, **kwargs: Any) -> None:
        self.given = model
        super().__init__(*args, **kwargs)

    def build_model(self, name: str) -> Model:
        return self.given


def call(name: str, **arguments: Any) -> Message:
    return Message(role="assistant", tool_calls=(ToolCall("c1", name, arguments),))


def turn(space: Harness, replies_done: str = "go") -> list[Any]:
    async def go() -> list[Any]:
        session = await asyncio.to_thread(space.open)
        events = []
        try:
            async for event in session.prompt(replies_done):
                events.append(event)
        finally:
            await session.aclose()
            await space.aclose()
        return events

    return asyncio.run(go())


def results(events: list[Any]) -> list[tuple[ToolResultRecord, str | None]]:
    return [
        (e.event.record, e.event.digest)
        for e in events
        if isinstance(e, Saved) and isinstance(e.event.record, ToolResultRecord)
    ]


def test_an_allowed_mcp_tool_is_called_and_its_result_recorded(
    store: SessionStore, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    model = ScriptedModel([call("mcp__t__echo", text="hi"), "done"])
    config = Config(
        rules=(Rule.parse("allow", "mcp__t__*"),), mcp_servers=(stdio_server("t", log),)
    )
    events = turn(Space(store, tmp_path, config=config, model=model))
    assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "done"
    [(result, _)] = results(events)
    assert result.content == "echo: hi" and not result.is_error
    assert result.metadata["permission"]["by"] == "rule 'allow mcp__t__* *'"
    assert result.metadata["mcp"] == {"server": "t", "tool": "echo"}
    # the model was offered the server's tools, by the names it called
    offered = {spec.name for spec in model.requests[0].tools}
    assert {"mcp__t__echo", "mcp__t__count", "read_file"} <= offered
    assert "mcp__t__broken" not in offered
    # the unusable tool was said once, as a notice of the turn
    said = [
        e.event.message for e in events if isinstance(e, Streamed) and isinstance(e.event, Notice)
    ]
    assert sum("'broken' of server 't' is unavailable" in n for n in said) == 1
    assert log.read_text().splitlines() == ['call echo {"text": "hi"}']


def test_a_denied_mcp_tool_never_reaches_the_server(store: SessionStore, tmp_path: Path) -> None:
    log = tmp_path / "log"
    model = ScriptedModel([call("mcp__t__echo", text="secret"), call("mcp__t__count", n=1), "done"])
    server = stdio_server("t", log)
    config = Config(rules=(Rule.parse("deny", "mcp__t__echo"),), mcp_servers=(server,))
    events = turn(Space(store, tmp_path, config=config, model=model))
    (echo, _), (count, _) = results(events)
    assert echo.is_error and echo.metadata["permission"]["by"] == "rule 'deny mcp__t__echo *'"
    # no rule: an MCP tool asks, and headless nobody can approve
    assert count.is_error and count.metadata["permission"]["verdict"] == "deny"
    assert "asks for approval" in count.metadata["permission"]["reason"]
    assert not log.exists() or log.read_text() == ""  # the server saw no call


def test_a_read_only_tool_is_allowed_only_where_its_server_is_trusted(
    store: SessionStore, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    model = ScriptedModel([call("mcp__t__count", n=2), call("mcp__t__echo", text="x"), "done"])
    server = stdio_server("t", log, trust_read_only=True)
    events = turn(Space(store, tmp_path, config=Config(mcp_servers=(server,)), model=model))
    (count, _), (echo, _) = results(events)
    # count is annotated readOnlyHint by its server: trusted, it runs unasked
    assert not count.is_error and count.metadata["permission"]["by"] == "default"
    assert "read-only" in count.metadata["permission"]["reason"]
    # echo is not: the trust never reaches it
    assert echo.is_error and echo.metadata["permission"]["verdict"] == "deny"
    assert log.read_text().splitlines() == ["call count 2"]


def test_a_megabyte_result_becomes_a_blob(store: SessionStore, tmp_path: Path) -> None:
    model = ScriptedModel([call("mcp__t__big"), "done"])
    config = Config(
        rules=(Rule.parse("allow", "mcp__t__big"),),
        mcp_servers=(stdio_server("t", tmp_path / "log"),),
    )
    events = turn(Space(store, tmp_path, config=config, model=model))
    [(result, digest)] = results(events)
    assert len(result.content) == 1024 * 1024
    assert digest is not None  # stored once, as a blob, like any large tool output


def test_a_server_that_cannot_start_is_a_notice_and_the_turn_goes_on(
    store: SessionStore, tmp_path: Path
) -> None:
    from infai.tools.mcp import ServerConfig

    model = ScriptedModel(["no tools needed"])
    broken = ServerConfig("gone", command=str(tmp_path / "missing-program"))
    events = turn(Space(store, tmp_path, config=Config(mcp_servers=(broken,)), model=model))
    assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "done"
    said = [e.event for e in events if isinstance(e, Streamed) and isinstance(e.event, Notice)]
    assert any("server 'gone' is unavailable this turn" in n.message for n in said)
    assert not any(s.name.startswith("mcp__") for s in model.requests[0].tools)

"""A subagent calls the MCP tools of its working directory, under the parent's policy.

Assembled by the Harness, with a real stdio server (tests/support/mcp_servers.py)
that notes every start in a file of its own: the parent's scripted model calls
``task``, the child's calls ``mcp__t__*``. One scripted model answers both, in
turn: parent, then child, then parent again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.agent import Config, Harness, TurnEnded
from infai.agent.manifest import load_manifest, manifest_of
from infai.llm import Message, Model, ScriptedModel, ToolCall
from infai.store import SessionStore, ToolResultRecord, open_store
from infai.tools import Ask, Reply, Rule
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


def call(name: str, call_id: str = "c1", **arguments: Any) -> Message:
    return Message(role="assistant", tool_calls=(ToolCall(call_id, name, arguments),))


def turn(space: Harness) -> tuple[str, list[Any]]:
    """One parent turn; the session's id and its events."""

    async def go() -> tuple[str, list[Any]]:
        session = await asyncio.to_thread(space.open)
        events = []
        try:
            async for event in session.prompt("delegate"):
                events.append(event)
        finally:
            await session.aclose()
            await space.aclose()
        return session.session_id, events

    return asyncio.run(go())


def child_of(store: SessionStore, parent: str) -> str:
    (child,) = [i.id for i in store.list_sessions() if i.parent_session == parent]
    return child


def results(store: SessionStore, sid: str) -> dict[str, ToolResultRecord]:
    """The session's tool results, by the name of the tool called."""
    with store.open_reader(sid) as reader:
        events = reader.context().events
    return {e.record.name: e.record for e in events if isinstance(e.record, ToolResultRecord)}


def starts(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_subagent_calls_the_directorys_mcp_tool_on_the_parents_server(
    store: SessionStore, tmp_path: Path
) -> None:
    log, started = tmp_path / "log", tmp_path / "starts"
    server = stdio_server("t", log, env={"MCP_TEST_STARTS": str(started)})
    model = ScriptedModel(
        [
            call("mcp__t__echo", "p1", text="from the parent"),  # the parent starts it
            call("task", "t1", prompt="ask the server"),
            call("mcp__t__echo", "k1", text="from the child"),  # the child
            "the server said: echo: from the child",  # the child's answer
            "done",
        ]
    )
    config = Config(rules=(Rule.parse("allow", "mcp__t__echo"),), mcp_servers=(server,))
    sid, events = turn(Space(store, tmp_path, config=config, model=model))
    assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "done"
    # the parent got the child's answer
    task = results(store, sid)["task"]
    assert not task.is_error
    assert task.content == "the server said: echo: from the child"
    child = child_of(store, sid)
    assert task.metadata["child_session"] == child
    # the child's call reached the server, under the parent's rule
    echo = results(store, child)["mcp__t__echo"]
    assert echo.content == "echo: from the child" and not echo.is_error
    assert echo.metadata["permission"]["by"] == "rule 'allow mcp__t__echo *'"
    assert log.read_text().splitlines() == [
        'call echo {"text": "from the parent"}',
        'call echo {"text": "from the child"}',
    ]
    # one server process for both: the child used the parent's hub
    assert len(starts(started)) == 1
    # the child was offered the server's tools, and its manifest says so
    child_request = model.requests[2]
    offered = {spec.name for spec in child_request.tools}
    assert {"mcp__t__echo", "mcp__t__count", "read_file"} <= offered
    assert "task" not in offered
    with store.open_reader(child) as reader:
        replies = [e for e in reader.context().events if manifest_of(e) is not None]
    digest = manifest_of(replies[0])
    assert digest is not None
    objects = getattr(store, "objects", None)
    assert objects is not None
    names = {tool["name"] for tool in load_manifest(objects, digest)}
    assert {"mcp__t__echo", "mcp__t__count"} <= names


def test_a_subagents_mcp_calls_are_decided_as_the_parents_would_be(
    store: SessionStore, tmp_path: Path
) -> None:
    """A denied tool stays denied, a trusted read-only tool runs unasked, and any
    other asks the person, naming the subagent."""
    log, started = tmp_path / "log", tmp_path / "starts"
    server = stdio_server("t", log, trust_read_only=True, env={"MCP_TEST_STARTS": str(started)})
    asks: list[Ask] = []

    async def approver(ask: Ask) -> Reply:
        asks.append(ask)
        return "deny"

    model = ScriptedModel(
        [
            call("task", "t1", prompt="use the server"),
            call("mcp__t__big", "k1"),  # denied by a rule
            call("mcp__t__count", "k2", n=3),  # read-only, trusted: allowed by default
            call("mcp__t__echo", "k3", text="may I"),  # no rule: asks
            "tried",
            "done",
        ]
    )
    config = Config(rules=(Rule.parse("deny", "mcp__t__big"),), mcp_servers=(server,))
    space = Space(store, tmp_path, config=config, model=model, approver=approver)
    sid, events = turn(space)
    assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "done"
    child = results(store, child_of(store, sid))
    assert child["mcp__t__big"].is_error
    assert child["mcp__t__big"].metadata["permission"]["by"] == "rule 'deny mcp__t__big *'"
    count = child["mcp__t__count"]
    assert count.content and not count.is_error
    assert count.metadata["permission"]["by"] == "default"
    assert "read-only" in count.metadata["permission"]["reason"]
    assert child["mcp__t__echo"].is_error
    assert child["mcp__t__echo"].metadata["permission"]["verdict"] == "deny"
    # the one question was the echo's, and it named the subagent
    assert [(a.tool, dict(a.arguments)) for a in asks] == [("mcp__t__echo", {"text": "may I"})]
    assert asks[0].caller.startswith("subagent ")
    # only the allowed call reached the server, started once
    assert log.read_text().splitlines() == ["call count 3"]
    assert len(starts(started)) == 1

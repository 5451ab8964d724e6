"""AgentSession parked between turns (issue 13: the server frees a session's writer).

Parked, the session holds no writer lock and reads through a reader; the next
piece of slot work takes a writer again, which starts from HEAD as another
process left it. A picked event survives parking; a writer that cannot be had
leaves the session parked and usable.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from infai.agent import AgentSession
from infai.llm import ScriptedModel
from infai.store import MessageRecord, Store, StoreOptions, WriterLocked
from infai.tools import AllowAll, Toolbox


def parked_session(home: Path, replies: list[str]) -> tuple[AgentSession, ScriptedModel]:
    store = Store(home, options=StoreOptions(lock_timeout=0))
    sid = store.create_session(working_dir=str(home.parent)).id
    model = ScriptedModel(replies)
    agent = AgentSession(store, sid, model=model, toolbox=Toolbox([]), permissions=AllowAll())
    agent.park_between_turns = True
    agent.park()
    return agent, model


async def turn(agent: AgentSession, text: str) -> None:
    async for _ in agent.prompt(text):
        pass


def test_a_parked_session_frees_the_lock_and_its_next_turn_sees_others_appends(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    agent, model = parked_session(home, ["one", "two"])
    other = Store(home, options=StoreOptions(lock_timeout=0))
    try:
        asyncio.run(turn(agent, "first"))
        assert agent.parked and agent.view.count == 2
        with other.open_writer(agent.session_id) as writer:  # no wait: the lock is free
            writer.append(MessageRecord(content="appended elsewhere"), "user")
        asyncio.run(turn(agent, "second"))
        sent = [m.content for m in model.requests[-1].messages]
        assert sent == ["first", "one", "appended elsewhere", "second"]
        assert agent.parked
        assert [e.preview for e in agent.view.path()] == [
            "first", "one", "appended elsewhere", "second", "two",
        ]  # fmt: skip
    finally:
        agent.close()
        other.close()


def test_a_picked_event_survives_parking_and_a_locked_writer_leaves_it_parked(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    agent, _ = parked_session(home, ["one", "two"])
    other = Store(home, options=StoreOptions(lock_timeout=0))
    try:
        asyncio.run(turn(agent, "first"))
        first = agent.view.path()[0].id
        agent.select(first)
        assert agent.pending_parent == first and agent.parked
        with other.open_writer(agent.session_id), pytest.raises(WriterLocked):
            asyncio.run(turn(agent, "refused"))  # someone else is writing
        assert agent.parked and agent.busy is None and agent.pending_parent == first
        asyncio.run(turn(agent, "instead"))
        branch = agent.view.path()
        assert [e.preview for e in branch] == ["first", "instead", "two"]
        assert branch[1].parent_id == first
    finally:
        agent.close()
        other.close()
    closed = Store(home, options=StoreOptions(lock_timeout=0))
    with closed.open_writer(agent.session_id) as writer:  # closing released everything
        assert writer.count == 4  # the refused prompt was never stored
    closed.close()

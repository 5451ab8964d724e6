"""One session, one event stream, one turn slot.

Every append the session makes reaches its hub as ``Saved`` (the interruption
marker, a compaction and a branch summary included, which shells used to read
back from the store); a turn started with ``start`` runs as a task that
``cancel`` stops; a second piece of work meanwhile is refused with ``Busy``;
and a cancel is never lost, even when the interruption marker cannot be saved.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from infai.agent import (
    AgentSession,
    Busy,
    NotInFlight,
    Saved,
    Subscription,
    TurnEnded,
    run_turn,
)
from infai.agent.loop import INTERRUPTED_TURN
from infai.errors import InfaiError
from infai.llm import Message, ScriptedModel, ToolCall, ToolSpec
from infai.store import Event, MessageRecord, Store, StoreIOError
from infai.tools import AllowAll, Toolbox, ToolContext, ToolOutput

SUMMARY = json.dumps({"summary": "we said hello", "facts": ["x=1"]})


class Blocks:
    """A tool that waits until it is cancelled (a long command)."""

    spec = ToolSpec("wait", "Waits.", {"type": "object", "properties": {}})

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("never")


def calls_wait() -> Message:
    return Message(role="assistant", tool_calls=(ToolCall("c1", "wait", {}),))


def opened(tmp_path: Path, replies: list[Any], tool: Blocks | None = None) -> AgentSession:
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id
    toolbox = Toolbox([tool] if tool else [])
    return AgentSession(
        store, sid, model=ScriptedModel(replies), toolbox=toolbox, permissions=AllowAll()
    )


async def drain(sub: Subscription[Any], until: type) -> list[Any]:
    seen: list[Any] = []
    async for item in sub:
        seen.append(item)
        if isinstance(item, until):
            break
    return seen


def saved_kinds(items: list[Any]) -> list[str]:
    return [i.event.kind for i in items if isinstance(i, Saved)]


def test_a_started_turn_runs_as_a_task_and_a_cancel_is_published_with_its_marker(
    tmp_path: Path,
) -> None:
    tool = Blocks()

    async def scenario(s: AgentSession) -> None:
        watcher = s.hub.subscribe()
        turn = await s.start("go")
        assert s.busy is not None and s.turn is turn
        await tool.started.wait()
        with pytest.raises(Busy) as refused:  # one turn at a time, said clearly
            await s.start("again")
        assert isinstance(refused.value, InfaiError) and s.session_id in str(refused.value)
        with pytest.raises(Busy):
            await s.compact()
        with pytest.raises(NotInFlight):
            await s.cancel("not-this-turn")
        assert await s.cancel() is turn
        assert turn.outcome == TurnEnded("cancelled") and await turn.wait() == turn.outcome
        assert s.busy is None and s.turn is None
        seen = await drain(watcher, TurnEnded)
        assert saved_kinds(seen) == ["message", "message", "tool_call", "message"]
        marker = [i.event for i in seen if isinstance(i, Saved)][-1]
        assert isinstance(marker.record, MessageRecord)
        assert marker.record.content == INTERRUPTED_TURN  # published, not read back
        assert seen[-1] == TurnEnded("cancelled")
        with pytest.raises(NotInFlight):
            await s.cancel()
        # the slot is free again: the next turn runs
        ended = await (await s.start("next")).wait()
        assert ended == TurnEnded("done")

    with opened(tmp_path, [calls_wait(), "done"], tool) as s:
        asyncio.run(scenario(s))


def test_compaction_and_branch_summary_are_published_on_the_hub(tmp_path: Path) -> None:
    async def scenario(s: AgentSession) -> None:
        async for _ in s.prompt("hello"):
            pass
        first_answer = s.view.path()[1].id
        async for _ in s.prompt("more"):
            pass
        watcher = s.hub.subscribe()
        compaction = await s.compact()
        summary = await s.switch(first_answer)
        assert summary is not None
        watcher.close()
        seen = [item async for item in watcher]
        assert seen == [Saved(compaction), Saved(summary)]
        assert [e.kind for e in (compaction, summary)] == ["compaction", "branch_summary"]

    with opened(tmp_path, ["hi", "ok", SUMMARY, "abandoned: said more"]) as s:
        asyncio.run(scenario(s))


def test_the_hub_sees_each_append_once_and_in_order(tmp_path: Path) -> None:
    async def scenario(s: AgentSession) -> tuple[list[Any], list[Any]]:
        watcher = s.hub.subscribe()
        driven = [e async for e in s.prompt("hello")]
        return driven, await drain(watcher, TurnEnded)

    with opened(tmp_path, ["a reply long enough to stream in pieces"]) as s:
        driven, seen = asyncio.run(scenario(s))
        assert seen == driven
        assert [e.event.seq for e in seen if isinstance(e, Saved)] == [0, 1]
        assert s.view.count == 2 and s.pending_parent is None


class MarkerFails:
    """A writer whose every append works except the interruption marker's."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)

    def append(self, record: Any, role: str, **kwargs: Any) -> Event:
        if isinstance(record, MessageRecord) and record.content == INTERRUPTED_TURN:
            raise StoreIOError("disk full while saving the marker")
        event: Event = self._writer.append(record, role, **kwargs)
        return event


def test_a_failed_interruption_marker_does_not_swallow_the_cancel(tmp_path: Path) -> None:
    """The old loop let the marker's StoreIOError replace the CancelledError: the
    caller saw a store failure and the cancellation was lost."""
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id
    tool = Blocks()

    async def scenario() -> BaseException:
        with store.open_writer(sid) as writer:

            async def turn() -> None:
                async for _ in run_turn(
                    MarkerFails(writer),
                    ScriptedModel([calls_wait()]),
                    "go",
                    toolbox=Toolbox([tool]),
                    permissions=AllowAll(),
                    context=ToolContext(tmp_path, sid),
                ):
                    pass

            task = asyncio.create_task(turn())
            await tool.started.wait()
            task.cancel()
            try:
                await task
            except BaseException as exc:  # what came out is the point
                return exc
        raise AssertionError("the turn did not stop")

    raised = asyncio.run(scenario())
    assert isinstance(raised, asyncio.CancelledError)
    assert isinstance(raised.__cause__, StoreIOError)  # the marker's failure, chained

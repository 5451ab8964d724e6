"""A turn's output leaves by one path: the turn's generator yields each event it
appends exactly once, in store order (the interruption marker, a snapshot after
an interrupted tool, and what an append a cancel cut short had stored
included), and the session publishes that stream on its hub, which
``AgentSession.prompt`` reads. The session *has* its checkpoint steps.

Each test compares what was yielded or published against the store's own
records after the turn: by seq, the store's order."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ckpt_support import init_repo
from infai.agent import AgentEvent, AgentSession, Saved, SessionCheckpoints, TurnEnded, run_turn
from infai.agent.checkpoint_steps import CheckpointSteps
from infai.agent.loop import INTERRUPTED_TURN
from infai.llm import Message, ScriptedModel, ToolCall, ToolSpec
from infai.store import (
    CompactionRecord,
    MessageRecord,
    SessionView,
    SessionWriter,
    SnapshotRecord,
    Store,
    Usage,
)
from infai.tools import AllowAll, Toolbox, ToolContext, ToolOutput, builtin_tools

WAIT = 10.0


class WritesThenBlocks:
    """A tool that writes a file, then waits until it is cancelled (a long command
    that has changed the files already)."""

    spec = ToolSpec("work", "Works.", {"type": "object", "properties": {}})

    def __init__(self, where: Path) -> None:
        self.where = where
        self.started = asyncio.Event()

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        (self.where / "made.txt").write_text("made before the cancel\n")
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("never")


def calls_work() -> Message:
    return Message(role="assistant", tool_calls=(ToolCall("c1", "work", {}),))


def stored_ids(view: SessionView) -> list[str]:
    """Every event of the session, in store order (by seq)."""
    view.refresh()
    return [view.entry_at(seq).id for seq in range(view.count)]


def saved_ids(items: list[Any]) -> list[str]:
    return [item.event.id for item in items if isinstance(item, Saved)]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    init_repo(root)
    (root / "a.txt").write_text("one\n")
    return root


def test_the_session_has_its_checkpoint_steps_and_delegates_to_them(
    tmp_path: Path, work: Path
) -> None:
    assert CheckpointSteps not in AgentSession.__mro__
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(work)).id
    with AgentSession(
        store,
        sid,
        model=ScriptedModel([]),
        toolbox=Toolbox(),
        permissions=AllowAll(),
        files=SessionCheckpoints(store, work),
    ) as session:
        assert isinstance(session.checkpoints, CheckpointSteps)
        assert session.checkpoints.host is session
        state = asyncio.run(session.files_state())  # delegated
        assert state is not None


def test_run_turn_yields_every_append_once_in_store_order_the_marker_included(
    tmp_path: Path, work: Path
) -> None:
    """The old loop never yielded the marker nor the snapshot after it: only its
    ``on_saved`` callback heard of them."""
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(work)).id
    tool = WritesThenBlocks(work)
    files = SessionCheckpoints(store, work)
    seen: list[AgentEvent] = []

    async def scenario(writer: SessionWriter) -> None:
        # the session's own step after a tool, over this writer
        host: Any = SimpleNamespace(files=files, writer=writer)
        after_tool = CheckpointSteps(host).after_tool

        async def drive() -> None:
            async for item in run_turn(
                writer,
                ScriptedModel([calls_work()]),
                "go",
                toolbox=Toolbox([tool]),
                permissions=AllowAll(),
                context=ToolContext(work, sid),
                after_tool=after_tool,
            ):
                seen.append(item)

        task = asyncio.create_task(drive())
        await asyncio.wait_for(tool.started.wait(), WAIT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with store.open_writer(sid) as writer:
        asyncio.run(scenario(writer))
        assert saved_ids(seen) == stored_ids(writer)
        got = [item.event.record for item in seen if isinstance(item, Saved)]
        marker = [r for r in got if isinstance(r, MessageRecord) and r.content == INTERRUPTED_TURN]
        assert len(marker) == 1
        assert isinstance(got[-1], SnapshotRecord)  # the files the cut tool changed
    files.close()


def test_a_cancelled_turn_reaches_prompt_and_the_hub_once_each_in_store_order(
    tmp_path: Path, work: Path
) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(work)).id
    tool = WritesThenBlocks(work)
    session = AgentSession(
        store,
        sid,
        model=ScriptedModel([calls_work()]),
        toolbox=Toolbox([tool]),
        permissions=AllowAll(),
        files=SessionCheckpoints(store, work),
    )

    async def scenario() -> tuple[list[Any], list[Any]]:
        watcher = session.hub.subscribe()
        driven: list[Any] = []

        async def drive() -> None:
            async for item in session.prompt("go"):
                driven.append(item)

        task = asyncio.create_task(drive())
        await asyncio.wait_for(tool.started.wait(), WAIT)
        await session.cancel()
        await asyncio.wait_for(task, WAIT)
        watcher.close()
        return driven, [item async for item in watcher]

    with session:
        driven, heard = asyncio.run(scenario())
        stored = stored_ids(session.view)
        assert saved_ids(driven) == stored == saved_ids(heard)
        assert driven[-1] == heard[-1] == TurnEnded("cancelled")
        records = [session.view.event(i).record for i in stored]
        assert [getattr(r, "content", None) for r in records].count(INTERRUPTED_TURN) == 1
        assert isinstance(records[-1], SnapshotRecord)


def test_a_cancel_while_the_reply_is_stored_still_publishes_it_before_the_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old loop lost a reply (and its tool calls) stored by an append_batch a
    cancel interrupted: neither yielded nor told to ``on_saved``, so the hub and
    every SDK consumer missed events that are in the store."""
    entered, gate = threading.Event(), threading.Event()
    real = SessionWriter.append_batch

    def append_batch(self: SessionWriter, records: Any, **kw: Any) -> Any:
        if len(records) > 1:  # the reply and its call (``append`` comes here with one)
            entered.set()
            assert gate.wait(WAIT), "the test never let the append go on"
        return real(self, records, **kw)

    monkeypatch.setattr(SessionWriter, "append_batch", append_batch)
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id
    session = AgentSession(
        store, sid, model=ScriptedModel([calls_work()]), toolbox=Toolbox(), permissions=AllowAll()
    )

    async def scenario() -> tuple[list[Any], list[Any]]:
        watcher = session.hub.subscribe()
        driven: list[Any] = []

        async def drive() -> None:
            async for item in session.prompt("go"):
                driven.append(item)

        task = asyncio.create_task(drive())
        assert await asyncio.to_thread(entered.wait, WAIT), "the reply was never stored"
        cancelling = asyncio.create_task(session.cancel())
        await asyncio.sleep(0)  # the cancel is in while the batch is in its thread
        gate.set()
        await asyncio.wait_for(cancelling, WAIT)
        await asyncio.wait_for(task, WAIT)
        watcher.close()
        return driven, [item async for item in watcher]

    with session:
        driven, heard = asyncio.run(scenario())
        stored = stored_ids(session.view)
        assert [session.view.event(i).kind for i in stored] == [
            "message",  # the prompt
            "message",  # the reply
            "tool_call",
            "message",  # the marker
        ]
        assert saved_ids(driven) == stored == saved_ids(heard)


def test_a_cancel_while_a_compaction_is_stored_still_yields_it_before_the_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old loop lost an automatic compaction a cancel caught in its append: it
    was stored (the next context starts from it) but never yielded nor published."""
    entered, gate = threading.Event(), threading.Event()
    real = SessionWriter.append_batch

    def append_batch(self: SessionWriter, records: Any, **kw: Any) -> Any:
        if isinstance(records[0][0], CompactionRecord):
            entered.set()
            assert gate.wait(WAIT), "the test never let the append go on"
        return real(self, records, **kw)

    monkeypatch.setattr(SessionWriter, "append_batch", append_batch)
    (tmp_path / "notes.txt").write_text("remember this\n")
    call = ToolCall("c1", "read_file", {"path": "notes.txt"})
    heavy = Message(role="assistant", tool_calls=(call,), usage=Usage(input_tokens=900))
    summary = json.dumps({"summary": "read the notes"})
    model = ScriptedModel([heavy, summary, "never asked"], context_window=1000)
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id
    seen: list[AgentEvent] = []

    async def scenario(writer: SessionWriter) -> None:
        async def drive() -> None:
            async for item in run_turn(
                writer,
                model,
                "read it",
                toolbox=Toolbox(builtin_tools()),
                permissions=AllowAll(),
                context=ToolContext(tmp_path, sid),
            ):
                seen.append(item)

        task = asyncio.create_task(drive())
        assert await asyncio.to_thread(entered.wait, WAIT), "no compaction was stored"
        task.cancel()  # while the summary's append is in its thread
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    with store.open_writer(sid) as writer:
        asyncio.run(scenario(writer))
        stored = stored_ids(writer)
        kinds = [writer.event(i).kind for i in stored]
    assert kinds == ["message", "message", "tool_call", "tool_result", "compaction", "message"]
    assert saved_ids(seen) == stored

"""No blocking work on the event loop: a turn with tool calls runs under a guard.

The guard is blockbuster (as pydantic-ai uses it): while it is active, a
blocking call (a file read or write, an fsync, a sleep, a socket) made from
infai's code on a thread that runs an event loop raises ``BlockingError``.
Store appends (an fdatasync), context reads and the file tools must run in
worker threads; the second test proves the guard catches the old way.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from blockbuster import BlockBuster, BlockBusterFunction, BlockingError

from infai.agent import AgentSession, Saved, TurnEnded
from infai.llm import Message, ScriptedModel, ToolCall
from infai.store import MessageRecord, Store
from infai.tools import AllowAll, Toolbox, builtin_tools
from infai.tools.offload import off_loop

#: checks whose calls infai makes on the loop on purpose, cheaply: path
#: arithmetic (stat, realpath: a resolved path in a tool's policy check), the
#: asyncio machinery's own locks, and creating the threads work is sent to
GUARD_OFF = ("os.stat", "os.path.", "os.getcwd", "os.readlink", "os.access", "threading.")


@pytest.fixture
def no_blocking() -> Iterator[BlockBuster]:
    """Blocking calls from infai's code on the loop's thread raise BlockingError."""
    guard = BlockBuster(scanned_modules=["infai"])
    for name in ("fsync", "fdatasync"):  # an append's flush to disk: the slowest of all
        guard.functions[f"os.{name}"] = BlockBusterFunction(os, name, scanned_modules=["infai"])
    for name in list(guard.functions):
        if name.startswith(GUARD_OFF):
            del guard.functions[name]
    guard.activate()
    try:
        yield guard
    finally:
        guard.deactivate()


def turn_with_tools() -> list[Any]:
    return [
        Message(
            role="assistant",
            tool_calls=(
                ToolCall("c1", "write_file", {"path": "notes.md", "content": "one\ntwo\n"}),
                ToolCall("c2", "read_file", {"path": "notes.md"}),
                ToolCall(
                    "c3", "edit_file", {"path": "notes.md", "old_text": "two", "new_text": "2"}
                ),
                ToolCall("c4", "grep", {"pattern": "one"}),
                ToolCall("c5", "list_files", {"pattern": "*.md"}),
            ),
        ),
        "all done",
    ]


def test_a_turn_with_tool_calls_blocks_nothing(tmp_path: Path, no_blocking: BlockBuster) -> None:
    work = tmp_path / "work"
    work.mkdir()
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(work)).id
    model = ScriptedModel(turn_with_tools())
    session = AgentSession(
        store, sid, model=model, toolbox=Toolbox(builtin_tools()), permissions=AllowAll()
    )

    async def scenario() -> list[Any]:
        return [e async for e in session.prompt("take notes")]

    try:
        events = asyncio.run(scenario())
    finally:
        session.close()
    assert events[-1] == TurnEnded("done")
    results = [e.event for e in events if isinstance(e, Saved) and e.event.kind == "tool_result"]
    assert len(results) == 5 and not any(r.record.is_error for r in results)  # type: ignore[union-attr]
    assert (work / "notes.md").read_text() == "one\n2\n"


def test_the_guard_catches_an_append_made_on_the_loop(
    tmp_path: Path, no_blocking: BlockBuster
) -> None:
    """What the loop did before: ``writer.append`` (an fdatasync) right in the loop."""
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id

    with store.open_writer(sid) as writer:  # opened here, outside any loop

        async def append_on_the_loop() -> None:
            writer.append(MessageRecord(content="hi"), "user")

        async def append_in_a_thread() -> None:
            await off_loop(writer.append, MessageRecord(content="hi"), "user")

        with pytest.raises(BlockingError):
            asyncio.run(append_on_the_loop())
        asyncio.run(append_in_a_thread())  # the same work, where it belongs: no error


def test_a_subagent_turn_blocks_nothing(tmp_path: Path, no_blocking: BlockBuster) -> None:
    from infai.agent.subagent import standard_toolbox

    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id
    task = ToolCall("t1", "task", {"prompt": "count the files", "description": "count"})
    model = ScriptedModel([Message(role="assistant", tool_calls=(task,)), "three", "it is three"])
    permissions = AllowAll()
    session = AgentSession(
        store,
        sid,
        model=model,
        toolbox=standard_toolbox(store, model, permissions),
        permissions=permissions,
    )

    async def scenario() -> list[Any]:
        return [e async for e in session.prompt("how many?")]

    try:
        events = asyncio.run(scenario())
    finally:
        session.close()
    assert events[-1] == TurnEnded("done")
    result = next(e.event for e in events if isinstance(e, Saved) and e.event.kind == "tool_result")
    assert result.record.content == "three"  # type: ignore[union-attr]

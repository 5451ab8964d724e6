"""The task tool: child sessions linked both ways, isolated context, narrower permissions."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from infai.agent import TaskTool, run_turn
from infai.llm import Message, ProviderError, ScriptedModel, ToolCall
from infai.store import Store, ToolResultRecord
from infai.tools import AllowAll, Policy, Rule, Toolbox, ToolContext, builtin_tools


def call(name: str, call_id: str = "c1", **arguments: Any) -> Message:
    return Message(role="assistant", tool_calls=(ToolCall(call_id, name, arguments),))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.py").write_text("print('a')\n")
    (root / "b.py").write_text("print('b')\n")
    return root


def run_parent(store: Store, sid: str, work: Path, parent: Any, task: TaskTool) -> None:
    async def go() -> None:
        with store.open_writer(sid) as writer:
            async for _ in run_turn(
                writer,
                parent,
                "how many python files?",
                toolbox=Toolbox([*builtin_tools(), task]),
                permissions=task.permissions,
                context=ToolContext(work, sid),
            ):
                pass

    asyncio.run(go())


def results(store: Store, sid: str) -> list[ToolResultRecord]:
    with store.open_reader(sid) as reader:
        return [e.record for e in reader.context().events if isinstance(e.record, ToolResultRecord)]


def test_a_subagent_works_in_its_own_session_and_returns_only_its_answer(
    tmp_path: Path, work: Path
) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(work)).id
    child_model = ScriptedModel([call("list_files", pattern="*.py"), "There are 2 python files."])
    parent = ScriptedModel([call("task", "t1", prompt="count the python files"), "Two."])
    task = TaskTool(store, child_model, builtin_tools(), AllowAll())
    run_parent(store, sid, work, parent, task)

    (result,) = results(store, sid)
    assert result.content == "There are 2 python files." and not result.is_error
    child_id = result.metadata["child_session"]
    assert task.children == [child_id]
    # Linked both ways: the child names the parent session and the call event.
    info = store.info(child_id)
    with store.open_reader(sid) as reader:
        call_event = next(e for e in reader.path() if e.kind == "tool_call")
    assert (info.parent_session, info.parent_event) == (sid, call_event.id)
    assert info.name == "subagent: count the python files"
    # Isolation: the parent's context never saw the child's tool call or listing.
    sent = [m for m in parent.requests[1].messages]
    assert [m.role for m in sent] == ["user", "assistant", "tool"]
    assert all("a.py" not in m.content for m in sent)
    with store.open_reader(child_id) as reader:
        kinds = [e.kind for e in reader.context().events]
    assert kinds == ["message", "message", "tool_call", "tool_result", "message"]
    assert "task" not in [t.name for t in child_model.requests[0].tools]  # no recursion


def test_a_subagent_cannot_do_more_than_its_parent_or_its_own_list(
    tmp_path: Path, work: Path
) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(work)).id
    child_model = ScriptedModel(
        [
            call("write_file", "w", path="x.txt", content="no"),
            call("bash", "b", command="ls"),
            call("read_file", "r", path="a.py"),
            "done",
        ]
    )
    parent = ScriptedModel([call("task", "t1", prompt="try things"), "ok"])
    # The parent's headless policy allows the task but asks (so denies) bash; the child
    # may only read and run bash, so it reads, and bash stays denied by the parent's policy.
    policy = Policy([Rule("allow", "task")])
    task = TaskTool(store, child_model, builtin_tools(), policy, allowed=("read_file", "bash"))
    run_parent(store, sid, work, parent, task)
    child_id = task.children[0]
    write, bash, read = results(store, child_id)
    assert write.is_error and "not among this subagent's tools" in write.content
    assert write.metadata["permission"]["by"] == "subagent"
    assert bash.is_error and bash.metadata["permission"]["by"] == "default"  # parent's policy
    assert not read.is_error and read.content == "print('a')\n"
    assert not (work / "x.txt").exists()


def test_a_failing_subagent_is_an_error_result(tmp_path: Path, work: Path) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(work)).id
    child_model = ScriptedModel([ProviderError("overloaded", status=529)])
    parent = ScriptedModel([call("task", "t1", prompt="anything"), "sorry"])
    task = TaskTool(store, child_model, builtin_tools(), AllowAll())
    run_parent(store, sid, work, parent, task)
    (result,) = results(store, sid)
    assert result.is_error and result.content == "subagent failed: overloaded"
    assert result.metadata["child_session"] == task.children[0]

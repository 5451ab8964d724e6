"""The session's files on its timeline, at the agent layer: which tools snapshot,
sessions sharing a directory, the [checkpoints] configuration (issue 14)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession, Harness, OnRestore, RestoreRefused, SessionCheckpoints
from infai.agent.config import Config, ConfigError, load_config
from infai.checkpoints.session import changes_files
from infai.llm import Message, ScriptedModel, ToolCall, ToolSpec
from infai.store import SnapshotRecord, Store
from infai.tools import AllowAll, Toolbox, ToolContext, ToolOutput


def test_only_tools_that_say_so_are_read_only(tmp_path: Path) -> None:
    space = Harness(Store(tmp_path / "home"), tmp_path, config=Config(default_model="offline"))
    try:
        box = space.toolbox(space.model, space.policy())
        says = {spec.name: changes_files(box.get(spec.name)) for spec in box.specs()}
    finally:
        asyncio.run(space.aclose())
    assert says["read_file"] is False and says["grep"] is False and says["list_files"] is False
    assert says["write_file"] and says["edit_file"] and says["bash"] and says["task"]
    assert changes_files(object())  # an unknown (MCP) tool may change files


def test_project_config_may_only_lower_the_cap_or_disable(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text("[checkpoints]\nsize_cap_mb = 4\n")
    work = tmp_path / "w"
    (work / ".infai").mkdir(parents=True)
    project = work / ".infai" / "config.toml"
    project.write_text("[checkpoints]\nsize_cap_mb = 100\nenabled = true\n")
    got = load_config(work, user).checkpoints
    assert got.size_cap == 4 * 1024 * 1024 and got.enabled
    project.write_text("[checkpoints]\nsize_cap_mb = 1\nenabled = false\n")
    got = load_config(work, user).checkpoints
    assert got.size_cap == 1024 * 1024 and not got.enabled
    user.write_text("[checkpoints]\nenabled = false\n")
    project.write_text("[checkpoints]\nenabled = true\n")
    assert not load_config(work, user).checkpoints.enabled
    project.write_text("[checkpoints]\nsize = 1\n")
    with pytest.raises(ConfigError, match=r"checkpoints\.size"):
        load_config(work, user)


def test_a_restore_warns_of_another_open_session_in_the_directory(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    store = Store(tmp_path / "home")
    space = Harness(store, work, config=Config(default_model="offline"))

    async def main() -> None:
        session = space.open()
        async for _ in session.prompt("one"):
            pass
        first = session.view.head
        assert first is not None
        (work / "a.txt").write_text("two\n")
        async for _ in session.prompt("two"):
            pass
        other = store.open_writer(store.create_session(working_dir=str(work)).id)
        try:
            with pytest.raises(RestoreRefused) as refused:
                await session.checkout(first)
            assert refused.value.others == [other.session_id]
            assert (work / "a.txt").read_text() == "two\n"  # nothing changed
            done = await session.checkout(first, OnRestore(force=True))
            assert (work / "a.txt").read_text() == "one\n"
            assert any(other.session_id in n for n in done.notices)
        finally:
            other.close()
        await session.aclose()

    try:
        asyncio.run(main())
    finally:
        asyncio.run(space.aclose())


def test_a_restore_applied_but_not_recorded_is_recorded_when_the_session_opens(
    tmp_path: Path,
) -> None:
    from infai.agent import SessionCheckpoints
    from infai.store import RestoreRecord

    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    store = Store(tmp_path / "home")
    space = Harness(store, work, config=Config(default_model="offline"))

    async def turns() -> tuple[str, str]:
        session = space.open()
        async for _ in session.prompt("one"):
            pass
        first = session.view.head
        (work / "a.txt").write_text("two\n")
        async for _ in session.prompt("two"):
            pass
        await session.aclose()
        assert first is not None
        return session.session_id, first

    sid, first = asyncio.run(turns())
    files = SessionCheckpoints(store, work)
    with store.open_writer(sid) as writer:  # a process killed after apply, before recording
        _now, plan, _last, _target = files.plan(writer, first)
        meta = {"source": first, "before": None, "session": sid, "parent": first}
        files.cp.apply(plan, metadata=meta)
    assert (work / "a.txt").read_text() == "one\n"

    async def reopen() -> None:
        session = space.open(sid)
        assert any("was completed" in n for n in session.notices)
        head = session.view.event(session.view.head or "", resolve=True)
        assert isinstance(head.record, RestoreRecord) and head.record.source == first
        assert head.parent_id == first
        await session.aclose()

    try:
        asyncio.run(reopen())
    finally:
        asyncio.run(space.aclose())


def test_files_state_says_when_the_disk_is_not_heads(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    store = Store(tmp_path / "home")
    space = Harness(store, work, config=Config(default_model="offline"))

    async def main() -> None:
        session = space.open()
        before = await session.files_state()
        assert before is not None and before.head_tree is None and before.differs
        async for _ in session.prompt("one"):
            pass
        same = await session.files_state()
        assert same is not None and not same.differs and same.changed == 0
        (work / "a.txt").write_text("two\n")
        (work / "b.txt").write_text("new\n")
        head = session.view.head
        other = await session.files_state()
        assert other is not None and other.differs and other.changed == 2
        assert other.head_tree == same.head_tree
        assert session.view.head == head  # asking records nothing
        await session.aclose()

    try:
        asyncio.run(main())
    finally:
        asyncio.run(space.aclose())


class _WritesThenHangs:
    """A tool that changes a file, then never finishes (cancelled mid-run)."""

    spec = ToolSpec("scribble", "Writes, then waits.", {"type": "object", "properties": {}})

    def __init__(self, work: Path) -> None:
        self.work = work
        self.started = asyncio.Event()

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        (self.work / "half.txt").write_text("written before the cancel\n")
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_tool_cancelled_mid_run_has_its_files_recorded_after_the_marker(
    tmp_path: Path,
) -> None:
    """Fails without the fix: the file it wrote waited for the next turn's start."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(work)).id
    tool = _WritesThenHangs(work)
    call = Message(role="assistant", tool_calls=(ToolCall("c1", "scribble", {}),))
    session = AgentSession(
        store,
        sid,
        model=ScriptedModel([call]),
        toolbox=Toolbox([tool]),
        permissions=AllowAll(),
        files=SessionCheckpoints(store, work),
    )

    async def main() -> None:
        turn = await session.start("go")
        started = asyncio.ensure_future(tool.started.wait())
        assert turn.task is not None
        await asyncio.wait({started, turn.task}, timeout=60, return_when="FIRST_COMPLETED")
        assert started.done(), turn.outcome
        await session.cancel(turn.id)
        await session.aclose()

    asyncio.run(main())
    with store.open_reader(sid) as reader:
        path = [reader.event(e.id, resolve=True) for e in reader.path()]
    kinds = [(e.kind, e.preview) for e in path]
    assert kinds[-2][1] == "[turn interrupted]", kinds
    last = path[-1].record
    assert isinstance(last, SnapshotRecord) and last.reason == "after scribble", kinds
    files = SessionCheckpoints(store, work, watch=False)
    assert "half.txt" in files.cp.files(last.tree)


def test_a_session_naming_no_directory_works_and_snapshots_in_the_workspaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails without the fix: its tools ran in the process's directory while its
    files were snapshotted in the harness's directory."""
    work, elsewhere = tmp_path / "w", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    store = Store(tmp_path / "home")
    space = Harness(store, work, config=Config(default_model="offline"))
    sid = store.create_session().id  # as an import without a directory makes it
    try:
        session = space.open(sid)
        try:
            assert session.files is not None
            assert session.working_dir == Path(session.files.workdir) == work.resolve()
        finally:
            session.close()
    finally:
        asyncio.run(space.aclose())

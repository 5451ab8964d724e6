"""A summarised branch switch restores the target event's files as a continue does
(issue 14): conflicts refuse with nothing stored, the files left are recorded on
the branch left, ``keep_files`` leaves the disk alone. Real directories, a real
git repository whose ``.git`` no restore may touch."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ckpt_support import hash_git_dir, init_repo, tree_state
from infai.agent import AgentSession, OnRestore, RestoreRefused, SessionCheckpoints
from infai.agent.compaction import CompactionFailed
from infai.llm import Message, ScriptedModel, ToolCall
from infai.store import BranchSummaryRecord, RestoreRecord, SnapshotRecord, Store
from infai.tools import AllowAll, Toolbox, builtin_tools


def write(path: str, content: str, call_id: str) -> Message:
    return Message(
        role="assistant",
        tool_calls=(ToolCall(call_id, "write_file", {"path": path, "content": content}),),
    )


def bash(command: str, call_id: str) -> Message:
    return Message(role="assistant", tool_calls=(ToolCall(call_id, "bash", {"command": command}),))


def open_session(tmp_path: Path, work: Path, replies: list[Any]) -> tuple[Store, AgentSession]:
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(work)).id
    session = AgentSession(
        store,
        sid,
        model=ScriptedModel(replies),
        toolbox=Toolbox(builtin_tools()),
        permissions=AllowAll(),
        files=SessionCheckpoints(store, work),
    )
    return store, session


async def prompt(session: AgentSession, text: str) -> None:
    async for _ in session.prompt(text):
        pass


def files(work: Path) -> dict[str, str]:
    return {k: v[1] for k, v in tree_state(work).items() if v[0] == "file"}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    init_repo(root)
    (root / "a.txt").write_text("one\n")
    return root


def two_branches(tmp_path: Path, work: Path, summary: str = "tried B") -> tuple[Any, ...]:
    """A session whose first turn wrote b.txt, whose second (the branch to leave)
    rewrote a.txt and deleted b.txt with bash; the model's next reply is ``summary``."""
    replies: list[Any] = [
        write("b.txt", "bee\n", "c1"),
        "wrote b",
        write("a.txt", "two\n", "c2"),
        bash("rm b.txt && mkdir gen && echo x > gen/out", "c3"),
        "rewrote a",
        summary,
    ]
    store, session = open_session(tmp_path, work, replies)
    asyncio.run(prompt(session, "first"))
    target = session.view.head
    asyncio.run(prompt(session, "second"))
    return store, session, target


def test_a_summarised_switch_restores_the_target_files_and_keeps_the_left_ones(
    tmp_path: Path, work: Path
) -> None:
    store, session, target = two_branches(tmp_path, work)
    git_before = hash_git_dir(work)
    left_files = files(work)
    assert set(left_files) == {"README.md", "a.txt", "gen/out"}
    left_tip = session.view.head
    with session:
        summary = asyncio.run(session.switch(target))
        assert summary is not None and isinstance(summary.record, BranchSummaryRecord)
        assert summary.parent_id == target
        assert set(files(work)) == {"README.md", "a.txt", "b.txt"}
        assert (work / "a.txt").read_text() == "one\n" and (work / "b.txt").read_text() == "bee\n"
        assert not (work / "gen").exists()
        head = session.view.event(session.view.head or "", resolve=True)
        assert isinstance(head.record, RestoreRecord) and head.parent_id == summary.id
        assert head.record.source == target
        # the branch left still answers "what were the files here" with its own
        assert summary.record.abandoned_tip == left_tip
        # going back to the branch left (a continue from its tip) gives them again
        session.select(left_tip)
        done = asyncio.run(session.restore_files())
        assert done is not None and files(work) == left_files
    assert hash_git_dir(work) == git_before  # the user's repository is untouched
    assert store.fsck(session.session_id).ok


def test_files_left_unrecorded_are_snapshotted_on_the_branch_left(
    tmp_path: Path, work: Path
) -> None:
    _store, session, target = two_branches(tmp_path, work)
    with session:
        left_tip = session.view.head
        (work / "new.txt").write_text("made after the last snapshot\n")
        summary = asyncio.run(session.switch(target, choice=OnRestore(force=True)))
        assert summary is not None and not (work / "new.txt").exists()
        record = summary.record
        assert isinstance(record, BranchSummaryRecord)
        kept = session.view.event(record.abandoned_tip, resolve=True)
        assert isinstance(kept.record, SnapshotRecord) and kept.parent_id == left_tip
        assert kept.record.reason == "before switch"
        session.select(kept.id)  # back to the branch left: its newest files return
        asyncio.run(session.restore_files())
        assert (work / "new.txt").read_text() == "made after the last snapshot\n"


def test_a_conflict_refuses_the_switch_with_nothing_changed(tmp_path: Path, work: Path) -> None:
    _store, session, target = two_branches(tmp_path, work)
    with session:
        (work / "a.txt").write_text("mine\n")  # changed outside the agent
        count, head, disk = session.view.count, session.view.head, tree_state(work)
        with pytest.raises(RestoreRefused) as refused:
            asyncio.run(session.switch(target))
        assert refused.value.conflicts == ["a.txt"]
        assert (session.view.count, session.view.head) == (count, head)  # nothing stored
        assert tree_state(work) == disk  # nothing on disk touched
        assert isinstance(session.model, ScriptedModel) and session.model.remaining == 1
        # keep: that path stays as it is on disk, the rest is restored
        summary = asyncio.run(session.switch(target, choice=OnRestore(keep=("a.txt",))))
        assert summary is not None
        assert (work / "a.txt").read_text() == "mine\n" and (work / "b.txt").exists()


def test_keep_files_switches_without_touching_the_disk(tmp_path: Path, work: Path) -> None:
    _store, session, target = two_branches(tmp_path, work)
    with session:
        session.on_restore = OnRestore(keep_files=True)
        disk = tree_state(work)
        summary = asyncio.run(session.switch(target))
        assert summary is not None and session.view.head == summary.id
        assert tree_state(work) == disk


def test_a_switch_to_head_itself_still_fails_and_stores_nothing(tmp_path: Path, work: Path) -> None:
    _store, session, _target = two_branches(tmp_path, work)
    with session:
        (work / "a.txt").write_text("unrecorded\n")  # would be snapshotted by a real switch
        count = session.view.count
        with pytest.raises(CompactionFailed, match="nothing is abandoned"):
            asyncio.run(session.switch(session.view.head or ""))
        assert session.view.count == count  # no "before switch" snapshot either


def test_files_changed_while_the_summary_is_written_are_a_notice_not_a_loss(
    tmp_path: Path, work: Path
) -> None:
    from infai.agent import Streamed
    from infai.llm import FunctionModel, Notice, Request

    replies: list[Any] = [write("a.txt", "two\n", "c1"), "rewrote a"]

    def answer(request: Request) -> Any:
        if request.purpose == "summary":  # the user edits a.txt meanwhile
            (work / "a.txt").write_text("edited during the summary\n")
            return "tried two"
        return replies.pop(0)

    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(work)).id
    session = AgentSession(
        store,
        sid,
        model=FunctionModel(answer),
        toolbox=Toolbox(builtin_tools()),
        permissions=AllowAll(),
        files=SessionCheckpoints(store, work),
    )

    async def main() -> list[str]:
        await prompt(session, "go")
        asked = session.view.path()[1].id  # the prompt, after the turn-start snapshot
        watch = session.hub.subscribe()
        summary = await session.switch(asked)
        watch.close()
        assert summary is not None and session.view.head == summary.id  # switched
        seen = [item async for item in watch]
        return [
            i.event.message for i in seen if isinstance(i, Streamed) and isinstance(i.event, Notice)
        ]

    with session:
        said = asyncio.run(main())
    assert (work / "a.txt").read_text() == "edited during the summary\n"  # not overwritten
    assert len(said) == 1 and "not restored" in said[0] and "a.txt" in said[0]

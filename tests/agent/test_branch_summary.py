"""Leaving a branch records what was done on it; failure changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from infai.agent import AgentSession, to_messages
from infai.agent.compaction import CompactionFailed
from infai.llm import ProviderError, ScriptedModel
from infai.store import BranchSummaryRecord, Store
from infai.tools import AllowAll, Toolbox


def session(tmp_path: Path, replies: list[object]) -> tuple[Store, AgentSession, ScriptedModel]:
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id
    model = ScriptedModel(replies)  # type: ignore[arg-type]
    return (
        store,
        AgentSession(store, sid, model=model, toolbox=Toolbox(), permissions=AllowAll()),
        model,
    )


def prompt(s: AgentSession, text: str) -> None:
    async def go() -> None:
        async for _ in s.prompt(text):
            pass

    asyncio.run(go())


def test_switching_records_the_abandoned_work_after_the_target(tmp_path: Path) -> None:
    store, s, model = session(
        tmp_path,
        ["plan A", "A failed: the regex is too slow", "Tried A; regex too slow.", "B it is"],
    )
    with s:
        prompt(s, "start")
        prompt(s, "try approach A")
        abandoned_tip = s.writer.head
        start_answer = s.writer.path()[1].id  # "plan A"
        event = asyncio.run(s.switch(start_answer))
        assert event is not None and s.writer.head == event.id
        record = event.record
        assert isinstance(record, BranchSummaryRecord)
        assert record.summary == "Tried A; regex too slow."
        assert (record.abandoned_tip, record.common_ancestor) == (abandoned_tip, start_answer)
        assert event.parent_id == start_answer and event.branch_from == start_answer
        # The model was shown only the abandoned events.
        shown = [m.content for m in model.requests[2].messages]
        assert shown[:2] == ["try approach A", "A failed: the regex is too slow"]
        prompt(s, "try approach B")
        sent = [m.content for m in model.requests[3].messages]
    assert sent[:2] == ["start", "plan A"]
    assert "Tried A; regex too slow." in sent[2] and sent[3] == "try approach B"
    assert store.fsck(s.session_id).ok


def test_a_failed_branch_summary_changes_nothing(tmp_path: Path) -> None:
    _, s, _ = session(tmp_path, ["one", "two", ProviderError("down")])
    with s:
        prompt(s, "q1")
        prompt(s, "q2")
        before = (s.writer.count, s.writer.head)
        target = s.writer.path()[1].id
        with pytest.raises(CompactionFailed, match="down"):
            asyncio.run(s.switch(target))
        assert (s.writer.count, s.writer.head) == before
        with pytest.raises(CompactionFailed, match="nothing is abandoned"):
            asyncio.run(s.switch(s.writer.head or ""))
        assert asyncio.run(s.switch(target, summarize=False)) is None
        assert s.writer.pending_parent == target and s.writer.head == before[1]


def test_to_messages_labels_a_branch_summary(tmp_path: Path) -> None:
    _, s, _ = session(tmp_path, ["x", "y", "the summary"])
    with s:
        prompt(s, "a")
        prompt(s, "b")
        asyncio.run(s.switch(s.writer.path()[0].id))
        messages = to_messages(s.writer.context().events)
    assert messages[-1].content.startswith("Summary of work on a branch that was left")

"""Continuing from a tool call continues after its result (issue 25, bug 6).

Sessions are written as a turn writes them (a reply's calls, then each call's
result, then the files' snapshot); :meth:`AgentSession.select` on a call whose
result was recorded picks the point after the batch's results, so the next
prompt's context holds the results and never says the session stopped.
"""

from __future__ import annotations

from pathlib import Path

from infai.agent import AgentSession
from infai.agent.context import INTERRUPTED, to_messages
from infai.agent.continue_point import continue_point
from infai.llm import ScriptedModel
from infai.store import (
    MessageRecord,
    SnapshotRecord,
    Store,
    ToolCallRecord,
    ToolResultRecord,
)
from infai.tools import AllowAll, Toolbox


def call(call_id: str) -> ToolCallRecord:
    return ToolCallRecord(call_id=call_id, name="read_file", arguments={"path": call_id})


def result(call_id: str) -> ToolResultRecord:
    return ToolResultRecord(call_id=call_id, name="read_file", content=f"text of {call_id}")


def test_a_call_picked_continues_after_its_batch_and_the_files_after_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    snapshot = SnapshotRecord(tree="0" * 64, reason="after read_file", files=1, bytes=1, changed=0)
    with store.open_writer(sid) as writer:
        writer.append(MessageRecord(content="read both"), "user")
        writer.append(MessageRecord(content=""), "assistant")
        first = writer.append(call("a"), "assistant")
        second = writer.append(call("b"), "assistant")
        writer.append(result("a"), "tool")
        settled = writer.append(result("b"), "tool")
        files = writer.append(snapshot, "system")
        writer.append(MessageRecord(content="both read"), "assistant")
        unanswered = writer.append(call("c"), "assistant")  # a turn killed here
        reader = store.open_reader(sid)
        for picked in (first, second, settled):
            assert continue_point(reader, picked.id) == files.id
        assert continue_point(reader, unanswered.id) == unanswered.id  # really interrupted
        reader.close()
    session = AgentSession(
        store, sid, model=ScriptedModel(["ok"]), toolbox=Toolbox(), permissions=AllowAll()
    )
    try:
        session.select(first.id)
        assert session.pending_parent == files.id
        sent = to_messages(list(session.view.context(session.pending_parent).events))
        assert [m.content for m in sent if m.role == "tool"] == ["text of a", "text of b"]
        assert all(m.content != INTERRUPTED for m in sent)
    finally:
        session.close()

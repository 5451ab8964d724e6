"""Snapshot and restore events are workspace history, not conversation: the model
never sees them, and one between a tool call and its result changes nothing."""

from __future__ import annotations

from pathlib import Path

from infai.agent.compaction import context_tokens
from infai.agent.context import INTERRUPTED, to_messages
from infai.store import (
    MessageRecord,
    RestoreRecord,
    SnapshotRecord,
    Store,
    ToolCallRecord,
    ToolResultRecord,
)
from infai.store.codec import digest_of

TREE = digest_of(b"a tree")


def test_workspace_events_never_reach_the_model(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        sid = store.create_session().id
        with store.open_writer(sid) as writer:
            first = writer.append(MessageRecord(content="fix it"), "user")
            writer.append(SnapshotRecord(tree=TREE, reason="turn start"), "system")
            writer.append(ToolCallRecord(call_id="c1", name="bash", arguments={}), "assistant")
            # the snapshot after the tool ran lands before its result is recorded
            writer.append(SnapshotRecord(tree=TREE, reason="after bash"), "system")
            writer.append(ToolResultRecord(call_id="c1", name="bash", content="ok"), "tool")
            writer.append(RestoreRecord(tree=TREE, source=first.id), "system")
            writer.append(MessageRecord(content="done"), "assistant")
            events = writer.context().events
    messages = to_messages(events)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert all(m.content != INTERRUPTED for m in messages)
    assert messages[2].content == "ok" and messages[1].tool_calls[0].id == "c1"
    without = [e for e in events if e.kind not in ("snapshot", "restore")]
    assert context_tokens(events) == context_tokens(without)

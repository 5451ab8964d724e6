"""The TUI transcript shows snapshot and restore events as a notice line, in the
timeline's words (not the index preview's "files: 2 (0 changed)", which reads as
if nothing changed), and one between a tool call and its result does not cut the
call off from its result."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Static

from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import ChatView, ToolView
from infai.store import (
    MessageRecord,
    RestoreRecord,
    SnapshotRecord,
    ToolCallRecord,
    ToolResultRecord,
)
from infai.store.codec import digest_of
from tui_pilot import harness, run_app, until


def test_workspace_events_show_as_notices_in_the_transcript(tmp_path: Path) -> None:
    space = harness(tmp_path)
    tree = digest_of(b"tree")
    sid = space.store.create_session(working_dir=str(space.working_dir)).id
    with space.store.open_writer(sid) as writer:
        first = writer.append(MessageRecord(content="go"), "user")
        writer.append(ToolCallRecord(call_id="c1", name="bash", arguments={}), "assistant")
        writer.append(SnapshotRecord(tree=tree, files=2, reason="after bash"), "system")
        writer.append(ToolResultRecord(call_id="c1", name="bash", content="done"), "tool")
        writer.append(SnapshotRecord(tree=tree, files=3, changed=1, reason="turn start"), "system")
        writer.append(RestoreRecord(tree=tree, source=first.id, touched=["a", "b"]), "system")
    app = InfaiApp(space, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        chat = app.query_one(ChatView)
        await until(pilot, lambda: bool(chat.query(ToolView)), "the transcript")
        notices = [str(s.render()) for s in chat.query(Static) if s.has_class("notice")]
        assert "▣ files: 2 files recorded · after bash" in notices  # the first recorded
        assert "▣ files: 1 changed · turn start" in notices
        assert "↺ restored 2 files" in notices
        assert not any("snapshot:" in n or "restore:" in n for n in notices)
        [tool] = chat.query(ToolView)
        assert tool.has_result

    run_app(app, scenario, (100, 30))

"""SIGKILL an agent process mid-generation and mid-tool: nothing typed is lost, nothing dangles."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from infai.agent import to_messages
from infai.agent.context import INTERRUPTED
from infai.store import Store

CHILD = Path(__file__).with_name("loop_child.py")


def kill_at(home: Path, sid: str, where: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(home), sid, where],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "READY"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.mark.crash
@pytest.mark.parametrize("where", ["generation", "tool"])
def test_killed_turn_keeps_the_prompt_and_sends_nothing_dangling(
    tmp_path: Path, where: str
) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    kill_at(store.home, sid, where)
    with store.open_writer(sid) as writer:  # recovery runs here
        events = writer.context().events
        messages = to_messages(events)
    assert events[0].kind == "message" and events[0].record.content == "please do it"  # type: ignore[union-attr]
    if where == "generation":
        assert [e.kind for e in events] == ["message"]  # deltas are never stored
        assert [m.role for m in messages] == ["user"]
    else:
        assert [e.kind for e in events] == ["message", "message", "tool_call"]
        assert [m.role for m in messages] == ["user", "assistant", "tool"]
        assert messages[2].content == INTERRUPTED and messages[2].is_error
        assert messages[1].tool_calls[0].id == messages[2].tool_call_id
    report = store.fsck(sid)
    assert report.ok, report.problems

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
from infai.store import SnapshotRecord, Store

CHILD = Path(__file__).resolve().parents[1] / "support" / "loop_child.py"


def kill_at(home: Path, sid: str, where: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(home), sid, where],
        stdout=subprocess.PIPE,
        text=True,
    )
    with proc:  # closes the pipe
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


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.crash
@pytest.mark.parametrize(
    ("signum", "sigint_ignored"),
    [(signal.SIGTERM, False), (signal.SIGHUP, False), (signal.SIGTERM, True)],
)
def test_sigterm_or_sighup_stops_the_turn_and_its_tool_processes(
    tmp_path: Path, signum: int, sigint_ignored: bool
) -> None:
    """Also when started as a shell starts a background job: SIGINT ignored."""
    import json
    import time

    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    command = "echo started > started; sleep 30; touch late"
    call = {"id": "c1", "name": "bash", "arguments": {"command": command}}
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"role": "assistant", "content": "", "tool_calls": [call]}]))
    env = {**os.environ, "INFAI_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "infai", "run", "--model", f"scripted:{script}",
         "--allow", "bash", "go"],
        cwd=work, env=env, stderr=subprocess.PIPE, text=True,
        preexec_fn=_ignore_sigint if sigint_ignored else None,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while not (work / "started").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the tool never started: {proc.communicate()[1]}")
        time.sleep(0.02)
    os.kill(proc.pid, signum)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 130 and "interrupted (session" in err
    time.sleep(0.5)
    assert not (work / "late").exists()  # the tool's processes went with the turn
    store = Store(home)
    [info] = store.list_sessions()
    with store.open_reader(info.id) as reader:
        events = reader.context().events
        kinds = [e.kind for e in events]
        marker, after = events[-2].record, events[-1].record
    # the turn's files first; after the interruption marker, the files the cut
    # tool left (its ``started``)
    assert kinds == ["snapshot", "message", "message", "tool_call", "message", "snapshot"]
    assert getattr(marker, "metadata", {}).get("interrupted") is True
    assert isinstance(after, SnapshotRecord) and after.reason == "after bash"
    assert store.fsck(info.id).ok

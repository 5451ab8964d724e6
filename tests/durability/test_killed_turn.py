"""A real ``infai run`` killed with SIGKILL mid-turn: the next run records it, once.

The model is the fake OpenAI server (tests/support/fakeapi.py), slow enough for
the kill to land while it streams, or while the bash tool it called runs. The
next ``infai run --session`` opens the session, records the interruption marker
and sends the model a request that says so, with no two user messages in a
row; a run after that records nothing more.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fakeapi import FakeOpenAI, Reply
from infai.agent.context import INTERRUPTED, INTERRUPTED_NOTE
from infai.store import MessageRecord, Store

#: how long anything here may take on a loaded machine
WAIT = 60.0


def setup(tmp_path: Path, fake: FakeOpenAI) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(
        'model = "local"\n[models.local]\nprovider = "openai"\nmodel = "m"\n'
        f'base_url = "{fake.base_url}"\ncontext_window = 32768\n'
    )
    env = {
        **os.environ,
        "INFAI_CONFIG": str(config),
        "INFAI_HOME": str(tmp_path / "home"),
        "OPENAI_API_KEY": "sk-test",
    }
    return work, env


def infai(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infai", "run", "--allow", "bash", *args],
        cwd=work, env=env, capture_output=True, text=True, timeout=WAIT, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def kill_when(work: Path, env: dict[str, str], reached: Any) -> None:
    """Start a turn, SIGKILL it once ``reached()`` says it is where it should die."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "infai", "run", "--allow", "bash", "please do it"],
        cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + WAIT
    while not reached():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the turn never got there: {proc.communicate()[1]}")
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=WAIT)


def markers(store: Store, sid: str) -> int:
    count = 0
    with store.open_reader(sid) as reader:
        for entry in reader.entries():
            record = reader.event(entry.id, resolve=True).record
            if isinstance(record, MessageRecord) and record.metadata.get("interrupted") is True:
                count += 1
    return count


@pytest.mark.crash
@pytest.mark.parametrize("where", ["generation", "tool"])
def test_a_killed_turn_is_said_to_the_model_and_recorded_once(tmp_path: Path, where: str) -> None:
    if where == "generation":  # the reply streams slowly: the kill lands in it
        first = Reply(text="a long answer that never ends", pause=0.5)
    else:  # a tool that runs until killed
        command = "echo started > started; sleep 30"
        first = Reply(tool_calls=[("call_1", "bash", {"command": command})])
    with FakeOpenAI([first, Reply(text="picked up"), Reply(text="still fine")]) as fake:
        work, env = setup(tmp_path, fake)
        if where == "generation":
            kill_when(work, env, lambda: len(fake.requests) == 1)
        else:
            kill_when(work, env, (work / "started").exists)
        store = Store(tmp_path / "home")
        [info] = store.list_sessions()
        sid = info.id
        assert markers(store, sid) == 0  # a killed process records nothing

        again = infai(work, env, "--session", sid, "go on")
        assert again.returncode == 0, again.stderr
        assert "picked up" in again.stdout
        sent = [m for m in fake.requests[1].body["messages"] if m["role"] != "system"]
        roles = [m["role"] for m in sent]
        assert not any(a == b == "user" for a, b in itertools.pairwise(roles)), roles
        if where == "generation":
            assert roles == ["user"]
            assert sent[0]["content"] == f"please do it\n\n{INTERRUPTED_NOTE}\n\ngo on"
        else:
            assert roles == ["user", "assistant", "tool", "user"]
            assert sent[2]["content"] == INTERRUPTED  # the call's result, said for it
            assert sent[3]["content"] == f"{INTERRUPTED_NOTE}\n\ngo on"
        assert markers(store, sid) == 1

        third = infai(work, env, "--session", sid, "and then")
        assert third.returncode == 0, third.stderr
        assert markers(store, sid) == 1  # reopened: recorded once
    assert store.fsck(sid).ok

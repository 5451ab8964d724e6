"""``infai run`` started as a script starts a background job (``sh -c 'infai run ... &'``:
SIGINT and SIGQUIT inherited as ignored) still stops its turn on SIGINT, SIGTERM
and SIGHUP, as the README promises: the turn is marked interrupted and the exit
code is 130. The model is the fake OpenAI server (tests/support/fakeapi.py),
streaming slowly, so the signal lands mid-reply."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fakeapi import FakeOpenAI, Reply
from infai.agent.loop import INTERRUPTED_TURN
from infai.store import MessageRecord, Store

#: the job is started as ``sh -c`` starts one: in the background, non-interactive
BACKGROUND = '"$@" >"$OUT" 2>"$ERR" </dev/null & echo $! >"$PIDFILE"; wait $!'


def _wait_for(
    what: str, done: Callable[[], object], proc: subprocess.Popen[bytes], err: Path
) -> None:
    deadline = time.monotonic() + 30
    while not done():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what} never happened: {err.read_text()}")
        time.sleep(0.02)


def test_sh_starts_background_jobs_with_sigint_ignored() -> None:
    """What the test below relies on: the job inherits SIGINT ignored (infai's own
    handler is in place by the time it streams, so it is seen here, in ``grep``)."""
    status = ["sh", "-c", "grep '^SigIgn:' /proc/self/status & wait $!"]
    mask = int(subprocess.run(status, capture_output=True, text=True).stdout.split()[1], 16)
    assert mask & (1 << (signal.SIGINT - 1))


@pytest.mark.parametrize(
    "signum",
    [
        signal.SIGINT,
        # covered for a job started with SIGINT ignored in test_agent_crash too
        pytest.param(signal.SIGTERM, marks=pytest.mark.crash),
        pytest.param(signal.SIGHUP, marks=pytest.mark.crash),
    ],
)
def test_a_background_run_stops_its_turn_on_each_signal(tmp_path: Path, signum: int) -> None:
    slow = Reply(text="a slow answer that takes its time " * 6, pause=0.5)
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    out, err, pidfile = tmp_path / "out", tmp_path / "err", tmp_path / "pid"
    with FakeOpenAI([slow]) as fake:
        config = tmp_path / "config.toml"
        config.write_text(
            'model = "local"\n[models.local]\nprovider = "openai"\nmodel = "m"\n'
            f'base_url = "{fake.base_url}"\ncontext_window = 32768\n'
        )
        env = {
            **os.environ, "INFAI_CONFIG": str(config), "INFAI_HOME": str(home),
            "OPENAI_API_KEY": "sk-test", "OUT": str(out), "ERR": str(err),
            "PIDFILE": str(pidfile),
        }  # fmt: skip
        command = [sys.executable, "-m", "infai", "run", "tell me"]
        shell = subprocess.Popen(["sh", "-c", BACKGROUND, "sh", *command], cwd=work, env=env)
        try:
            _wait_for("the start", lambda: pidfile.exists() and pidfile.read_text(), shell, err)
            pid = int(pidfile.read_text())
            _wait_for("the first words", lambda: out.exists() and out.read_text(), shell, err)
            os.kill(pid, signum)
            code = shell.wait(timeout=20)  # ``wait $!``: the job's own exit code
        finally:
            if shell.poll() is None:
                shell.kill()
                shell.wait()
    assert code == 130, err.read_text()
    assert "interrupted (session" in err.read_text()
    store = Store(home)
    [info] = store.list_sessions()
    with store.open_reader(info.id) as reader:
        records = [e.record for e in reader.context().events if e.kind == "message"]
    prompt, cut, marker = records
    assert isinstance(prompt, MessageRecord) and prompt.content == "tell me"
    assert isinstance(cut, MessageRecord) and cut.stop_reason == "interrupted"
    assert cut.content.startswith("a slow answer") and len(cut.content) < len(slow.text)
    assert isinstance(marker, MessageRecord) and marker.content == INTERRUPTED_TURN
    assert marker.metadata.get("interrupted") is True

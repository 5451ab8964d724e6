"""``infai run`` and ``infai chat`` started as a script starts a background job
(``sh -c 'infai run ... &'``: SIGINT and SIGQUIT inherited as ignored) still stop
their turn on SIGINT, SIGTERM and SIGHUP, as the README promises: the turn is
marked interrupted; ``run`` exits 130, ``chat`` goes on after SIGINT and exits
130 after the others. The model is the fake OpenAI server
(tests/support/fakeapi.py), streaming slowly, so the signal lands mid-reply."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from fakeapi import FakeOpenAI, Reply
from infai.agent.loop import INTERRUPTED_TURN
from infai.store import MessageRecord, Store

#: the job is started as ``sh -c`` starts one: in the background, non-interactive
BACKGROUND = '"$@" >"$OUT" 2>"$ERR" <"$IN" & echo $! >"$PIDFILE"; wait $!'
#: twelve pieces half a second apart: seconds of answer left once the first words
#: are out, for the signal to land in however loaded the machine
SLOW = Reply(text="a slow answer that takes its time " * 6, pieces=12, pause=0.5)


def test_sh_starts_background_jobs_with_sigint_ignored() -> None:
    """What the tests below rely on: the job inherits SIGINT ignored (infai's own
    handler is in place by the time it streams, so it is seen here, in ``grep``)."""
    status = ["sh", "-c", "grep '^SigIgn:' /proc/self/status & wait $!"]
    mask = int(subprocess.run(status, capture_output=True, text=True).stdout.split()[1], 16)
    assert mask & (1 << (signal.SIGINT - 1))


@dataclass
class Job:
    shell: subprocess.Popen[bytes]
    pid: int
    out: Path
    err: Path
    home: Path
    #: the write end of the job's standard input (a FIFO)
    stdin: int

    def wait_for(self, what: str, done: Callable[[], object]) -> None:
        deadline = time.monotonic() + 30
        while not done():
            if self.shell.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{what} never happened: {self.err.read_text()}")
            time.sleep(0.02)

    def started_answering(self) -> None:
        self.wait_for("the first words", lambda: self.out.read_text())

    def records(self) -> list[MessageRecord]:
        store = Store(self.home)
        [info] = store.list_sessions()
        with store.open_reader(info.id) as reader:
            events = reader.context().events
        return [e.record for e in events if isinstance(e.record, MessageRecord)]


@contextmanager
def background(tmp_path: Path, *args: str, replies: list[Reply]) -> Iterator[Job]:
    """``infai ARGS`` started by ``sh -c '... &'``, its model the fake server."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    out, err, pidfile, fifo = (tmp_path / name for name in ("out", "err", "pid", "in"))
    out.touch()
    os.mkfifo(fifo)
    stdin = os.open(fifo, os.O_RDWR)  # never blocks; the job reads what is written
    with FakeOpenAI(replies) as fake:
        config = tmp_path / "config.toml"
        config.write_text(
            'model = "local"\n[models.local]\nprovider = "openai"\nmodel = "m"\n'
            f'base_url = "{fake.base_url}"\ncontext_window = 32768\n'
        )
        env = {
            **os.environ, "INFAI_CONFIG": str(config), "INFAI_HOME": str(home),
            "OPENAI_API_KEY": "sk-test", "OUT": str(out), "ERR": str(err),
            "PIDFILE": str(pidfile), "IN": str(fifo),
        }  # fmt: skip
        command = [sys.executable, "-m", "infai", *args]
        shell = subprocess.Popen(["sh", "-c", BACKGROUND, "sh", *command], cwd=work, env=env)
        try:
            job = Job(shell, 0, out, err, home, stdin)
            job.wait_for("the start", lambda: pidfile.exists() and pidfile.read_text())
            job.pid = int(pidfile.read_text())
            yield job
        finally:
            os.close(stdin)
            if shell.poll() is None:
                os.kill(job.pid, signal.SIGKILL)
                shell.wait()


def assert_interrupted(records: list[MessageRecord], prompt: str) -> None:
    """The prompt, what had streamed (marked interrupted), then the marker."""
    first, cut, marker = records[:3]
    assert first.content == prompt
    assert cut.stop_reason == "interrupted"
    assert cut.content.startswith("a slow answer") and len(cut.content) < len(SLOW.text)
    assert marker.content == INTERRUPTED_TURN and marker.metadata.get("interrupted") is True


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
    with background(tmp_path, "run", "tell me", replies=[SLOW]) as job:
        job.started_answering()
        os.kill(job.pid, signum)
        code = job.shell.wait(timeout=20)  # ``wait $!``: the job's own exit code
    assert code == 130, job.err.read_text()
    assert "interrupted (session" in job.err.read_text()
    records = job.records()
    assert len(records) == 3
    assert_interrupted(records, "tell me")


def test_a_background_chat_stops_the_answer_on_sigint_and_goes_on(tmp_path: Path) -> None:
    with background(tmp_path, "chat", replies=[SLOW]) as job:
        os.write(job.stdin, b"tell me\n")
        job.started_answering()
        os.kill(job.pid, signal.SIGINT)
        job.wait_for("the interruption", lambda: "interrupted" in job.err.read_text())
        os.write(job.stdin, b"/quit\n")
        code = job.shell.wait(timeout=20)
    assert code == 0, job.err.read_text()
    assert "come back with" in job.err.read_text()
    assert_interrupted(job.records(), "tell me")


@pytest.mark.crash
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_background_chat_stops_and_ends_on_sigterm_or_sighup(tmp_path: Path, signum: int) -> None:
    with background(tmp_path, "chat", replies=[SLOW]) as job:
        os.write(job.stdin, b"tell me\n")
        job.started_answering()
        os.kill(job.pid, signum)
        code = job.shell.wait(timeout=20)
    assert code == 130, job.err.read_text()
    assert "come back with" in job.err.read_text()
    assert_interrupted(job.records(), "tell me")

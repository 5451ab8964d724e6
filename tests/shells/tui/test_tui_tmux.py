"""The real ``infai`` command in a real terminal: tmux at 80x24, driven by keystrokes.

The pilot tests drive the app inside the test process; these start the console
script as a user would (plain ``infai`` opens the TUI), in a detached tmux
session on a socket of its own, with the offline model and a store under tmp.
They read the screen with ``capture-pane`` and wait on what it shows (polling
against a deadline), then check what the store holds after a clean quit
(Ctrl-C twice), after the process is killed with SIGKILL, and after a
multi-line paste (tmux's bracketed paste, as a terminal sends it).

tmux is required: CI installs it, and a machine without it fails here loudly
rather than skipping the only test of the real terminal.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from infai.store import MessageRecord, Store
from tmux_term import session_open

INFAI = Path(sys.executable).parent / "infai"
SESSION = "infai"
PLACEHOLDER = "Ask infai"
REPLY = "offline model: you said"
PROMPT = "hello from tmux"
STARTUP = 15.0  # seconds for the interpreter to import everything and draw
WAIT = 10.0  # seconds; generous (each wait returns once it holds): CI machines are noisy


def tmux_binary() -> str:
    found = shutil.which("tmux") or ("/usr/bin/tmux" if Path("/usr/bin/tmux").exists() else None)
    if found is None:
        pytest.fail(
            "tmux is not installed: the real-terminal tests of the TUI need it "
            "(apt-get install tmux); they fail rather than skip so CI cannot lose them"
        )
    return found


class Terminal:
    """``infai`` running in a detached 80x24 tmux session on a private socket."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmux = ""  # found by start(), in the test itself: a missing tmux fails it
        self.socket = f"infai-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.home = tmp_path / "home"
        # no user configuration: file snapshots on, as for a user (a turn starts by
        # recording the files of the empty working directory)
        self.config = tmp_path / "none.toml"
        self.config.write_text("")
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.conf = tmp_path / "tmux.conf"
        # remain-on-exit keeps the pane after infai ends, so that it can be inspected
        self.conf.write_text("set -g remain-on-exit on\nset -g default-shell /bin/sh\n")
        self.env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        self.env |= {"INFAI_HOME": str(self.home), "INFAI_CONFIG": str(self.config)}
        self.pid = 0

    def run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            [self.tmux, "-L", self.socket, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=10,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def start(self, status_file: Path | None = None) -> None:
        """Start infai: exec'd as the pane's process, or (``status_file``) under a shell
        that writes infai's exit status there once it ends."""
        self.tmux = tmux_binary()
        assert INFAI.exists(), f"the console script is missing: {INFAI}"
        infai = shlex.quote(str(INFAI))
        if status_file is None:
            command = f"exec {infai}"
        else:
            command = f"{infai}; echo $? > {shlex.quote(str(status_file))}"
        self.run(
            "-f", str(self.conf),
            "new-session", "-d", "-s", SESSION, "-x", "80", "-y", "24", "-c", str(self.work),
            "-e", f"INFAI_HOME={self.home}",
            "-e", f"INFAI_CONFIG={self.config}",
            command,
        )  # fmt: skip
        self.pid = int(self.pane("pane_pid"))

    def pane(self, field: str) -> str:
        return self.run("list-panes", "-t", SESSION, "-F", f"#{{{field}}}").strip()

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", SESSION)

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.run("send-keys", "-t", SESSION, *(["-l"] if literal else []), *keys)

    def wait_for(self, condition: Callable[[str], bool], what: str, timeout: float = WAIT) -> str:
        """Poll the screen until ``condition`` holds; fail showing the last screen."""
        deadline = time.monotonic() + timeout
        while True:
            shown = self.screen()
            if condition(shown):
                return shown
            if time.monotonic() > deadline or self.pane("pane_dead") == "1":
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{shown}")
            time.sleep(0.05)

    def wait_ended(self, timeout: float = WAIT) -> None:
        """Wait until the pane's process has ended and its pty is closed.

        tmux's own ``pane_dead_status`` is not waited for: tmux 3.3a at times
        leaves the ended process a zombie it never reaps, and the status empty.
        """
        deadline = time.monotonic() + timeout
        while self.pane("pane_dead") != "1" or not ended(self.pid):
            if time.monotonic() > deadline:
                raise AssertionError(f"infai did not end; the screen:\n{self.screen()}")
            time.sleep(0.05)

    def close(self) -> None:
        if not self.tmux:
            return
        path = self.run("display-message", "-p", "#{socket_path}", check=False).strip()
        self.run("kill-server", check=False)
        if path:
            Path(path).unlink(missing_ok=True)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path)
    try:
        yield term
    finally:
        term.close()


def answered(shown: str) -> bool:
    """The whole reply is on screen and the status bar says it is saved."""
    return REPLY in shown and "answers." in shown and "✓ saved" in shown


def prompt_and_reply(term: Terminal, status_file: Path | None = None) -> None:
    term.start(status_file)
    term.wait_for(session_open, "the prompt and the session", timeout=STARTUP)
    term.keys(PROMPT, literal=True)
    term.keys("Enter")
    shown = term.wait_for(answered, "the offline model's reply, saved")
    assert f"you said '{PROMPT}'" in " ".join(shown.split())


def stored_messages(store: Store) -> tuple[str, list[str]]:
    [info] = store.list_sessions()
    with store.open_reader(info.id) as reader:
        records = [event.record for event in reader.context().events]
    return info.id, [r.content for r in records if isinstance(r, MessageRecord)]


def ended(pid: int) -> bool:
    """Whether the process has exited (gone, or a zombie not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def until(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_prompt_then_ctrl_c_twice_quits_and_the_session_is_saved(
    terminal: Terminal, tmp_path: Path
) -> None:
    status = tmp_path / "status"
    prompt_and_reply(terminal, status)
    terminal.keys("C-c")
    # the turn is over, so the first Ctrl-C only arms the quit (no cancellation)
    terminal.wait_for(lambda s: "again to quit" in s, "the first Ctrl-C's hint")
    assert "cancelled" not in terminal.screen()
    terminal.keys("C-c")
    until(lambda: status.exists() and status.read_text().endswith("\n"), "infai to exit")
    assert status.read_text() == "0\n"  # infai's exit status
    terminal.wait_ended()  # and the command in the pane has ended
    [info] = Store(terminal.home).list_sessions()
    # what infai printed as it left (wrapped lines joined, scrolled-off ones included)
    shown = terminal.run("capture-pane", "-p", "-J", "-S", "-", "-t", SESSION)
    assert f"come back with: infai --session {info.id}" in shown, shown

    store = Store(terminal.home)
    session_id, contents = stored_messages(store)
    assert contents[0] == PROMPT
    assert contents[1].startswith(f"{REPLY} '{PROMPT}'")
    assert len(contents) == 2
    assert store.info(session_id).working_dir == str(terminal.work.resolve())
    assert store.fsck(session_id).ok


def test_sigkill_after_the_reply_is_saved_loses_nothing(terminal: Terminal) -> None:
    prompt_and_reply(terminal)
    # exec'd by the pane's shell: the pane's process is infai itself
    assert "infai" in Path(f"/proc/{terminal.pid}/cmdline").read_text()
    os.kill(terminal.pid, signal.SIGKILL)
    terminal.wait_ended()

    store = Store(terminal.home)
    session_id, contents = stored_messages(store)
    assert contents[0] == PROMPT
    assert contents[1].startswith(f"{REPLY} '{PROMPT}'")
    assert len(contents) == 2
    with store.open_writer(session_id, timeout=5) as writer:  # the dead writer's lock is free
        assert session_id in store.recovery_notes  # recovery ran on open
        assert writer.count == 3  # the turn's files snapshot, the prompt, the reply
        assert [e.kind for e in writer.path()] == ["snapshot", "message", "message"]
        assert [e.role for e in writer.path()][1:] == ["user", "assistant"]
    assert store.fsck(session_id).ok


def test_a_multi_line_paste_reaches_the_session_whole(terminal: Terminal, tmp_path: Path) -> None:
    status = tmp_path / "status"
    terminal.start(status)
    terminal.wait_for(session_open, "the prompt and the session", timeout=STARTUP)
    trace = 'Traceback (most recent call last):\n  File "app.py", line 3\nValueError: bad'
    terminal.run("set-buffer", "-b", "trace", trace)
    terminal.run(
        "paste-buffer", "-p", "-b", "trace", "-t", SESSION
    )  # bracketed, as a terminal does
    terminal.wait_for(lambda s: "[pasted 3 lines]" in s, "the paste, kept whole")
    terminal.keys("Enter")
    terminal.wait_for(lambda s: "you said 'Traceback" in " ".join(s.split()), "the reply")
    terminal.wait_for(lambda s: "✓ saved" in s, "the reply, saved")
    terminal.keys("C-c")
    terminal.wait_for(lambda s: "again to quit" in s, "the first Ctrl-C's hint")
    terminal.keys("C-c")
    until(lambda: status.exists() and status.read_text().endswith("\n"), "infai to exit")
    _, contents = stored_messages(Store(terminal.home))
    assert contents[0] == trace


def test_typing_ahead_after_enter_and_a_paste_without_brackets_stay_whole(
    terminal: Terminal, tmp_path: Path
) -> None:
    """Bug 5 of issue 13: keys typed right after Enter start the next prompt (they
    were merged into the one sent, or wiped); a paste that arrives as keys (tmux's
    paste-buffer without -p: its line breaks are carriage returns, as Enter) is
    one prompt, not cut at its first line."""
    status = tmp_path / "status"
    terminal.start(status)
    terminal.wait_for(session_open, "the prompt and the session", timeout=STARTUP)
    terminal.keys("prompt1", literal=True)
    terminal.keys("Enter")
    # a fast typist's gap, no wait for the app to have handled Enter; not shorter: the
    # keys are stamped as the terminal is read, and on a loaded machine a read can be
    # late by tens of milliseconds, which would make Enter and XYZ one paste
    time.sleep(0.3)
    terminal.keys("XYZ", literal=True)
    shown = terminal.wait_for(lambda s: "you said 'prompt1'" in s, "the first reply")
    terminal.wait_for(lambda s: "XYZ" in s.split("you said")[-1], "XYZ, in the prompt box")
    assert "prompt1XYZ" not in shown
    terminal.keys("Enter")
    terminal.wait_for(lambda s: "you said 'XYZ'" in s, "the typed-ahead prompt's reply")
    terminal.run("set-buffer", "-b", "lines", "one\ntwo\nthree\n")
    terminal.run("paste-buffer", "-b", "lines", "-t", SESSION)  # no -p: keys, no brackets
    terminal.wait_for(lambda s: "you said 'one" in s, "the pasted prompt's reply")
    terminal.wait_for(lambda s: "✓ saved" in s, "saved")
    terminal.keys("C-c")
    terminal.wait_for(lambda s: "again to quit" in s, "the first Ctrl-C's hint")
    terminal.keys("C-c")
    until(lambda: status.exists() and status.read_text().endswith("\n"), "infai to exit")
    _, contents = stored_messages(Store(terminal.home))
    assert contents[0::2] == ["prompt1", "XYZ", "one\ntwo\nthree"]

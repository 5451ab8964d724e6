"""The real ``infai`` command in a detached tmux session of a given size.

Like the harness of ``test_tui_tmux.py`` (a private socket, a store and an
empty config under tmp, the screen read with ``capture-pane`` and polled
against a deadline), with the terminal's size a parameter, a user config
given as text, and helpers to send a burst of keys in one ``send-keys`` (tmux
writes them to the pty at once, as a fast typist or a paste would).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

INFAI = Path(sys.executable).parent / "infai"
SESSION = "infai"
PLACEHOLDER = "Ask infai…"
#: the status bar's notice while the session opens (after the first frame)
OPENING = "opening"
STARTUP = 15.0  # seconds for the interpreter to import everything and draw
WAIT = 10.0  # seconds; generous: CI machines are shared and noisy
#: the sizes the real-terminal tests of the prompt box run at
SIZES = [(100, 30), (60, 20)]


def tmux_binary() -> str:
    found = shutil.which("tmux") or ("/usr/bin/tmux" if Path("/usr/bin/tmux").exists() else None)
    if found is None:
        pytest.fail(
            "tmux is not installed: the real-terminal tests of the TUI need it "
            "(apt-get install tmux); they fail rather than skip so CI cannot lose them"
        )
    return found


class Terminal:
    """``infai`` running in a detached tmux session of ``size`` on a private socket."""

    def __init__(self, tmp_path: Path, size: tuple[int, int], config: str = "") -> None:
        self.tmux = ""
        self.size = size
        self.socket = f"infai-keys-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.home = tmp_path / "home"
        self.config = tmp_path / "config.toml"
        self.config.write_text(config)
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.conf = tmp_path / "tmux.conf"
        self.conf.write_text("set -g remain-on-exit on\nset -g default-shell /bin/sh\n")
        # Textual takes COLUMNS and LINES over the pane's size (pytest-xdist's workers
        # may have them set): left out, or a 60x20 pane is drawn as a bigger screen
        dropped = ("TMUX", "TMUX_PANE", "COLUMNS", "LINES")
        self.env = {k: v for k, v in os.environ.items() if k not in dropped}
        self.env |= {"INFAI_HOME": str(self.home), "INFAI_CONFIG": str(self.config)}

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

    def start(self, *args: str, opened: bool = True) -> None:
        """Start infai (exec'd as the pane's process; ``args``: its command line)
        and wait for the prompt box and the session (which opens after the first
        frame; ``opened=False``: the prompt box only)."""
        self.tmux = tmux_binary()
        assert INFAI.exists(), f"the console script is missing: {INFAI}"
        width, height = self.size
        self.run(
            "-f", str(self.conf),
            "new-session", "-d", "-s", SESSION, "-x", str(width), "-y", str(height),
            "-c", str(self.work),
            "-e", f"INFAI_HOME={self.home}",
            "-e", f"INFAI_CONFIG={self.config}",
            " ".join(["exec", *map(shlex.quote, (str(INFAI), *args))]),
        )  # fmt: skip
        if opened:
            self.wait_for(session_open, "the prompt and the session", timeout=STARTUP)
        else:  # the first frame only: the session may still be opening
            self.wait_for(lambda s: PLACEHOLDER in s, "the prompt", timeout=STARTUP)

    def pane(self, field: str) -> str:
        return self.run("list-panes", "-t", SESSION, "-F", f"#{{{field}}}").strip()

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", SESSION)

    def burst(self, *keys: str) -> None:
        """Send ``keys`` in one ``send-keys``: a word is typed as text, a tmux key
        name (``Enter``, ``C-j``, ``Escape``…) as that key; all reach the pty at once."""
        self.run("send-keys", "-t", SESSION, *keys)

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

    def close(self) -> None:
        if not self.tmux:
            return
        path = self.run("display-message", "-p", "#{socket_path}", check=False).strip()
        self.run("kill-server", check=False)
        if path:
            Path(path).unlink(missing_ok=True)


def user_prompts(term: Terminal) -> list[str]:
    """The user's prompts the store of ``term``'s one session holds on the path to
    HEAD, oldest first."""
    from infai.store import MessageRecord, Store

    store = Store(term.home)
    [info] = store.list_sessions()
    with store.open_reader(info.id) as reader:
        events = reader.context().events
    return [
        e.record.content for e in events if e.role == "user" and isinstance(e.record, MessageRecord)
    ]


def opening(shown: str) -> bool:
    """The status bar (in the last lines) says the session is still opening."""
    return OPENING in "".join(shown.splitlines()[-3:])


def session_open(shown: str) -> bool:
    """The (empty) prompt box is drawn and the session is open."""
    return PLACEHOLDER in shown and not opening(shown)


def flat(shown: str) -> str:
    """The screen's text with each run of whitespace one space (wrapped lines joined)."""
    return " ".join(shown.split())


def composer_lines(shown: str) -> list[str]:
    """The prompt box's text lines, as drawn between its top and bottom border
    (the box grows with its text; a long line wraps onto the next; a run of two
    spaces ends a line's text)."""
    lines = shown.splitlines()
    top = next((n for n, line in enumerate(lines) if line.startswith("▊▔")), None)
    if top is None:
        return []
    out: list[str] = []
    for line in lines[top + 1 :]:
        if line.startswith("▊▁"):
            break
        inner = line.removeprefix("▊").rstrip().removesuffix("▎").strip()
        out.append(re.split(r"\s{2,}", inner)[0])  # not the scrollbar's thumb at its right
    return [] if out[:1] == [PLACEHOLDER] else out

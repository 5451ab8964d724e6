"""The first run (issue 25): `infai` with no config file yet offers to set up a model
before the UI opens, in a real terminal (tmux), as a new user meets it: their
own home (``HOME``, ``XDG_CONFIG_HOME`` under tmp, no ``$INFAI_CONFIG``)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tmux_term import PLACEHOLDER, tmux_binary

INFAI = Path(sys.executable).parent / "infai"


class FirstRun:
    """`infai` in a detached 100x30 tmux session, with a home of its own."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmux = tmux_binary()
        self.socket = f"infai-first-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        home = tmp_path / "home"
        self.config = home / ".config" / "infai" / "config.toml"
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("TMUX", "TMUX_PANE") and not k.startswith("INFAI_")
        }
        self.env |= {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "INFAI_HOME": str(tmp_path / "store"),
        }

    def tmux_run(self, *args: str) -> str:
        return subprocess.run(
            [self.tmux, "-L", self.socket, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=10,
            check=False,
        ).stdout

    def start(self) -> None:
        self.socket = f"infai-first-{os.getpid()}-{uuid.uuid4().hex[:8]}"  # a server of its own
        self.tmux_run(
            "new-session", "-d", "-s", "first", "-x", "100", "-y", "30", "-c", str(self.work),
            f"exec {shlex.quote(str(INFAI))}",
        )  # fmt: skip

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.tmux_run("capture-pane", "-p", "-t", "first")
            if text in shown:
                return shown
            assert time.monotonic() < deadline, f"no {text!r} on the screen:\n{shown}"
            time.sleep(0.05)

    def type(self, text: str) -> None:
        self.tmux_run("send-keys", "-t", "first", "-l", text)
        self.tmux_run("send-keys", "-t", "first", "Enter")

    def quit(self) -> None:
        self.tmux_run("send-keys", "-t", "first", "C-c")
        self.tmux_run("send-keys", "-t", "first", "C-c")

    def close(self) -> None:
        self.tmux_run("kill-server")


@pytest.fixture
def first(tmp_path: Path) -> Iterator[FirstRun]:
    term = FirstRun(tmp_path)
    try:
        yield term
    finally:
        term.close()


def test_the_first_run_sets_up_a_model_then_opens_the_ui_on_it(first: FirstRun) -> None:
    first.start()
    first.wait_for("Set up a model now?")
    first.type("y")
    first.wait_for("Provider")
    first.type("ollama")
    first.wait_for("Model")
    first.type("llama3.1")
    shown = first.wait_for(PLACEHOLDER)
    assert "ollama" in shown  # the status bar names the model just set up
    table = tomllib.loads(first.config.read_text())
    assert table["model"] == "ollama" and table["models"]["ollama"]["model"] == "llama3.1"


def test_a_no_is_asked_once_and_leaves_the_offline_model(first: FirstRun) -> None:
    first.start()
    first.wait_for("Set up a model now?")
    first.type("n")
    shown = first.wait_for(PLACEHOLDER)
    assert "offline" in shown
    assert "infai config model" in first.config.read_text()
    first.quit()
    first.close()
    first.start()  # the second run opens the UI at once
    shown = first.wait_for(PLACEHOLDER)
    assert "Set up a model" not in shown

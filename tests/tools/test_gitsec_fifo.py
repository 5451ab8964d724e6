"""Red team (gitsec): a FIFO in a read-only part of the working directory.

``.git/``, ``.infai/`` and the git config files the repository includes are
mounted read-only in the sandbox, but a read-only mount does not stop a write
into a FIFO (it changes no file system), and Landlock allows writing beneath the
working directory: a command wrote into a FIFO there, and the reader outside got
it (the user's ``git status`` reading an included config that is a FIFO runs the
``core.fsmonitor`` a command feeds it; infai reading a ``.infai/config.toml``
that is one takes where to send the user's prompts). A confined command cannot
make such a FIFO (the mount is read-only), but one may be there already: made
before the path was read-only, by an unconfined command, or unpacked.

Judged by effect: what the reader outside gets."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)


def _run(command: str, wd: Path) -> str:
    tool = Bash(sandbox=Sandbox(SandboxSettings(mode="required")))
    return asyncio.run(tool.run({"command": command}, ToolContext(wd, "s"))).content


@pytest.mark.parametrize(
    "fifo", [".git/ctl.fifo", ".git/hooks/deep/x.fifo", ".infai/config.toml", "inc.cfg"]
)
def test_a_fifo_in_a_read_only_part_gets_nothing_written_into_it(tmp_path: Path, fifo: str) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with (tmp_path / ".git" / "config").open("a") as config:
        config.write("[include]\n\tpath = ../inc.cfg\n")
    path = tmp_path / fifo
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a reader waits: a writer may open
    try:
        out = _run(f"echo '[core] fsmonitor = evil' > {fifo}; echo wrote=$?", tmp_path)
        try:
            got = os.read(reader, 100)
        except BlockingIOError:
            got = b""
    finally:
        os.close(reader)
    assert got == b"", out
    assert "wrote=1" in out


def test_a_fifo_in_the_writable_part_is_still_written(tmp_path: Path) -> None:
    """The working directory itself stays writable, a FIFO in it too."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    os.mkfifo(tmp_path / "mine.fifo")
    out = _run("cat mine.fifo & echo through > mine.fifo; wait", tmp_path)  # waits for cat
    assert "through" in out

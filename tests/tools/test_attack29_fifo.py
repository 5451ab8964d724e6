"""Red team: a FIFO outside the writable roots, written through the read-only mount.

A read-only bind mount refuses to change a file system; writing into a named
pipe changes none, so ``echo cmd > /var/run/x/ctl.fifo`` reached the process
outside that reads it (a control FIFO, a shell loop ``while read l < fifo``).
Judged by effect: what the reader outside gets.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory the sandbox shows read-only (not /tmp, which is its own; not the
    home directory, which it hides)."""
    where = "/var/tmp" if os.access("/var/tmp", os.W_OK) else os.getcwd()
    path = Path(tempfile.mkdtemp(prefix="infai-fifo-", dir=where))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _run(command: str, wd: Path) -> str:
    tool = Bash(sandbox=Sandbox(SandboxSettings(mode="required")))
    return asyncio.run(tool.run({"command": command}, ToolContext(wd, "s"))).content


def test_a_fifo_outside_gets_nothing_written_into_it(outside: Path, tmp_path: Path) -> None:
    fifo = outside / "ctl.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader waits: a writer may open
    try:
        out = _run(f"echo 'rm -rf ~' > {fifo}; echo wrote=$?", tmp_path)
        try:
            got = os.read(reader, 100)
        except BlockingIOError:
            got = b""
    finally:
        os.close(reader)
    assert got == b"", out
    assert "wrote=1" in out and "Permission denied" in out


def test_what_a_command_may_write_it_still_writes(outside: Path, tmp_path: Path) -> None:
    """Inside the working directory (a FIFO there too), the private /tmp, /dev/null
    and its own output; a file outside is refused as a read-only file system."""
    os.mkfifo(tmp_path / "mine.fifo")
    command = (
        "echo a > inside.txt; echo b > /tmp/t; cat /tmp/t; echo c > /dev/null; "
        "echo d > /dev/stdout; (cat mine.fifo &) ; echo e > mine.fifo; wait; "
        f"echo f > {outside}/x.txt"
    )
    out = _run(command, tmp_path)
    assert (tmp_path / "inside.txt").read_text() == "a\n"
    assert all(f"{letter}\n" in out for letter in "bde"), out
    assert "Read-only file system" in out and not (outside / "x.txt").exists()


def test_an_mcp_servers_process_writes_no_fifo_outside(outside: Path, tmp_path: Path) -> None:
    """A stdio MCP server starts through :meth:`Sandbox.launch_argv`: the same rule."""
    fifo = outside / "ctl.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    sandbox = Sandbox(SandboxSettings(mode="required"))
    launch = sandbox.launch_argv(["/bin/sh", "-c", f"echo x > {fifo}; echo wrote=$?"], tmp_path)
    try:
        done = subprocess.run(
            launch.argv,
            env=launch.env,
            pass_fds=launch.fds,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=30,
        )
    finally:
        launch.close()
    try:
        got = os.read(reader, 100)
    except BlockingIOError:
        got = b""
    finally:
        os.close(reader)
    assert got == b"" and "Permission denied" in done.stderr, done.stdout + done.stderr

"""The write budget of a sandboxed command, judged by what reaches the disk.

Each command runs through the ``bash`` tool under a real bubblewrap with a
small budget (16 MiB) and asks for far more (2 GiB); the test looks at the
files it left and the result the model gets. Controls show the same command
is not limited within the budget, with the budget off, or outside the sandbox.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext, ToolOutput
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)

MIB = 1 << 20
BUDGET = 16 * MIB
#: 512 files of 4 MiB, 2 GiB in all: no single one is past the budget
MANY_FILES = (
    "i=0; while [ $i -lt 512 ]; do i=$((i+1)); "
    "dd if=/dev/zero of=f$i bs=1M count=4 2>/dev/null || exit 9; done; echo all written"
)
ONE_FILE = "dd if=/dev/zero of=big bs=1M count=2048"


def bash(wd: Path, command: str, budget: int | None = BUDGET, **args: Any) -> ToolOutput:
    tool = Bash(sandbox=Sandbox(SandboxSettings(write_budget=budget)))
    return asyncio.run(tool.run({"command": command, **args}, ToolContext(wd, "s")))


def on_disk(wd: Path) -> int:
    return sum(p.stat().st_size for p in wd.iterdir() if p.is_file())


@pytest.fixture
def wd(tmp_path: Path) -> Path:
    root = tmp_path / "wd"
    root.mkdir()
    return root


def test_a_command_writing_many_files_is_stopped_past_the_budget(wd: Path) -> None:
    started = time.monotonic()
    out = bash(wd, MANY_FILES)
    assert time.monotonic() - started < 30
    assert out.is_error
    assert "stopped: the command wrote more than 16 MiB to disk" in out.content
    assert "sandbox.write_budget" in out.content
    assert "all written" not in out.content
    # stopped soon after the budget: a little overshoot, nowhere near the 2 GiB
    assert BUDGET < on_disk(wd) <= BUDGET + 256 * MIB
    assert not (wd / "f512").exists()


def test_no_single_file_grows_past_the_budget(wd: Path) -> None:
    out = bash(wd, ONE_FILE)
    assert (wd / "big").stat().st_size == BUDGET  # refused by the kernel, exactly there
    assert out.is_error
    assert "no file a command writes may grow past 16 MiB" in out.content
    # a program that ignores SIGXFSZ (Python does) gets EFBIG and is told the same
    out = bash(wd, "python3 -c \"open('py', 'wb').write(bytes(40 << 20))\"")
    assert (wd / "py").stat().st_size <= BUDGET
    assert "File too large" in out.content and "may grow past 16 MiB" in out.content
    # nor can the command lift the limit (no capabilities in the sandbox, root or not)
    bash(wd, "ulimit -f unlimited; ulimit -H -f unlimited; dd if=/dev/zero of=again bs=1M count=40")
    assert (wd / "again").stat().st_size == BUDGET


def test_a_command_within_the_budget_is_unaffected(wd: Path) -> None:
    out = bash(wd, "dd if=/dev/zero of=a bs=1M count=6 2>/dev/null; cp a b; echo done")
    assert not out.is_error and out.content == "exit code 0\ndone\n"
    assert (wd / "a").stat().st_size == (wd / "b").stat().st_size == 6 * MIB


def test_tmp_and_dev_shm_hold_at_most_the_budget(wd: Path) -> None:
    """They are memory (tmpfs): without a size each could take half the RAM."""
    out = bash(
        wd,
        "df -B1 --output=size /tmp /dev/shm | tail -n 2; "
        "for d in /tmp /dev/shm; do i=0; while [ $i -lt 8 ]; do i=$((i+1)); "
        "dd if=/dev/zero of=$d/f$i bs=1M count=4 2>/dev/null; done; "
        "cat $d/f* | wc -c; done; echo x > /dev/planted",
    )
    lines = out.content.splitlines()
    sizes = [int(line) for line in lines[1:5]]
    assert sizes[:2] == [BUDGET, BUDGET]  # the file systems' size
    assert all(used <= BUDGET for used in sizes[2:])  # 32 MiB asked of each
    assert "No space left on device" not in out.content  # dd's errors went to /dev/null
    assert "/dev/planted: Read-only file system" in out.content  # the rest of /dev


def test_with_the_budget_off_nothing_is_limited(wd: Path) -> None:
    """The control: the same kind of command writes all it asks for."""
    out = bash(wd, "dd if=/dev/zero of=big bs=1M count=40 2>/dev/null; echo ok", budget=None)
    assert not out.is_error and (wd / "big").stat().st_size == 40 * MIB


def test_a_command_run_outside_the_sandbox_is_not_limited(wd: Path) -> None:
    out = bash(wd, "dd if=/dev/zero of=big bs=1M count=40 2>/dev/null", outside_sandbox=True)
    assert not out.is_error and (wd / "big").stat().st_size == 40 * MIB


def test_the_default_budget_is_eight_gib() -> None:
    assert SandboxSettings().write_budget == 8 << 30


def test_an_old_bwrap_without_size_still_runs_commands(wd: Path, tmp_path: Path) -> None:
    """bubblewrap before 0.8 has no ``--size``: the sandbox's memory file systems
    keep their default size, and every command still runs, with the other limits."""
    real = shutil.which("bwrap")
    old = tmp_path / "old-bwrap"
    old.write_text(
        "#!/bin/sh\n"
        'for a; do [ "$a" = --size ] && { echo "bwrap: Unknown option" >&2; exit 1; }; done\n'
        f'exec {real} "$@"\n'
    )
    old.chmod(0o755)
    sandbox = Sandbox(SandboxSettings(write_budget=BUDGET), bwrap=str(old))
    tool = Bash(sandbox=sandbox)
    out = asyncio.run(
        tool.run(
            {"command": "df -B1 --output=size /tmp | tail -n 1; " + ONE_FILE},
            ToolContext(wd, "s"),
        )
    )
    assert int(out.content.splitlines()[1]) > BUDGET  # not sized: the tmpfs default
    assert (wd / "big").stat().st_size == BUDGET  # the file limit holds all the same

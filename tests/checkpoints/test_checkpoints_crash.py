"""A restore killed with SIGKILL at random moments leaves, after recovery,
exactly the files before it or exactly the files of its target: never a half
state, no temporary file, no directory left over.

A child process (``tests/support/ckpt_child.py``) plans and applies a restore
between two snapshots that differ in every way (edits, removals, a new
directory, modes, links); the parent kills it after a random delay within the
time a restore takes, then recovers as the next open would and compares the
disk with both trees. Each round restores towards the other tree, so kills land
in both directions. A few kills run by default, the long loop under ``-m crash``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from ckpt_support import write
from infai.checkpoints import Checkpoints, Snapshotter, tree_files
from infai.store.file.objects import FileObjects

CHILD = Path(__file__).resolve().parent.parent / "support" / "ckpt_child.py"


def _two_trees(wd: Path, home: Path) -> tuple[str, str]:
    write(wd, [(f"d{i % 6}/f{i}.txt", f"version one of {i}\n" * 20) for i in range(120)])
    for i in range(3):
        os.symlink(f"d0/f{i * 6}.txt", wd / f"link{i}")
    objects = FileObjects(home)
    one = Snapshotter(objects, wd, home=home).snapshot().tree
    write(wd, [(f"d{i % 6}/f{i}.txt", f"version two of {i}\n") for i in range(0, 120, 10)])
    for i in range(1, 120, 20):
        (wd / f"d{i % 6}/f{i}.txt").unlink()
    write(wd, [(f"fresh/sub/n{i}.txt", f"new {i}\n") for i in range(5)])
    for i in range(2, 120, 40):
        (wd / f"d{i % 6}/f{i}.txt").chmod(0o755)
    for i in range(3):
        (wd / f"link{i}").unlink()
        os.symlink(f"d1/f{i * 6 + 1}.txt", wd / f"link{i}")
    two = Snapshotter(objects, wd, home=home).snapshot().tree
    return one, two


def _dirs(files: Mapping[str, object]) -> set[str]:
    out: set[str] = set()
    for path in files:
        parts = path.split("/")[:-1]
        out.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
    return out


def _disk_dirs(wd: Path) -> set[str]:
    return {str(Path(dp, d).relative_to(wd)) for dp, dirs, _ in os.walk(wd) for d in dirs}


def _run_child(home: Path, wd: Path, target: str, delay: float | None) -> float:
    """Run the child; kill it ``delay`` seconds after it is ready (``None``: let it
    finish). The seconds from ready to done (or to the kill)."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(home), str(wd), target],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "ready"
        start = time.monotonic()
        if delay is None:
            assert child.stdout.readline().strip() == "done"
        else:
            time.sleep(delay)
            child.send_signal(signal.SIGKILL)
        code = child.wait(timeout=60)
        assert delay is not None or code == 0
        return time.monotonic() - start
    finally:
        child.stdout.close()
        if child.poll() is None:
            child.kill()
            child.wait()


def _kill_loop(tmp_path: Path, kills: int, seed: int) -> dict[str, int]:
    wd, home = tmp_path / "wd", tmp_path / "home"
    one, two = _two_trees(wd, home)
    objects = FileObjects(home)
    files = {one: tree_files(objects, one), two: tree_files(objects, two)}
    # one restore run to the end: how long a restore takes here, now
    took = _run_child(home, wd, one, None)
    on_disk, rng = one, random.Random(seed)
    seen = {"old": 0, "new": 0}
    for _ in range(kills):
        target = two if on_disk == one else one
        _run_child(home, wd, target, rng.uniform(0, took * 1.2))
        Checkpoints(FileObjects(home), wd, home).recover()
        now = Snapshotter(objects, wd).snapshot().tree  # no cache: every byte read
        assert now in (on_disk, target), "a half-restored working directory"
        assert _disk_dirs(wd) == _dirs(files[now])
        seen["new" if now == target else "old"] += 1
        on_disk = now
    return seen


@pytest.mark.crash  # real SIGKILLs (fifty of them below, in the same run)
def test_a_few_kills_leave_old_or_new(tmp_path: Path) -> None:
    _kill_loop(tmp_path, kills=3, seed=14)


@pytest.mark.crash
def test_fifty_kills_leave_old_or_new(tmp_path: Path) -> None:
    seen = _kill_loop(tmp_path, kills=50, seed=1414)
    print(f"after recovery: {seen}")

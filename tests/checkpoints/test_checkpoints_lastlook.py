"""A save landing after a restore's per-path check, before the change: the last
look (the path's ``lstat`` key compared once more, right before the rename,
unlink or ``fchmod``) leaves it as it is and reports it. Without it, the
check was followed by hashing, writing and syncing the temporary file, and a
save landing then was replaced (or removed, or its mode changed) and in no
snapshot.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ckpt_support import later, write
from infai.checkpoints import Checkpoints
from infai.checkpoints import disk as disk_module
from infai.store import Store

CHANGED = "changed during the restore"
SAVED = "saved by an editor after the restore checked this path\n"


def _checkpoints(wd: Path, home: Path) -> Checkpoints:
    c = Checkpoints(Store(home).objects, wd, home, watch=False)
    c.snapshotter._clock = later  # no file is racy: every key is cached
    return c


def _after(monkeypatch: pytest.MonkeyPatch, method: str, path: str, edit: Any) -> None:
    """Run ``edit`` once, right after ``_Disk.<method>`` for ``path``: ``holds``
    (the check, finding it as planned) or ``_write`` (the temporary file
    written and synced)."""
    done: list[bool] = []
    real_holds, real_write = disk_module._Disk.holds, disk_module._Disk._write

    def once() -> None:
        if not done:
            done.append(True)
            edit()

    def holds(self: Any, seen: str, info: Any) -> bool:
        got: bool = real_holds(self, seen, info)
        if got and seen == path:
            once()
        return got

    def _write(self: Any, pfd: int, name: str, *rest: Any) -> None:
        real_write(self, pfd, name, *rest)
        if name == path.rsplit("/", 1)[-1]:
            once()

    if method == "holds":
        monkeypatch.setattr(disk_module._Disk, "holds", holds)
    else:
        monkeypatch.setattr(disk_module._Disk, "_write", _write)


def _temporaries(wd: Path) -> list[str]:
    return [n for _, _, names in os.walk(wd) for n in names if n.startswith(".infai-restore-")]


@pytest.mark.parametrize(
    ("op", "hook"),
    [
        ("write", "holds"),
        ("write", "_write"),
        ("create", "holds"),
        ("create", "_write"),
        ("remove", "holds"),
        ("chmod", "holds"),
    ],
)
def test_a_save_after_the_check_is_left_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str, hook: str
) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("other.txt", "other, old\n"), ("d/f.txt", "f as the snapshot has it\n")])
    (wd / "d" / "keep.txt").write_text("so d is never empty\n")
    c = _checkpoints(wd, home)
    f = wd / "d" / "f.txt"
    target = c.snapshot().tree
    (wd / "other.txt").write_text("other, new\n")
    if op == "write":
        f.write_text("f as the disk has it now\n")
    elif op == "create":
        f.unlink()  # the target has d/f.txt, the disk does not
    elif op == "remove":
        f.unlink()
        (wd / "other.txt").write_text("other, old\n")
        target = c.snapshot().tree
        write(wd, [("other.txt", "other, new\n"), ("d/f.txt", "f, to be removed\n")])
    else:
        f.chmod(0o755)
    _, plan = c.plan(target)
    planned = {a.path: a.op for a in plan.actions}
    assert planned["d/f.txt"] == {"create": "write"}.get(op, op)

    def save() -> None:
        f.write_text(SAVED)
        if op == "chmod":
            f.chmod(0o755)  # (its mode as it was: only the bytes changed)

    _after(monkeypatch, hook, "d/f.txt", save)
    got = c.apply(plan)
    c.finish()
    monkeypatch.undo()
    assert got.left == {"d/f.txt": CHANGED} and got == ["other.txt"]
    assert f.read_text() == SAVED  # the save is there, as it was saved
    if op == "chmod":
        assert stat.S_IMODE(f.stat().st_mode) & 0o100  # its mode not changed either
    assert (wd / "other.txt").read_text() == "other, old\n"  # the rest restored
    assert _temporaries(wd) == []  # the temporary file written is removed
    assert c.restorer.pending() is None


def test_an_unchanged_path_is_still_changed(tmp_path: Path) -> None:
    """The last look finds what the check saw: the restore goes on as before."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a.txt", "a old\n"), ("b.txt", "b\n")])
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    write(wd, [("a.txt", "a new, longer\n"), ("c.txt", "c\n")])
    (wd / "b.txt").chmod(0o755)
    _, plan = c.plan(target)
    got = c.apply(plan)
    c.finish()
    assert sorted(got) == ["a.txt", "b.txt", "c.txt"] and got.left == {}
    assert (wd / "a.txt").read_text() == "a old\n" and not (wd / "c.txt").exists()
    assert not stat.S_IMODE((wd / "b.txt").stat().st_mode) & 0o100

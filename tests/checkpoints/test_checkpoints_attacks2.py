"""More attacks on restores, judged by effect: a journal no recovery can finish
(every restore and checkout of the directory refused for ever), bytes lost,
a write outside the working directory, a report that disagrees with the disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infai.checkpoints import Checkpoints
from infai.checkpoints import restore as restore_module
from infai.store import Store, collect_garbage


class Killed(BaseException):
    """The process dies here (no ``except`` of the restore catches it)."""


def _checkpoints(wd: Path, home: Path) -> Checkpoints:
    return Checkpoints(Store(home).objects, wd, home, watch=False)


def _killed_after_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    real = restore_module._Disk.put
    done: list[bool] = []

    def put(self: Any, info: Any) -> None:
        if done:
            raise Killed
        done.append(True)
        real(self, info)

    monkeypatch.setattr(restore_module._Disk, "put", put)


def test_a_rollback_whose_bytes_gc_removed_finishes_and_says_what_it_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restore killed half-way, then its sessions removed and a gc run: the
    rollback needed bytes no longer stored, raised on every recovery and kept
    its journal, so every later restore and checkout of the directory was
    refused ("an interrupted restore must be recovered first") for ever. Now
    what can be put back is, the rest is left as it is and reported."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    wd.mkdir()
    (wd / "a.txt").write_text("a old\n")
    (wd / "b.txt").write_text("b old\n")
    (wd / "c.txt").write_text("c, the same on both sides\n")
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    (wd / "a.txt").write_text("a new\n")
    (wd / "b.txt").write_text("b new\n")
    (wd / "gone.txt").write_text("only in the newer files\n")
    _, plan = c.plan(target)
    _killed_after_one_write(monkeypatch)
    with pytest.raises(Killed):
        c.apply(plan)
    monkeypatch.undo()
    assert c.restorer.pending() is not None
    assert (wd / "a.txt").read_text() == "a old\n"  # the one write done (after a removal)
    collect_garbage(Store(home), grace=0)  # no session names either tree any more
    again = _checkpoints(wd, home)
    rec = again.recover()
    assert rec is not None and rec.action == "rolled back"
    lost = "not put back: its bytes are no longer in the store"
    assert rec.left == {"a.txt": lost, "gone.txt": lost}  # removals go first
    assert again.restorer.pending() is None  # finished: restores work again
    assert again.recover() is None
    assert (wd / "a.txt").read_text() == "a old\n"  # as the restore left it
    assert (wd / "b.txt").read_text() == "b new\n"  # never touched: nothing to put back
    assert not (wd / "gone.txt").exists()  # removed by the restore, its bytes gc'd
    assert (wd / "c.txt").read_text() == "c, the same on both sides\n"


@pytest.mark.parametrize("op", ["chmod", "write", "remove"])
@pytest.mark.parametrize("swap", ["symlink", "hard link", "parent symlink"])
def test_a_swap_after_the_check_never_reaches_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str, swap: str
) -> None:
    """Held: the moment after a path is checked and before it is changed, the
    file (or its directory) is swapped for a link to a file outside. The restore
    may fail (and is undone) or replace the link, but the outside file keeps its
    bytes and mode, and nothing is created outside."""
    import os
    import stat

    wd, home, outside = tmp_path / "wd", tmp_path / "home", tmp_path / "outside"
    (wd / "sub").mkdir(parents=True)
    outside.mkdir()
    secret = outside / "f"
    secret.write_text("outside\n")
    secret.chmod(0o600)
    f = wd / "sub" / "f"
    f.write_text("v1\n")
    (wd / "sub" / "stays").write_text("so sub is never an empty directory\n")
    c = _checkpoints(wd, home)
    if op == "chmod":
        f.chmod(0o755)
    elif op == "write":
        f.write_text("v2\n")
    target = c.snapshot().tree
    if op == "chmod":
        f.chmod(0o644)
    elif op == "write":
        f.write_text("v1\n")
    else:
        f.unlink()
        target = c.snapshot().tree
        f.write_text("v1\n")
    _, plan = c.plan(target)
    assert [a.path for a in plan.actions] == ["sub/f"]
    real = restore_module._Disk.holds
    swapped: list[bool] = []

    def holds(self: Any, path: str, info: Any) -> bool:
        got = real(self, path, info)
        if path == "sub/f" and got and not swapped:
            swapped.append(True)
            if swap == "parent symlink":
                (wd / "sub").rename(wd / "sub.moved")
                (wd / "sub").symlink_to(outside)
            else:
                f.unlink()
                if swap == "symlink":
                    f.symlink_to(secret)
                else:
                    os.link(secret, f)
        return got

    monkeypatch.setattr(restore_module._Disk, "holds", holds)
    try:
        c.apply(plan)
        c.finish()  # (recorded)
    except restore_module.RestoreError:
        pass  # refused and undone: fine, as long as nothing outside changed
    assert swapped
    assert secret.read_text() == "outside\n"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert sorted(p.name for p in outside.iterdir()) == ["f"]
    assert c.restorer.pending() is None


def test_an_empty_directory_filled_during_the_restore_is_reported_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorded empty directory the restore removes gets a file saved into it
    meanwhile: it is kept (its file too), and was reported as restored (in the
    paths touched, not in ``left``), so the restore record disagreed with the
    disk without saying so."""
    from infai.checkpoints.disk import CHANGED

    wd, home = tmp_path / "wd", tmp_path / "home"
    wd.mkdir()
    (wd / "a.txt").write_text("v1\n")
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    (wd / "a.txt").write_text("v2\n")
    (wd / "d").mkdir()
    _, plan = c.plan(target)
    assert sorted(a.path for a in plan.actions) == ["a.txt", "d"]
    real = restore_module._Disk.rmdir

    def rmdir(self: Any, path: str) -> None:
        (wd / "d" / "saved.txt").write_text("saved during the restore\n")
        real(self, path)

    monkeypatch.setattr(restore_module._Disk, "rmdir", rmdir)
    applied = c.apply(plan)
    c.finish()
    assert (wd / "d" / "saved.txt").read_text() == "saved during the restore\n"
    assert (wd / "a.txt").read_text() == "v1\n"
    assert list(applied) == ["a.txt"]
    assert applied.left == {"d": CHANGED}


def test_a_left_notice_for_a_hostile_name_prints_one_inert_line() -> None:
    """Held: a file name holding a newline, a carriage return and an escape
    sequence, left by a restore: its notice is one line (the newline quoted
    here), and the shells' sanitizer leaves no raw control byte in it."""
    from infai.checkpoints.disk import CHANGED
    from infai.checkpoints.session import _left_notices
    from infai.shells.inert import inert

    name = "a\r\x1b[2Kb\nleft as it is: changed during the restore: c\x07"
    (notice,) = _left_notices({name: CHANGED})
    shown = inert(notice)
    assert "\n" not in shown and "\r" not in shown
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in shown)
    assert shown.startswith(f"left as it is: {CHANGED}: ")

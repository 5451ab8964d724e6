"""More attacks on restores, judged by effect: a journal no recovery can finish
(every restore and checkout of the directory refused for ever), bytes lost,
a write outside the working directory, a report that disagrees with the disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infai.agent.checkpoints import Checkpoints
from infai.agent.checkpoints import restore as restore_module
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

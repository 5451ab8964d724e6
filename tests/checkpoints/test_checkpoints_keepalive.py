"""The stat cache keeps its objects alive for gc: a snapshot touches the digests
it would reuse once their last put is older than half of gc's grace period, and
not otherwise (a warm snapshot must stay a walk of ``lstat`` calls)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from infai.checkpoints import Snapshotter
from infai.checkpoints import snapshot as snapshot_module
from infai.checkpoints.snapshot import TOUCH_INTERVAL_S
from infai.store import Store
from infai.store.gc import DEFAULT_GRACE
from infai.store.trees import reachable


def _later() -> int:
    return time.time_ns() + 10**12  # no file is racy: every one is cached


def test_an_old_cache_is_touched_once_and_a_young_one_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    (wd / "sub").mkdir(parents=True)
    (wd / "a.txt").write_text("a\n")
    (wd / "sub" / "b.txt").write_text("b\n")
    (wd / "link").symlink_to("a.txt")
    objects = Store(home).objects
    touched: list[set[str]] = []
    real = type(objects).touch

    def counting(self: object, digests: Iterable[str]) -> set[str]:
        named = set(digests)
        touched.append(named)
        return real(self, named)  # type: ignore[arg-type]

    monkeypatch.setattr(type(objects), "touch", counting)
    now = [time.time()]
    monkeypatch.setattr(snapshot_module, "_wall", lambda: now[0])
    first = Snapshotter(objects, wd, home=home, clock=_later, watch=False)
    tree = first.snapshot().tree
    first.snapshot()
    assert touched == []  # all put just now
    first.close()
    now[0] += TOUCH_INTERVAL_S + 1  # the next process, a while later
    again = Snapshotter(objects, wd, home=home, clock=_later, watch=False)
    assert again.snapshot().tree == tree
    assert touched == [reachable(objects, [tree])]  # every object the tree names
    assert again.snapshot().hashed == 0 and len(touched) == 1
    again.close()
    now[0] += TOUCH_INTERVAL_S / 2  # the touch time was saved with the cache
    third = Snapshotter(objects, wd, home=home, clock=_later, watch=False)
    third.snapshot()
    third.close()
    assert len(touched) == 1
    assert TOUCH_INTERVAL_S <= DEFAULT_GRACE / 2


def test_a_cached_object_gone_without_a_generation_change_is_hashed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The touch learns an object is gone (say, a store copied without it): the
    cache is dropped and the files are read again, so the tree is whole."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    wd.mkdir()
    (wd / "a.txt").write_text("a\n")
    objects = Store(home).objects
    now = [time.time()]
    monkeypatch.setattr(snapshot_module, "_wall", lambda: now[0])
    snap = Snapshotter(objects, wd, home=home, clock=_later, watch=False)
    tree = snap.snapshot().tree
    import sqlite3

    conn = sqlite3.connect(home / "objects" / "objects.sqlite")
    with conn:
        conn.execute("DELETE FROM objects")  # behind the generation's back
    conn.close()
    now[0] += TOUCH_INTERVAL_S + 1
    result = snap.snapshot()
    assert result.tree == tree and result.hashed == 1
    assert not objects.missing(reachable(objects, [tree]))
    snap.close()

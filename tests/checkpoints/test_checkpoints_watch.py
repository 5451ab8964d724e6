"""The change watcher (inotify): a warm snapshot lists only directories with
changes, yet always records what a cold walk records — changes made by another
process, under bubblewrap, renames across directories, a new directory filled
after it was created, and a queue overflow that forces the full walk."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckpt_support import later, write
from infai.checkpoints import Snapshotter
from infai.checkpoints import watch as watch_module
from infai.store.file.objects import FileObjects

pytestmark = pytest.mark.skipif(not watch_module.Watcher().ok, reason="no inotify on this system")


def _tree(n: int = 24) -> list[tuple[str, str]]:
    return [(f"d{i % 3}/s{i % 2}/f{i}", f"{i}") for i in range(n)]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Path, FileObjects, Snapshotter]]:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, _tree())
    objects = FileObjects(home)
    snap = Snapshotter(objects, wd, home=home, clock=later)
    snap.snapshot()  # the full walk that arms the watcher
    yield wd, objects, snap
    snap.close()
    objects.close()


def _cold(objects: FileObjects, wd: Path) -> str:
    return Snapshotter(objects, wd, clock=later, watch=False).snapshot().tree


def _listed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The directories ``os.scandir`` lists from now on (the snapshot module's)."""
    seen: list[str] = []
    real = os.scandir

    def spy(path: str) -> object:
        seen.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", spy)
    return seen


def test_a_warm_snapshot_lists_only_the_changed_directory_and_its_ancestors(
    setup: tuple[Path, FileObjects, Snapshotter], monkeypatch: pytest.MonkeyPatch
) -> None:
    wd, objects, snap = setup
    (wd / "d1/s0/f4").write_text("changed")
    listed = _listed(monkeypatch)
    got = snap.snapshot()
    assert sorted(listed) == sorted([str(wd), str(wd / "d1"), str(wd / "d1/s0")])
    assert got.hashed == 1
    del listed[:]
    again = snap.snapshot()  # nothing changed: nothing listed at all
    assert listed == [] and again.tree == got.tree
    monkeypatch.undo()
    assert got.tree == _cold(objects, wd)


def test_changes_made_by_another_process_are_seen(
    setup: tuple[Path, FileObjects, Snapshotter],
) -> None:
    wd, objects, snap = setup
    before = snap.snapshot().tree
    code = (
        "import os,sys; w=sys.argv[1];"
        "open(os.path.join(w,'d2/s1/f5'),'a').write('more');"
        "os.chmod(os.path.join(w,'d0/s0/f0'),0o755);"
        "os.unlink(os.path.join(w,'d1/s1/f1'))"
    )
    subprocess.run([sys.executable, "-c", code, str(wd)], check=True)
    after = snap.snapshot()
    assert after.tree != before
    assert after.tree == _cold(objects, wd)


def test_renames_into_and_out_of_directories_are_seen(
    setup: tuple[Path, FileObjects, Snapshotter], monkeypatch: pytest.MonkeyPatch
) -> None:
    wd, objects, snap = setup
    (wd / "d0/s0/f0").rename(wd / "d2/s1/moved")  # file out of one dir into another
    assert snap.snapshot().tree == _cold(objects, wd)
    (wd / "d1/s1").rename(wd / "d2/s1/sub")  # a whole directory moves
    assert snap.snapshot().tree == _cold(objects, wd)
    (wd / "d2/s1/sub/f1").write_text("edited under its new name")
    assert snap.snapshot().tree == _cold(objects, wd)
    (wd / "d2/s1/sub").rename(wd / "back")  # and out again, to the top
    (wd / "back/f1").write_text("edited again")
    assert snap.snapshot().tree == _cold(objects, wd)
    # a rename costs one full walk, not the watcher: it still vouches afterwards
    assert snap.watcher is not None and snap.watcher.ok
    (wd / "back/f1").write_text("once more")
    listed = _listed(monkeypatch)
    got = snap.snapshot()
    assert sorted(listed) == sorted([str(wd), str(wd / "back")])
    monkeypatch.undo()
    assert got.tree == _cold(objects, wd)


def test_a_new_directory_filled_after_it_was_created_is_seen(
    setup: tuple[Path, FileObjects, Snapshotter],
) -> None:
    wd, objects, snap = setup
    (wd / "d0/new").mkdir()
    empty = snap.snapshot().tree  # an empty directory is not recorded
    write(wd, [("d0/new/deeper/x", "x")])
    filled = snap.snapshot()
    assert filled.tree != empty
    assert filled.tree == _cold(objects, wd)
    (wd / "d0/new/deeper/x").write_text("xx")  # the new directory is watched too
    assert snap.snapshot().tree == _cold(objects, wd)


def test_a_queue_overflow_forces_the_full_walk(
    setup: tuple[Path, FileObjects, Snapshotter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """More events than the kernel queues (``max_queued_events``, 16384 by
    default): the watcher cannot vouch for anything, every directory is listed."""
    wd, objects, snap = setup
    try:
        limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    except OSError:
        limit = 16384
    if limit > 200_000:
        pytest.skip("the event queue is too large to overflow quickly")
    a, b = wd / "d0/s0/f0", wd / "d1/s1/f1"
    for n in range(limit // 2 + 10):  # alternate: equal consecutive events coalesce
        os.utime(a, ns=(n, n))
        os.utime(b, ns=(n, n))
    (wd / "d2/s0/f2").write_text("lost in the overflow")
    listed = _listed(monkeypatch)
    got = snap.snapshot()
    assert len(listed) == 1 + 3 + 6  # root, three dirs, six subdirs
    monkeypatch.undo()
    assert got.tree == _cold(objects, wd)


def test_an_overflow_event_means_doubt() -> None:
    watcher = watch_module.Watcher()
    try:
        dirty: set[str] = set()
        event = struct.pack("iIII", -1, watch_module.IN_Q_OVERFLOW, 0, 0)
        assert watcher._parse(event, dirty) is True
    finally:
        watcher.close()


def test_a_watch_limit_or_no_inotify_falls_back_to_walking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, _tree())
    objects = FileObjects(home)
    snap = Snapshotter(objects, wd, home=home, clock=later)
    assert snap.watcher is not None
    monkeypatch.setattr(snap.watcher, "_libc", _FailingLibc())
    snap.snapshot()  # adding the first watch fails (as at max_user_watches)
    assert not snap.watcher.ok
    (wd / "d1/s0/f4").write_text("changed")
    listed = _listed(monkeypatch)
    got = snap.snapshot()
    assert len(listed) == 10  # every directory
    monkeypatch.undo()
    assert got.tree == _cold(objects, wd)
    snap.close()


class _FailingLibc:
    def inotify_add_watch(self, fd: int, path: bytes, mask: int) -> int:
        return -1


def test_changes_made_under_bubblewrap_are_seen(
    setup: tuple[Path, FileObjects, Snapshotter],
) -> None:
    """The bash tool's sandbox binds the working directory: the same inodes, so
    the same events."""
    from infai.tools.sandbox import BASE_FLAGS, probe

    found = probe()
    if not found.ok or found.bwrap is None:
        pytest.skip(found.reason)
    wd, objects, snap = setup
    before = snap.snapshot().tree
    script = "echo sandboxed >> d1/s1/f1 && mkdir -p made/here && echo y > made/here/y"
    bind = ["--bind", str(wd), str(wd), "--chdir", str(wd)]
    subprocess.run(
        [found.bwrap, *BASE_FLAGS, *bind, "sh", "-c", script],
        check=True,
        capture_output=True,
        env={"PATH": os.environ.get("PATH", os.defpath)},
    )
    after = snap.snapshot()
    assert after.tree != before
    assert after.tree == _cold(objects, wd)


def test_racy_files_are_hashed_again_when_their_directory_has_an_event(tmp_path: Path) -> None:
    """A file written in the snapshot's clock tick is not cached; the watcher
    lets its directory keep its tree while nothing happens there, and the first
    event there has it read again."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("d/racy", "r"), ("d/other", "o"), ("e/calm", "c")])
    clock = os.stat(wd / "d/racy").st_mtime_ns + 10**9  # every file looks racy
    objects = FileObjects(home)
    snap = Snapshotter(objects, wd, home=home, clock=lambda: clock)
    assert snap.snapshot().hashed == 3
    assert snap.snapshot().hashed == 0  # no event: the watcher vouches
    (wd / "d/new").write_text("n")
    got = snap.snapshot()
    assert got.hashed == 3  # new, and racy and other (still uncached), not e/calm
    assert got.tree == _cold(objects, wd)
    snap.close()


def test_a_snapshot_that_fails_mid_walk_loses_no_change_for_the_next(
    setup: tuple[Path, FileObjects, Snapshotter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails without the fix: the failed walk had drained the watcher's events, and
    the next one trusted the changed directory's cached tree."""
    from infai.checkpoints import walk as walk_module

    wd, objects, snap = setup
    (wd / "d1/s0/f4").write_text("changed before the failure")
    real = walk_module._Walk.directory

    def broken(*args: object, **kwargs: object) -> object:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(walk_module._Walk, "directory", broken)
    with pytest.raises(OSError):
        snap.snapshot()
    monkeypatch.setattr(walk_module._Walk, "directory", real)
    assert snap.snapshot().tree == _cold(objects, wd)

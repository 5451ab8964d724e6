"""Attacks on harness checkpoints, judged by their effect on disk and in the store.

Each test is one attack that worked before its fix: a restore that wedged the
working directory behind a journal no recovery could finish, an object a
concurrent gc removed from under a snapshot about to be recorded, and a file
saved during a restore that the restore overwrote.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from infai.checkpoints import Checkpoints, CheckpointSettings, RestoreError, Snapshotter
from infai.checkpoints import snapshot as snapshot_module
from infai.checkpoints.restore import Restorer, plan_restore
from infai.checkpoints.session import SessionCheckpoints, diff_at
from infai.store import SnapshotRecord, Store, collect_garbage
from infai.store.trees import reachable


def _later() -> int:
    """A snapshot clock past every file's mtime (no file is racy, all are cached)."""
    return time.time_ns() + 10**12


def _checkpoints(wd: Path, home: Path, size_cap: int = 10 * 1024 * 1024) -> Checkpoints:
    c = Checkpoints(Store(home).objects, wd, home, size_cap=size_cap, watch=False)
    c.snapshotter._clock = _later
    return c


@pytest.mark.parametrize("in_the_way", ["oversized", "fifo"])
def test_a_file_left_out_where_the_snapshot_has_a_directory_is_left_alone(
    tmp_path: Path, in_the_way: str
) -> None:
    """The snapshot has ``d/x``; on disk now ``d`` is a file the snapshot leaves
    out (over the size cap, or a fifo). The restore used to plan ``write d/x``,
    fail on ``d``, fail again undoing it, and keep a journal whose recovery fails
    the same way at every open: the only way out was deleting the user's file."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    (wd / "d").mkdir(parents=True)
    (wd / "d" / "x").write_text("older\n")
    (wd / "keep.txt").write_text("k\n")
    c = _checkpoints(wd, home, size_cap=100)
    target = c.snapshot().tree
    (wd / "d" / "x").unlink()
    (wd / "d").rmdir()
    if in_the_way == "oversized":
        (wd / "d").write_bytes(b"B" * 1000)
    else:
        import os

        os.mkfifo(wd / "d")
    _, plan = c.plan(target)
    assert "d/x" in plan.not_restorable and not plan.actions
    c.apply(plan)
    c.finish()
    assert c.restorer.pending() is None and c.recover() is None
    if in_the_way == "oversized":
        assert (wd / "d").read_bytes() == b"B" * 1000  # the user's file, untouched


def test_a_directory_replaced_by_a_file_during_a_restore_is_undone_cleanly(
    tmp_path: Path,
) -> None:
    """Between the last check and the write, ``d`` (a directory the restore
    writes into) becomes a file. The restore fails and must be undone at once,
    the file left as it is: the undo used to fail on ``d`` as well, leaving a
    journal whose recovery failed at every open."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    (wd / "d").mkdir(parents=True)
    (wd / "d" / "x").write_text("older\n")
    (wd / "a.txt").write_text("older a\n")
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    (wd / "d" / "x").unlink()
    (wd / "d").rmdir()
    (wd / "a.txt").write_text("newer a\n")
    current = c.snapshot().tree
    plan = plan_restore(c.objects, c.workdir, target, current)
    assert {a.path for a in plan.actions} == {"a.txt", "d/x"}
    (wd / "d").write_text("the user's new file\n")  # the race
    restorer = Restorer(c.objects, wd, home)
    with pytest.raises(RestoreError, match="failed and was undone"):
        restorer.apply(plan)
    assert restorer.pending() is None  # nothing left for a recovery to trip on
    assert (wd / "d").read_text() == "the user's new file\n"
    assert (wd / "a.txt").read_text() == "newer a\n"  # put back as it was


def _age_puts(home: Path, seconds: float) -> None:
    """Make every object look put ``seconds`` ago (the grace period has passed)."""
    conn = sqlite3.connect(home / "objects" / "objects.sqlite")
    with conn:
        conn.execute("UPDATE puts SET at = at - ?", (seconds,))
    conn.close()


def test_gc_between_a_snapshot_and_its_event_keeps_what_the_event_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot's objects that are stat-cache hits, put only by an unrecorded
    snapshot (``session diff``) longer ago than gc's grace, used to be removable
    by a gc between the walk and the event's append: the recorded tree then
    named missing objects. The snapshot now touches a cache that old first."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    wd.mkdir()
    (wd / "f.txt").write_text("v0\n")
    made = Snapshotter.__init__

    def no_racy_files(self: Snapshotter, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self._clock = _later  # every snapshot's files are cached, the diff's too

    monkeypatch.setattr(Snapshotter, "__init__", no_racy_files)
    store = Store(home)
    sid = store.create_session(working_dir=str(wd)).id
    files = SessionCheckpoints(store, wd, CheckpointSettings(), watch=False)
    with store.open_writer(sid) as writer:
        first = files.snapshot_record(writer, None, "turn start")
        assert first is not None
        event = writer.append(first, "system")
    files.close()
    (wd / "f.txt").write_text("v1, seen only by a diff\n")
    diff_at(store, sid, event.id)  # an unrecorded snapshot: v1's object, cached
    _age_puts(home, 7200)  # two hours later, by the store's clock and by the snapshot's:
    later = time.time() + 7200
    monkeypatch.setattr(snapshot_module, "_wall", lambda: later)
    files = SessionCheckpoints(store, wd, CheckpointSettings(), watch=False)
    real = Snapshotter.snapshot

    def snapshot_then_gc(self: Snapshotter, *args: object, **kwargs: object) -> object:
        got = real(self, *args, **kwargs)  # type: ignore[arg-type]
        collect_garbage(store)  # another terminal's `infai store gc`, before the event
        return got

    monkeypatch.setattr(Snapshotter, "snapshot", snapshot_then_gc)
    with store.open_writer(sid) as writer:
        record = files.snapshot_record(writer, None, "turn start")
        assert isinstance(record, SnapshotRecord)
        writer.append(record, "system")
    files.close()
    assert not store.objects.missing(reachable(store.objects, [record.tree]))


def test_an_edit_during_a_restore_is_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.checkpoints import restore as restore_module
    from infai.store.codec import digest_of

    wd, home = tmp_path / "wd", tmp_path / "home"
    wd.mkdir()
    (wd / "a.txt").write_text("a old\n")
    (wd / "b.txt").write_text("b old\n")
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    (wd / "a.txt").write_text("a new\n")
    (wd / "b.txt").write_text("b new\n")
    _, plan = c.plan(target)
    real = restore_module._Disk.put
    edited: list[bool] = []

    def put_while_the_user_saves(self: Any, info: Any) -> None:
        if not edited:  # an editor saves b.txt as the restore writes a.txt
            (wd / "b.txt").write_text("b edited during the restore\n")
            edited.append(True)
        real(self, info)

    monkeypatch.setattr(restore_module._Disk, "put", put_while_the_user_saves)
    try:
        c.apply(plan)
        c.finish()
    except RestoreError:
        pass  # refusing is fine: the point is what is left
    kept = (wd / "b.txt").read_bytes() == b"b edited during the restore\n"
    stored = c.objects.has(digest_of(b"b edited during the restore\n"))
    assert kept or stored


def test_directories_nested_too_deep_are_left_out_not_a_crash(tmp_path: Path) -> None:
    """600 nested directories (a crafted snapshot restores them in one go): every
    later snapshot of the directory used to fail with RecursionError (a traceback
    from `session diff`/`checkout`). The part below the limit is left out and
    reported, and a restore leaves it alone."""
    from infai.checkpoints.walk import MAX_DEPTH

    wd, home = tmp_path / "wd", tmp_path / "home"
    deep = wd.joinpath(*["d"] * 600)
    deep.mkdir(parents=True)
    (deep / "f").write_text("deep\n")
    (wd / "a.txt").write_text("a\n")
    c = _checkpoints(wd, home)
    snap = c.snapshot()
    cut = "d/" * (MAX_DEPTH + 1)
    assert snap.every_skipped == {cut: f"nested deeper than {MAX_DEPTH} directories"}
    (wd / "a.txt").write_text("a newer\n")
    _, plan = c.plan(snap.tree)
    assert [a.path for a in plan.actions] == ["a.txt"]
    c.apply(plan)
    c.finish()
    assert (deep / "f").read_text() == "deep\n"

"""Files changed *during* a restore, and hard links out of the working directory.

A restore checks each path still holds what the snapshot before it saw just
before changing it: a file saved meanwhile (an editor, a build) is left as it
is and reported, whether the restore meant to write, remove or chmod it, and
neither an undo nor a recovery clobbers it. The edits here are made from inside
the restore (a hook on its first step), after the facade's last check of the
disk, which is the window an editor's save lands in.

A mode change of a file with another hard link (perhaps outside the working
directory) must not change that link's mode: it is a fresh copy.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ckpt_support import later, write
from infai.checkpoints import Checkpoints, CheckpointSettings, FileInfo, RestoreError
from infai.checkpoints import disk as disk_module
from infai.checkpoints.session import OnRestore, SessionCheckpoints
from infai.store import RestoreRecord, SnapshotRecord, Store
from infai.store.codec import digest_of

CHANGED = "changed during the restore"


def _checkpoints(wd: Path, home: Path) -> Checkpoints:
    c = Checkpoints(Store(home).objects, wd, home, watch=False)
    c.snapshotter._clock = later  # no file is racy: every key is cached
    return c


def _during(monkeypatch: pytest.MonkeyPatch, edit: Callable[[], object]) -> None:
    """Run ``edit`` once, as the restore starts changing the disk (after the
    facade's snapshot check and the journal)."""
    real = disk_module._Disk.drop_tmp
    done: list[bool] = []

    def drop_tmp(self: Any, path: str, *sides: Any) -> str | None:
        if not done:
            done.append(True)
            edit()
        return real(self, path, *sides)

    monkeypatch.setattr(disk_module._Disk, "drop_tmp", drop_tmp)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_an_edit_to_a_file_the_restore_removes_is_left_and_recorded_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a.txt", "old a\n")])
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    write(wd, [("a.txt", "new a\n"), ("gone.txt", "to be removed\n")])
    _, plan = c.plan(target)
    assert {a.path: a.op for a in plan.actions} == {"a.txt": "write", "gone.txt": "remove"}
    _during(monkeypatch, lambda: (wd / "gone.txt").write_text("saved during the restore\n"))
    got = c.apply(plan)
    c.finish()
    assert got == ["a.txt"] and got.left == {"gone.txt": CHANGED}
    assert (wd / "gone.txt").read_text() == "saved during the restore\n"
    assert (wd / "a.txt").read_text() == "old a\n"
    # the next snapshot has the edit (the restore's target does not)
    after = c.snapshot()
    assert after.tree != plan.target
    assert c.files(after.tree)["gone.txt"].digest == digest_of(b"saved during the restore\n")
    assert c.objects.has(digest_of(b"saved during the restore\n"))


@pytest.mark.parametrize("made", ["file", "directory"])
def test_something_made_where_the_restore_creates_a_file_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: str
) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a.txt", "old a\n"), ("new.txt", "the snapshot's\n")])
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    (wd / "new.txt").unlink()
    write(wd, [("a.txt", "new a\n")])
    _, plan = c.plan(target)
    assert {a.path: a.op for a in plan.actions} == {"a.txt": "write", "new.txt": "write"}

    def make() -> None:
        if made == "file":
            (wd / "new.txt").write_text("mine, made meanwhile\n")
        else:
            write(wd, [("new.txt/inside", "mine\n")])

    _during(monkeypatch, make)
    got = c.apply(plan)
    c.finish()
    assert got == ["a.txt"] and got.left == {"new.txt": CHANGED}
    if made == "file":
        assert (wd / "new.txt").read_text() == "mine, made meanwhile\n"
    else:
        assert (wd / "new.txt/inside").read_text() == "mine\n"
    assert c.restorer.pending() is None


def test_a_file_whose_mode_the_restore_sets_edited_meanwhile_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("run.sh", "#!/bin/sh\n"), ("a.txt", "old a\n")])
    (wd / "run.sh").chmod(0o755)
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    (wd / "run.sh").chmod(0o644)
    write(wd, [("a.txt", "new a\n")])
    _, plan = c.plan(target)
    assert {a.path: a.op for a in plan.actions} == {"a.txt": "write", "run.sh": "chmod"}
    _during(monkeypatch, lambda: (wd / "run.sh").write_text("#!/bin/sh\necho edited\n"))
    got = c.apply(plan)
    c.finish()
    assert got == ["a.txt"] and got.left == {"run.sh": CHANGED}
    assert (wd / "run.sh").read_text() == "#!/bin/sh\necho edited\n"
    assert _mode(wd / "run.sh") == 0o644


def test_an_undo_leaves_a_file_edited_after_the_restore_wrote_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The restore writes a.txt, the user saves a.txt, then the disk fills on
    z.txt: the undo puts back what the restore changed, but not a.txt, whose
    new bytes are the user's."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a.txt", "old a\n"), ("m.txt", "old m\n"), ("z.txt", "old z\n")])
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    write(wd, [("a.txt", "new a\n"), ("m.txt", "new m\n"), ("z.txt", "new z\n")])
    _, plan = c.plan(target)
    real = disk_module._Disk.put

    failed: list[bool] = []

    def put(self: Any, info: FileInfo) -> None:
        if info.path == "z.txt" and not failed:  # once: the undo may write it
            failed.append(True)
            (wd / "a.txt").write_text("saved after the restore wrote a\n")
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, info)

    monkeypatch.setattr(disk_module._Disk, "put", put)
    with pytest.raises(RestoreError, match=r"undone: .*No space.*changed during.*'a.txt'"):
        c.apply(plan)
    assert (wd / "a.txt").read_text() == "saved after the restore wrote a\n"
    assert (wd / "m.txt").read_text() == "new m\n"  # put back
    assert (wd / "z.txt").read_text() == "new z\n"
    assert c.restorer.pending() is None


def test_a_recovery_leaves_a_file_edited_after_a_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a.txt", "old a\n"), ("m.txt", "old m\n"), ("z.txt", "old z\n")])
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    write(wd, [("a.txt", "new a\n"), ("m.txt", "new m\n"), ("z.txt", "new z\n")])
    _, plan = c.plan(target)
    real = disk_module._Disk.put

    def put(self: Any, info: FileInfo) -> None:
        if info.path == "z.txt":
            raise KeyboardInterrupt  # as a kill: no undo, the journal stays
        real(self, info)

    monkeypatch.setattr(disk_module._Disk, "put", put)
    with pytest.raises(KeyboardInterrupt):
        c.apply(plan)
    monkeypatch.undo()
    (wd / "a.txt").write_text("saved before the next open\n")
    got = c.recover()
    assert got is not None and got.action == "rolled back"
    assert got.left == {"a.txt": CHANGED}
    assert (wd / "a.txt").read_text() == "saved before the next open\n"
    assert (wd / "m.txt").read_text() == "new m\n" and (wd / "z.txt").read_text() == "new z\n"


def test_the_restore_reports_the_path_left_and_records_what_it_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a.txt", "a v1\n"), ("b.txt", "b v1\n")])
    store = Store(home)
    sid = store.create_session(working_dir=str(wd)).id
    files = SessionCheckpoints(store, wd, CheckpointSettings(), watch=False)
    files.cp.snapshotter._clock = later
    with store.open_writer(sid) as writer:
        first = files.snapshot_record(writer, None, "turn start")
        assert first is not None
        event = writer.append(first, "system")
        write(wd, [("a.txt", "a v2\n"), ("b.txt", "b v2\n")])  # as a tool would
        second = files.snapshot_record(writer, None, "after bash")
        assert second is not None
        writer.append(second, "system")
        _during(monkeypatch, lambda: (wd / "b.txt").write_text("b saved meanwhile\n"))
        done = files.restore(writer, event.id, OnRestore(), attach=None)
        monkeypatch.undo()
        assert "left as it is: changed during the restore: b.txt" in done.notices
        assert "restored 1 file: a.txt (+1 -1)" in done.notices  # b.txt, left, is not named
        assert done.touched == ["a.txt"]
        restore = done.events[-1].record
        assert isinstance(restore, RestoreRecord)
        assert restore.touched == ["a.txt"] and restore.metadata["left"] == {"b.txt": CHANGED}
        assert (wd / "b.txt").read_text() == "b saved meanwhile\n"
        # the timeline's next snapshot records the edit the restore left
        following = files.snapshot_record(writer, None, "turn start")
        assert isinstance(following, SnapshotRecord)
        assert files.cp.files(following.tree)["b.txt"].digest == digest_of(b"b saved meanwhile\n")
    files.close()


def test_unchanged_files_are_checked_by_their_cached_stat_key_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check before each step costs an ``lstat`` when the snapshot cached the
    file (nested paths included): no file is read again to be hashed."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [(f"d/e/f{i}.txt", f"old {i}\n") for i in range(5)] + [("top.txt", "old\n")])
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    write(wd, [(f"d/e/f{i}.txt", f"new {i}\n") for i in range(5)] + [("top.txt", "new\n")])
    write(wd, [("d/gone.txt", "removed by the restore\n")])
    _, plan = c.plan(target)
    assert len(plan.actions) == 7
    reads: list[str] = []
    real = disk_module._digest

    def digest(pfd: int, name: str) -> str:
        reads.append(name)
        return real(pfd, name)

    monkeypatch.setattr(disk_module, "_digest", digest)
    got = c.apply(plan)
    c.finish()
    assert len(got) == 7 and got.left == {} and reads == []
    assert (wd / "d/e/f3.txt").read_text() == "old 3\n" and not (wd / "d/gone.txt").exists()


@pytest.mark.parametrize("to_executable", [True, False])
def test_a_mode_change_leaves_a_hard_link_outside_as_it_was(
    tmp_path: Path, to_executable: bool
) -> None:
    """``run.sh`` is a hard link of a file outside the working directory; the
    restore sets its executable bit: the outside file keeps its mode and bytes
    (``fchmod`` in place changed both)."""
    wd, home, outside = tmp_path / "wd", tmp_path / "home", tmp_path / "outside"
    wd.mkdir()
    outside.mkdir()
    shared = outside / "shared.sh"
    shared.write_text("#!/bin/sh\necho shared\n")
    os.link(shared, wd / "run.sh")
    old, new = (0o644, 0o755) if to_executable else (0o755, 0o644)
    shared.chmod(new)
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    shared.chmod(old)  # both links: the restore will set the mode back to `new`
    _, plan = c.plan(target)
    assert [(a.path, a.op) for a in plan.actions] == [("run.sh", "chmod")]
    got = c.apply(plan)
    c.finish()
    assert got == ["run.sh"] and got.left == {}
    assert _mode(wd / "run.sh") == new
    assert _mode(shared) == old
    assert shared.read_text() == (wd / "run.sh").read_text() == "#!/bin/sh\necho shared\n"
    assert c.snapshot().tree == target


def test_a_recovery_of_an_applied_restore_reports_the_paths_it_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after applying, before recording: the journal remembers the paths
    left, so the recovery reports them, and not as touched."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a.txt", "old a\n"), ("b.txt", "old b\n")])
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    write(wd, [("a.txt", "new a\n"), ("b.txt", "new b\n")])
    _, plan = c.plan(target)
    _during(monkeypatch, lambda: (wd / "b.txt").write_text("saved meanwhile\n"))
    c.apply(plan, metadata={"source": "ev"})  # ... and the process dies here
    got = Checkpoints(Store(home).objects, wd, home, watch=False).recover()
    assert got is not None and got.action == "completed"
    assert got.touched == ["a.txt"] and got.left == {"b.txt": CHANGED}
    assert (wd / "b.txt").read_text() == "saved meanwhile\n"


def test_the_notice_of_a_path_left_stays_one_line() -> None:
    from infai.checkpoints.session import _left_notices

    left = {f"f{i:02}": CHANGED for i in range(12)} | {"evil\nskipped: x": CHANGED}
    notices = _left_notices(left)
    assert notices[0] == 'left as it is: changed during the restore: "evil\\nskipped: x"'
    assert len(notices) == 11 and notices[-1] == "... and 3 more path(s) left as they are"
    assert not any("\n" in n for n in notices)

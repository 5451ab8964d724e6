"""Restores on real git repositories: exactly the older files and back, only
differing paths touched, ``.git`` byte-identical, ignored and oversized files
untouched and reported, external edits found as conflicts, and no path outside
the working directory reachable through a symlink."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ckpt_support import contents, hash_git_dir, init_repo, later, tree_state, write
from infai.checkpoints import (
    Checkpoints,
    FileInfo,
    PlanStale,
    RestoreError,
    RestorePending,
    Snapshotter,
    tree_files,
)
from infai.checkpoints import restore as restore_module
from infai.store.file.objects import FileObjects


def _checkpoints(wd: Path, home: Path, size_cap: int = 10 * 1024 * 1024) -> Checkpoints:
    c = Checkpoints(FileObjects(home), wd, home, size_cap=size_cap)
    c.snapshotter._clock = later
    return c


def _restore(c: Checkpoints, target: str, last: str | None = None) -> list[str]:
    _, plan = c.plan(target, last=last)
    touched = c.apply(plan)
    c.finish()
    return touched


def _bash(wd: Path, script: str) -> None:
    subprocess.run(["bash", "-ec", script], cwd=wd, check=True)


def _scenario(tmp_path: Path) -> tuple[Path, Checkpoints, str, str]:
    """A repository whose files are changed every way between two snapshots."""
    wd = tmp_path / "wd"
    init_repo(wd)
    write(
        wd,
        [
            (".gitignore", "*.log\nnode_modules/\n"),
            ("src/app.py", "def main():\n    return 1\n"),
            ("src/util.py", "X = 1\n"),
            ("old_name.txt", "renamed later\n"),
            ("doomed.txt", "deleted later\n"),
            ("script.sh", "#!/bin/sh\necho hi\n"),
            ("debug.log", "ignored, never touched\n"),
            ("node_modules/pkg/index.js", "ignored dir\n"),
            ("big.bin", b"\0" * 5000),
        ],
    )
    os.symlink("src/app.py", wd / "entry")
    c = _checkpoints(wd, tmp_path / "home", size_cap=4096)
    old = c.snapshot().tree
    (wd / "src/app.py").write_text("def main():\n    return 2\n")  # edit (write_file)
    _bash(
        wd,
        "rm doomed.txt; mv old_name.txt new_name.txt; sed -i 's/X = 1/X = 2/' src/util.py;"
        " chmod +x script.sh; mkdir -p gen/out;"
        " for i in 1 2 3; do echo $i > gen/out/$i.txt; done;"
        " rm entry; ln -s src/util.py entry; echo more >> debug.log",
    )
    write(wd, [("src/new_module.py", "Y = 3\n"), ("big.bin", b"\1" * 6000)])
    new = c.snapshot(previous=old).tree
    return wd, c, old, new


def test_restore_to_older_and_back_gives_exact_files(tmp_path: Path) -> None:
    wd, c, old, new = _scenario(tmp_path)
    newer_files = contents(wd)
    git_before = hash_git_dir(wd)
    _restore(c, old)
    assert c.snapshot().tree == old
    now = contents(wd)
    assert now["src/app.py"][1] != newer_files["src/app.py"][1]
    assert "doomed.txt" in now and "old_name.txt" in now and "new_name.txt" not in now
    assert "gen/" not in now and "gen/out/" not in now  # emptied directories removed
    assert now["script.sh"][2] == "0o644"
    assert os.readlink(wd / "entry") == "src/app.py"
    _restore(c, new)
    assert c.snapshot().tree == new
    assert contents(wd) == newer_files
    assert hash_git_dir(wd) == git_before


def test_ignored_and_oversized_files_untouched_and_reported(tmp_path: Path) -> None:
    wd, c, old, _new = _scenario(tmp_path)
    keep = {
        p: v for p, v in tree_state(wd).items() if p.startswith(("debug", "node_modules", "big"))
    }
    old_skipped = {"big.bin": "over the size cap (5000 > 4096 bytes)", "debug.log": "ignored"}
    now, plan = c.plan(old, target_skipped=old_skipped)
    assert now.skipped == {
        "big.bin": "over the size cap (6000 > 4096 bytes)",
        "debug.log": "ignored",
        "node_modules/": "ignored",
    }
    assert not [a for a in plan.actions if a.path.startswith(("debug", "node_modules", "big"))]
    # an ignored path is left alone and never said to be "not restorable" (issue 24)
    assert plan.not_restorable == {
        "big.bin": "not in the snapshot (over the size cap (5000 > 4096 bytes))",
    }
    c.apply(plan)
    c.finish()
    after = tree_state(wd)
    assert {p: after[p] for p in keep} == keep


def test_not_restorable_paths_of_the_target_are_reported(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a.txt", "a"), ("huge", b"x" * 3000)])
    c = _checkpoints(wd, home, size_cap=1000)
    old = c.snapshot()
    assert old.skipped == {"huge": "over the size cap (3000 > 1000 bytes)"}
    (wd / "huge").unlink()
    (wd / "a.txt").write_text("b")
    _, plan = c.plan(old.tree, target_skipped=old.skipped)
    assert plan.not_restorable == {
        "huge": "not in the snapshot (over the size cap (3000 > 1000 bytes))"
    }
    assert [a.path for a in plan.actions] == ["a.txt"]


def test_only_differing_paths_are_touched(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    init_repo(wd)
    write(wd, [(f"d{i % 5}/f{i}.txt", f"v1 {i}") for i in range(100)])
    c = _checkpoints(wd, home)
    first = c.snapshot().tree
    changed = [f"d{i % 5}/f{i}.txt" for i in range(0, 100, 10)]
    write(wd, [(p, "v2") for p in changed])
    c.snapshot()
    before = tree_state(wd)
    touched = _restore(c, first)
    after = tree_state(wd)
    differs = sorted(p for p in before if before[p] != after.get(p))
    assert sorted(touched) == differs == sorted(changed)


def test_type_changes_file_dir_and_link(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a", "file a"), ("b/x", "in dir b"), ("c", "plain")])
    c = _checkpoints(wd, home)
    one = c.snapshot().tree
    (wd / "a").unlink()
    write(wd, [("a/inner", "now a dir")])
    (wd / "b/x").unlink()
    (wd / "b").rmdir()
    write(wd, [("b", "now a file")])
    (wd / "c").unlink()
    os.symlink("a/inner", wd / "c")
    two = c.snapshot().tree
    _restore(c, one)
    assert c.snapshot().tree == one and (wd / "a").read_text() == "file a"
    _restore(c, two)
    assert c.snapshot().tree == two and os.readlink(wd / "c") == "a/inner"


def test_external_edit_is_a_conflict_and_keep_mine_keeps_it(tmp_path: Path) -> None:
    wd, c, old, new = _scenario(tmp_path)
    (wd / "src/app.py").write_text("the user's own edit\n")  # not seen by any snapshot
    (wd / "unrelated.txt").write_text("new file of the user's\n")
    now, plan = c.plan(old, last=new)
    assert "src/app.py" in plan.conflicts
    assert "unrelated.txt" in plan.conflicts  # absent in the target: a removal of user work
    assert now.tree != new  # the user's edit is in the "before" snapshot: never lost
    mine = plan.without(plan.conflicts)
    assert mine.conflicts == () and set(mine.kept) == set(plan.conflicts)
    c.apply(mine)
    c.finish()
    assert (wd / "src/app.py").read_text() == "the user's own edit\n"
    assert (wd / "doomed.txt").exists()  # the rest was restored
    # and the user's edit can be had back from the before snapshot
    _restore(c, now.tree)
    assert c.snapshot().tree == now.tree


def test_plan_is_refused_when_disk_changed_since(tmp_path: Path) -> None:
    wd, c, old, _new = _scenario(tmp_path)
    _, plan = c.plan(old)
    (wd / "src/util.py").write_text("changed after planning\n")
    state = tree_state(wd)
    with pytest.raises(PlanStale):
        c.apply(plan)
    assert tree_state(wd) == state
    assert c.restorer.pending() is None


def test_symlink_swapped_in_cannot_redirect_writes_outside(tmp_path: Path) -> None:
    """``d`` swapped for a link to a directory outside, after the plan (below the
    facade's staleness check, on purpose): ``d/x`` no longer holds what the plan
    saw, so it is left and reported; a path to create under ``d`` fails on the
    link and the restore is undone; nothing is ever written outside."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    outside = tmp_path / "outside"
    outside.mkdir()
    write(wd, [("d/x", "old x"), ("d/y", "old y")])
    c = _checkpoints(wd, home)
    old = c.snapshot().tree
    (wd / "d/x").write_text("new x")
    _, plan = c.plan(old)
    (wd / "d").rename(tmp_path / "moved")
    os.symlink(outside, wd / "d")  # swapped in after the plan
    got = c.restorer.apply(plan)
    c.finish()
    assert got == [] and got.left == {"d/x": "changed during the restore"}
    assert list(outside.iterdir()) == []
    (wd / "d").unlink()
    (tmp_path / "moved").rename(wd / "d")
    (wd / "d/y").unlink()
    _, plan = c.plan(old)  # writes d/x and creates d/y
    (wd / "d").rename(tmp_path / "moved2")
    os.symlink(outside, wd / "d")
    with pytest.raises(RestoreError, match=r"failed and was undone: .*'d' is not a directory"):
        c.restorer.apply(plan)
    assert list(outside.iterdir()) == [] and c.restorer.pending() is None


def test_recovery_does_not_follow_a_swapped_in_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restore that removed ``d/x`` is killed; ``d`` becomes a link to a
    directory outside; recovery, putting ``d/x`` back, refuses to write through
    it, naming the path, and keeps the journal until the link is gone."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    outside = tmp_path / "outside"
    outside.mkdir()
    write(wd, [("a.txt", "old a")])
    c = _checkpoints(wd, home)
    old = c.snapshot().tree
    write(wd, [("a.txt", "new a"), ("d/x", "new x")])
    _, plan = c.plan(old)  # removes d/x (and d), writes a.txt

    def killed(disk: restore_module._Disk, info: FileInfo) -> None:
        raise KeyboardInterrupt  # as a kill: no undo, the journal stays

    monkeypatch.setattr(restore_module._Disk, "put", killed)
    with pytest.raises(KeyboardInterrupt):
        c.apply(plan)
    monkeypatch.undo()
    assert not (wd / "d").exists() and c.restorer.pending() is not None
    os.symlink(outside, wd / "d")
    with pytest.raises(RestoreError, match="'d' is not a directory"):
        c.recover()
    assert list(outside.iterdir()) == [] and c.restorer.pending() is not None
    (wd / "d").unlink()
    got = c.recover()
    assert got is not None and got.action == "rolled back" and got.left == {}
    assert (wd / "d/x").read_text() == "new x" and (wd / "a.txt").read_text() == "new a"
    assert list(outside.iterdir()) == []


def test_a_failing_step_is_undone_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a.txt", "old a"), ("b/c.txt", "old c"), ("z.txt", "old z")])
    c = _checkpoints(wd, home)
    old = c.snapshot().tree
    write(wd, [("a.txt", "new a"), ("b/c.txt", "new c"), ("z.txt", "new z")])
    newer = c.snapshot().tree
    _, plan = c.plan(old)
    real_put = restore_module._Disk.put
    failed: list[str] = []

    def put(disk: restore_module._Disk, info: FileInfo) -> None:
        if info.path == "z.txt" and not failed:  # the last write, once: the disk is full
            failed.append(info.path)
            raise OSError(28, "No space left on device")
        real_put(disk, info)

    monkeypatch.setattr(restore_module._Disk, "put", put)
    with pytest.raises(RestoreError, match=r"failed and was undone: .*No space left"):
        c.apply(plan)
    assert failed == ["z.txt"]
    assert c.snapshot().tree == newer and c.restorer.pending() is None


def test_git_paths_in_a_tree_are_never_written(tmp_path: Path) -> None:
    from infai.store.trees import TreeEntry, encode_tree

    wd, home = tmp_path / "wd", tmp_path / "home"
    init_repo(wd)
    git_before = hash_git_dir(wd)
    c = _checkpoints(wd, home)
    objects = c.objects
    blob = objects.put(b"[core]\n\thooksPath = /tmp/evil\n")
    git_tree = objects.put(encode_tree([TreeEntry("config", "file", blob, 30)]))
    root = tree_files(objects, c.snapshot().tree)
    entries = [TreeEntry(p, "file", f.digest, f.size) for p, f in root.items()]
    hostile = objects.put(encode_tree([*entries, TreeEntry(".git", "dir", git_tree, 30)]))
    _, plan = c.plan(hostile)
    assert plan.actions == () and plan.not_restorable == {
        ".git/config": "inside .git (never touched)"
    }
    c.apply(plan)
    assert hash_git_dir(wd) == git_before


def test_interrupted_restore_blocks_the_next_until_recovered(tmp_path: Path) -> None:
    _wd, c, old, _new = _scenario(tmp_path)
    now, plan = c.plan(old)
    # applied, but "recorded" never happened: the journal remains
    c.apply(plan, metadata={"source": "ev-1", "before": "ev-2"})
    with pytest.raises(RestorePending):
        c.apply(plan)
    with pytest.raises(RestorePending):
        c.plan(old)
    got = c.recover()
    assert got is not None and got.action == "completed"
    assert (got.target, got.before) == (old, now.tree)
    assert got.metadata == {"source": "ev-1", "before": "ev-2"}  # to record the restore
    assert sorted(got.touched) == sorted(plan.touched)
    assert c.recover() is None


def test_snapshotter_without_cache_sees_restored_state(tmp_path: Path) -> None:
    wd, c, old, _new = _scenario(tmp_path)
    _restore(c, old)
    fresh = Snapshotter(c.objects, wd, clock=later, size_cap=4096).snapshot()
    assert fresh.tree == old


def test_files_left_alone_beyond_the_listed_cap_are_still_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.checkpoints import snapshot as snapshot_module

    monkeypatch.setattr(snapshot_module, "SKIPPED_LIST_CAP", 1)
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [(f"f{i}.bin", b"small") for i in range(5)])
    c = _checkpoints(wd, home, size_cap=100)
    old = c.snapshot().tree
    write(wd, [(f"f{i}.bin", b"x" * 200) for i in range(5)])  # all over the cap now
    state = tree_state(wd)
    now, plan = c.plan(old)
    assert len(now.skipped) == 1 and now.skipped_more == 4
    assert plan.actions == () and len(plan.not_restorable) == 5
    c.apply(plan)
    assert tree_state(wd) == state


def test_a_restore_running_elsewhere_is_neither_joined_nor_recovered(tmp_path: Path) -> None:
    import fcntl

    wd, c, old, _new = _scenario(tmp_path)
    _, plan = c.plan(old)
    state = tree_state(wd)
    lock = c.restorer.journal.with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as held:  # another process in the middle of a restore
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(RestoreError, match="another process is restoring"):
            c.restorer.apply(plan)
        with pytest.raises(RestoreError, match="another process is restoring"):
            c.recover()
    assert tree_state(wd) == state
    c.apply(plan)  # the lock is free again
    c.finish()
    assert c.snapshot().tree == old

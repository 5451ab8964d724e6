"""Empty directories are part of a snapshot: recorded as an entry naming the empty
tree, listed and diffed as paths of their own, recreated and removed by restores
(and by a restore's rollback); a directory whose every entry is left out is not
recorded and a restore leaves it alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ckpt_support import contents, init_repo, later, write
from infai.checkpoints import Checkpoints, Restorer, diff_trees
from infai.store.file.objects import FileObjects
from infai.store.trees import EMPTY_TREE, decode_tree, encode_tree


def _checkpoints(wd: Path, home: Path) -> Checkpoints:
    c = Checkpoints(FileObjects(home), wd, home)
    c.snapshotter._clock = later
    return c


def _restore(c: Checkpoints, target: str) -> list[str]:
    _, plan = c.plan(target)
    touched = c.apply(plan)
    c.finish()
    return touched


def _dirs(root: Path) -> set[str]:
    return {p for p in contents(root) if p.endswith("/")}


def test_the_empty_tree_digest_is_that_of_an_encoded_empty_tree() -> None:
    from infai.store.codec import digest_of

    assert digest_of(encode_tree([])) == EMPTY_TREE


def test_empty_directories_are_recorded_listed_and_diffed(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    init_repo(wd)
    (wd / "empty" / "deeper").mkdir(parents=True)
    (wd / "alone").mkdir()
    c = _checkpoints(wd, home)
    first = c.snapshot()
    files = c.files(first.tree)
    assert files["alone"].type == "dir" and files["alone"].digest == EMPTY_TREE
    assert files["empty/deeper"].type == "dir" and "empty" not in files
    root = {e.name: e for e in decode_tree(c.objects.get(first.tree))}
    assert root["alone"].type == "dir" and root["alone"].digest == EMPTY_TREE
    (wd / "alone" / "now.txt").write_text("x")
    (wd / "empty" / "deeper").rmdir()
    second = c.snapshot(previous=first.tree)
    changes = {(ch.path, ch.kind) for ch in diff_trees(c.objects, first.tree, second.tree)}
    assert changes == {
        ("alone", "removed"),
        ("alone/now.txt", "added"),
        ("empty/deeper", "removed"),
        ("empty", "added"),
    }
    report = c.diff(first.tree, second.tree)
    assert ("empty", "new empty directory\n") in report.text
    assert ("empty/deeper", "deleted empty directory\n") in report.text
    c.close()


def test_restores_recreate_and_remove_empty_directories(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    init_repo(wd)
    write(wd, [("src/a.py", "a"), ("data/keep.txt", "k")])
    (wd / "build" / "out").mkdir(parents=True)
    (wd / "logs").mkdir()
    c = _checkpoints(wd, home)
    old = c.snapshot().tree
    before = contents(wd)
    subprocess.run(
        ["bash", "-ec", "rm -r build logs; mkdir -p new/empty; rm data/keep.txt; touch f"],
        cwd=wd,
        check=True,
    )
    newer = c.snapshot().tree
    after = contents(wd)
    assert "data/" in after and "new/empty/" in after  # data/ is empty now: recorded
    touched = _restore(c, old)
    assert contents(wd) == before
    assert {"build/out", "logs", "new/empty", "data/keep.txt", "f"} <= set(touched)
    _restore(c, newer)
    assert contents(wd) == after
    c.close()


def test_a_directory_of_ignored_files_is_not_recorded_nor_removed(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    init_repo(wd)
    write(wd, [(".gitignore", "*.o\n")])
    c = _checkpoints(wd, home)
    old = c.snapshot().tree
    write(wd, [("obj/x.o", "object")])
    result = c.snapshot()
    assert "obj" not in c.files(result.tree) and result.skipped == {"obj/x.o": "ignored"}
    _restore(c, old)
    assert (wd / "obj" / "x.o").read_text() == "object"
    c.close()


def test_a_rolled_back_restore_puts_empty_directories_back(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    init_repo(wd)
    c = _checkpoints(wd, home)
    old = c.snapshot().tree
    (wd / "e1").mkdir()
    (wd / "e2" / "inner").mkdir(parents=True)
    _, plan = c.plan(old)
    before = _dirs(wd)
    assert {"e1/", "e2/", "e2/inner/"} <= before
    restorer = Restorer(c.objects, wd, home)
    restorer.apply(plan, {})  # a process killed after applying, before recording...
    assert not (wd / "e1").exists() and not (wd / "e2").exists()
    body = restorer.pending()
    assert body is not None
    body["phase"] = "applying"  # ...or while applying: the next open rolls back
    restorer._write_journal(body)
    got = restorer.recover()
    assert got is not None and got.action == "rolled back"
    assert _dirs(wd) == before
    c.close()

"""Listing a snapshot's files and the changes between snapshots or a snapshot
and the disk: kinds of change, unified diffs of text, binary changes listed."""

from __future__ import annotations

import os
from pathlib import Path

from ckpt_support import later, write
from infai.checkpoints import Checkpoints, diff_trees
from infai.store.file.objects import FileObjects


def _c(tmp_path: Path) -> tuple[Path, Checkpoints]:
    wd, home = tmp_path / "wd", tmp_path / "home"
    wd.mkdir()
    c = Checkpoints(FileObjects(home), wd, home)
    c.snapshotter._clock = later
    return wd, c


def test_every_kind_of_change(tmp_path: Path) -> None:
    wd, c = _c(tmp_path)
    write(
        wd,
        [
            ("same.txt", "same\n"),
            ("edit.txt", "one\ntwo\nthree\n"),
            ("gone.txt", "bye\n"),
            ("mode.sh", "echo\n"),
            ("kind", "a file\n"),
            ("becomes_dir", "file\n"),
            ("img.bin", b"\x89PNG\0\1\2"),
            ("deep/a/b.txt", "b\n"),
        ],
    )
    a = c.snapshot().tree
    write(
        wd, [("edit.txt", "one\nTWO\nthree\n"), ("added.txt", "hi\n"), ("img.bin", b"\x89PNG\0\3")]
    )
    (wd / "gone.txt").unlink()
    (wd / "mode.sh").chmod(0o755)
    (wd / "kind").unlink()
    os.symlink("same.txt", wd / "kind")
    (wd / "becomes_dir").unlink()
    write(wd, [("becomes_dir/inside", "x\n")])
    b = c.snapshot(previous=a)
    kinds = {(ch.path, ch.kind) for ch in diff_trees(c.objects, a, b.tree)}
    assert kinds == {
        ("edit.txt", "modified"),
        ("added.txt", "added"),
        ("img.bin", "modified"),
        ("gone.txt", "removed"),
        ("mode.sh", "mode"),
        ("kind", "type"),
        ("becomes_dir", "removed"),
        ("becomes_dir/inside", "added"),
    }
    assert b.changed == len(kinds)
    report = c.diff(a, b.tree)
    text = dict(report.text)
    assert "-two\n+TWO\n" in text["edit.txt"] and text["edit.txt"].startswith("--- a/edit.txt")
    assert text["added.txt"].startswith("--- /dev/null\n+++ b/added.txt")
    assert text["mode.sh"] == "mode 644 -> 755\n"
    assert "+-> same.txt" in text["kind"]
    assert [ch.path for ch in report.binary] == ["img.bin"]
    assert report.to_obj()["binary"] == ["img.bin"]


def test_files_listing_and_diff_against_the_disk_now(tmp_path: Path) -> None:
    wd, c = _c(tmp_path)
    write(wd, [("a.txt", "a\n"), ("d/b.txt", "bb\n")])
    (wd / "d/b.txt").chmod(0o755)
    a = c.snapshot().tree
    listing = {p: (f.size, f.executable, f.type) for p, f in c.files(a).items()}
    assert listing == {"a.txt": (2, False, "file"), "d/b.txt": (3, True, "file")}
    assert list(c.files(a)) == ["a.txt", "d/b.txt"]
    (wd / "a.txt").write_text("changed\n")
    report = c.diff(a)  # to the working directory now
    assert [ch.path for ch in report.changes] == ["a.txt"]
    assert "+changed\n" in dict(report.text)["a.txt"]


def test_equal_subtrees_are_not_read(tmp_path: Path) -> None:
    wd, c = _c(tmp_path)
    write(wd, [(f"big/{i}.txt", str(i)) for i in range(50)] + [("top.txt", "1")])
    a = c.snapshot().tree
    (wd / "top.txt").write_text("2")
    b = c.snapshot().tree
    reads: list[str] = []
    real_get = c.objects.get

    def get(digest: str) -> bytes:
        reads.append(digest)
        return real_get(digest)

    c.objects.get = get  # type: ignore[method-assign]
    assert [ch.path for ch in diff_trees(c.objects, a, b)] == ["top.txt"]
    assert reads == [a, b]  # the two roots only: big/ has one digest on both sides

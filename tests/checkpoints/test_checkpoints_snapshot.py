"""Snapshots of real working directories: what is recorded, what is skipped and
why, agreement with git on ignored files, and the stat cache (an unchanged tree
is walked with ``lstat`` only: nothing hashed, nothing written)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ckpt_support import CountingObjects, git, git_env, init_repo, later, write
from infai.checkpoints import Snapshotter, tree_files
from infai.checkpoints import snapshot as snapshot_module
from infai.store.file.objects import FileObjects


def _snap(wd: Path, home: Path, **kw: object) -> Snapshotter:
    return Snapshotter(FileObjects(home), wd, home=home, clock=later, **kw)  # type: ignore[arg-type]


def test_files_links_modes_and_binary_are_recorded(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    init_repo(wd)
    write(wd, [("src/a.py", "print(1)\n"), ("bin/data", bytes(range(256)) * 4)])
    (wd / "run.sh").write_text("#!/bin/sh\n")
    (wd / "run.sh").chmod(0o755)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not in the snapshot")
    os.symlink(outside, wd / "out")  # a link to a directory outside: recorded as a link
    os.symlink("src/a.py", wd / "alias")
    snap = _snap(wd, home)
    result = snap.snapshot()
    files = tree_files(snap.objects, result.tree)
    assert set(files) == {"README.md", "src/a.py", "bin/data", "run.sh", "out", "alias"}
    assert files["run.sh"].executable and not files["src/a.py"].executable
    assert files["out"].type == "link"
    assert snap.objects.get(files["out"].digest) == os.fsencode(outside)
    assert snap.objects.get(files["alias"].digest) == b"src/a.py"
    assert snap.objects.get(files["bin/data"].digest) == bytes(range(256)) * 4
    assert result.files == 6
    assert result.bytes == sum(f.size for f in files.values())


def test_git_dir_is_never_entered_or_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    init_repo(wd)
    write(wd, [("sub/.git/config", "a nested repository's git dir"), ("sub/f", "f")])
    entered: list[str] = []
    opened: list[str] = []
    real_scandir, real_open = os.scandir, os.open

    def scandir(path: str) -> object:
        entered.append(str(path))
        return real_scandir(path)

    def os_open(path: str, *args: object, **kw: object) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "open", os_open)
    result = _snap(wd, home).snapshot()
    assert entered and not [p for p in entered + opened if "/.git" in p]
    assert set(tree_files(FileObjects(home), result.tree)) == {"README.md", "sub/f"}
    assert not any(".git" in p for p in result.skipped)


# paths and .gitignore files chosen for the corners of git's rules: negation,
# anchoring, directory-only patterns, ** in the middle, a deeper file
# overriding a shallower one, and re-inclusion inside an excluded directory
# (which git does not do)
_IGNORES = {
    ".gitignore": "*.log\n!keep.log\nbuild/\n/rootonly.txt\ndoc/**/*.tmp\nfoo/bar\n**/cache\n"
    "*.o\nlogs/\n!build/wanted\n\\#hash\nspace\\ \n",
    "sub/.gitignore": "!*.o\nlocal.txt\n/anch.txt\n!important.log\nnested/*\n!nested/ok\n",
    "sub/deeper/.gitignore": "*.o\n!keep.log\n!/rootonly.txt\n",
}
_PATHS = [
    "a.log",
    "keep.log",
    "x/keep.log",
    "build/out",
    "build/wanted",
    "x/build/out",
    "rootonly.txt",
    "x/rootonly.txt",
    "doc/a/b/c.tmp",
    "doc/c.tmp",
    "doc/x.txt",
    "foo/bar",
    "x/foo/bar",
    "cache/f",
    "x/y/cache/f",
    "cache.txt",
    "m.o",
    "sub/m.o",
    "sub/deeper/m.o",
    "sub/local.txt",
    "sub/x/local.txt",
    "sub/anch.txt",
    "sub/x/anch.txt",
    "sub/important.log",
    "sub/other.log",
    "sub/deeper/keep.log",
    "sub/deeper/rootonly.txt",
    "sub/nested/a",
    "sub/nested/ok",
    "a/logs",
    "b/logs/f",
    "#hash",
    "x/#hash",
    "space ",
    "plain.txt",
    "sub/plain.txt",
]


def test_ignored_files_agree_with_git(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    init_repo(wd)
    write(wd, list(_IGNORES.items()))
    write(wd, [(p, p) for p in _PATHS])
    listed = git(wd, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    expected = set(filter(None, listed.split("\0")))
    result = _snap(wd, home).snapshot()
    recorded = set(tree_files(FileObjects(home), result.tree))
    assert recorded == expected
    # every file git ignores is covered by a skipped entry (a directory git does
    # not enter is one entry), and git ignores every skipped entry
    ignored = git(wd, "ls-files", "-z", "--others", "--ignored", "--exclude-standard")
    for path in filter(None, ignored.split("\0")):
        parts = path.split("/")
        covers = [path] + ["/".join(parts[:n]) + "/" for n in range(1, len(parts))]
        assert any(c in result.skipped for c in covers), path
    checked = subprocess.run(
        ["git", "check-ignore", "--stdin", "-z"],
        cwd=wd,
        input="\0".join(result.skipped).encode(),
        capture_output=True,
        env=git_env(tmp_path),
    )
    assert set(filter(None, checked.stdout.decode().split("\0"))) == set(result.skipped)
    assert set(result.skipped.values()) == {"ignored"}


def test_ignore_rules_follow_a_changed_gitignore_with_a_warm_cache(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a/x.tmp", "x"), ("a/y.txt", "y"), ("b.txt", "b")])
    snap = _snap(wd, home)
    first = snap.snapshot()
    assert set(tree_files(snap.objects, first.tree)) == {"a/x.tmp", "a/y.txt", "b.txt"}
    (wd / ".gitignore").write_text("*.tmp\n")
    second = snap.snapshot()
    assert set(tree_files(snap.objects, second.tree)) == {".gitignore", "a/y.txt", "b.txt"}
    assert second.skipped == {"a/x.tmp": "ignored"}
    (wd / ".gitignore").unlink()
    third = snap.snapshot()
    assert third.tree == first.tree


def test_oversized_special_and_collapsed_skips_are_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("big.bin", b"x" * 2000), ("small", "s"), (".gitignore", "node_modules/\n*.pyc\n")])
    write(wd, [(f"node_modules/p{i}/index.js", "x") for i in range(20)])
    write(wd, [(f"c{i}.pyc", "x") for i in range(5)])
    os.mkfifo(wd / "pipe")
    monkeypatch.setattr(snapshot_module, "SKIPPED_LIST_CAP", 4)
    result = _snap(wd, home, size_cap=1000).snapshot()
    assert set(tree_files(FileObjects(home), result.tree)) == {"small", ".gitignore"}
    everything = {
        "big.bin": "over the size cap (2000 > 1000 bytes)",
        "node_modules/": "ignored",
        "pipe": "not a regular file, directory or symlink",
        **{f"c{i}.pyc": "ignored" for i in range(5)},
    }
    assert len(result.skipped) == 4 and result.skipped_more == len(everything) - 4
    assert all(everything[p] == why for p, why in result.skipped.items())
    record = result.record("turn start")
    assert record.skipped == result.skipped and record.metadata == {"skipped_more": 4}


def test_unchanged_tree_hashes_and_writes_nothing(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    init_repo(wd)
    write(wd, [(f"d{i % 7}/e{i % 3}/f{i}.txt", f"content {i}") for i in range(300)])
    objects = CountingObjects(home)
    first = Snapshotter(objects, wd, home=home, clock=later).snapshot()
    assert first.hashed == 301
    stored = objects.stats()
    objects.batches = objects.puts = 0
    # a new process: the cache comes from its file under the home
    again = Snapshotter(objects, wd, home=home, clock=later)
    second = again.snapshot(previous=first.tree)
    assert (second.tree, second.hashed, second.changed) == (first.tree, 0, 0)
    assert (objects.batches, objects.puts) == (0, 0)
    assert objects.stats() == stored
    assert again.snapshot().hashed == 0


def test_one_changed_file_rehashes_one_file_and_its_trees(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [(f"d{i % 7}/e{i % 3}/f{i}.txt", f"content {i}") for i in range(300)])
    objects = CountingObjects(home)
    snap = Snapshotter(objects, wd, home=home, clock=later)
    first = snap.snapshot()
    (wd / "d1/e1/f1.txt").write_text("changed!")
    objects.puts = 0
    second = snap.snapshot(previous=first.tree)
    assert (second.hashed, second.changed) == (1, 1)
    assert objects.puts == 1 + 3  # the file, and the trees d1/e1, d1 and the root
    fresh = Snapshotter(objects, wd, clock=later).snapshot()  # no cache: hashes all
    assert fresh.tree == second.tree and fresh.hashed == 300


def test_racy_files_are_hashed_again(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("old.txt", "old"), ("new.txt", "new")])
    now = os.stat(wd / "new.txt").st_ctime_ns
    # the snapshot runs 4 s after both files' ctime; new.txt's mtime is 1 s after
    # the snapshot (as if written in its tick), old.txt's long before
    os.utime(wd / "old.txt", ns=(now - 10**12, now - 10**12))
    os.utime(wd / "new.txt", ns=(now + 5 * 10**9, now + 5 * 10**9))
    clock = now + 4 * 10**9
    # (without the change watcher: with it, an unchanged directory is not looked
    # at, racy files or not; see test_checkpoints_watch.py)
    snap = Snapshotter(FileObjects(home), wd, home=home, clock=lambda: clock, watch=False)
    assert snap.snapshot().hashed == 2
    # new.txt was modified within 2 s of the snapshot: a same-size rewrite in the
    # same tick would keep its key, so it is not trusted from the cache
    assert snap.snapshot().hashed == 1


def test_cache_is_dropped_when_gc_moved_the_generation(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a", "a"), ("b", "b")])
    objects = FileObjects(home)
    snap = Snapshotter(objects, wd, home=home, clock=later)
    first = snap.snapshot()
    files = tree_files(objects, first.tree)
    objects.remove([files["a"].digest])  # as gc would: "a" is gone from the store
    second = snap.snapshot()
    assert second.hashed == 2 and objects.has(files["a"].digest)


def test_damaged_cache_file_is_ignored(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a", "a")])
    snap = Snapshotter(FileObjects(home), wd, home=home, clock=later)
    first = snap.snapshot()
    cache = snap.cache.path
    data = bytearray(cache.read_bytes())
    data[-3] ^= 0xFF
    cache.write_bytes(bytes(data))
    again = Snapshotter(FileObjects(home), wd, home=home, clock=later).snapshot()
    assert again.tree == first.tree and again.hashed == 1


def test_unreadable_file_is_skipped_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("ok", "ok"), ("locked", "no")])
    real_open = os.open

    def os_open(path: str, *args: object, **kw: object) -> int:
        if str(path).endswith("/locked"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", os_open)  # (tests run as root, where chmod 0 reads)
    result = _snap(wd, home).snapshot()
    assert set(tree_files(FileObjects(home), result.tree)) == {"ok"}
    assert result.skipped == {"locked": "unreadable: Permission denied"}


def test_git_check_ignore_is_available() -> None:
    assert subprocess.run(["git", "--version"], capture_output=True).returncode == 0


def test_cached_snapshots_equal_uncached_ones_under_random_changes(tmp_path: Path) -> None:
    """The stat cache's fast paths never hide a change: after each random edit,
    the cached snapshot's tree is the one a cold walk (reading every byte) makes."""
    import random

    wd, home = tmp_path / "wd", tmp_path / "home"
    rng = random.Random(1414)
    write(wd, [(f"d{i % 4}/s{i % 3}/f{i}", f"{i}") for i in range(40)])
    objects = FileObjects(home)
    snap = Snapshotter(objects, wd, home=home, clock=later)
    snap.snapshot()

    def files() -> list[Path]:
        return sorted(p for p in wd.rglob("*") if p.is_file() and not p.is_symlink())

    def grow(p: Path) -> None:  # every content change also changes the size
        p.write_bytes(p.read_bytes() + b"+")

    def rename(p: Path) -> None:
        p.rename(p.with_name(f"{p.name}r{rng.random()}"))

    def into_dir(p: Path) -> None:
        p.unlink()
        write(p, [("inner", "x")])

    ops: list[Callable[[Path], object]] = [
        grow,
        lambda p: p.unlink(),
        lambda p: p.chmod(p.stat().st_mode ^ 0o100),
        rename,
        into_dir,
        lambda p: write(wd, [(f"new{rng.random()}/x", "n")]),
        lambda p: (wd / ".gitignore").write_text(rng.choice(["f1*\n", "s1/\n", "*r\n", ""])),
        lambda p: os.symlink(p.name, p.with_name(f"{p.name}.{rng.random()}.ln")),
        lambda p: write(wd, [(f"{p.parent.relative_to(wd)}/{p.name}.tmp", "t")]),
    ]
    for _ in range(40):
        for _ in range(rng.randint(1, 3)):
            rng.choice(ops)(rng.choice(files()))
        cached = snap.snapshot()
        cold = Snapshotter(objects, wd, clock=later).snapshot()
        assert cached.tree == cold.tree
        assert cached.skipped == cold.skipped


def test_cache_file_is_written_at_most_every_interval_and_on_flush(tmp_path: Path) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    write(wd, [("a", "a"), ("b", "b")])
    snap = _snap(wd, home)
    snap.snapshot()  # the first snapshot writes the file
    (wd / "a").write_text("aa")
    snap.snapshot()  # within the interval: in memory only
    assert Snapshotter(FileObjects(home), wd, home=home, clock=later).snapshot().hashed == 1
    snap.flush()
    assert Snapshotter(FileObjects(home), wd, home=home, clock=later).snapshot().hashed == 0


def test_a_working_directory_that_is_gone_is_a_clear_error(tmp_path: Path) -> None:
    """It was a bare AssertionError (shown as 'snapshot failed: AssertionError:')."""
    from infai.checkpoints import SnapshotError

    work = tmp_path / "gone"
    work.mkdir()
    snapshotter = Snapshotter(FileObjects(tmp_path / "home"), work, home=tmp_path / "home")
    work.rmdir()
    with pytest.raises(SnapshotError, match=r"gone: the working directory is unreadable"):
        snapshotter.snapshot()

"""A warm snapshot's shortcuts against the truth: after random edits (files
created, rewritten with the same size and mtime, deleted, renamed, chmod-ed,
directories made, removed and replaced, ``.gitignore`` files edited, links,
fifos), the watched snapshotter's tree, skipped paths and stat cache are
exactly what a fresh snapshotter's full walk finds. The shortcuts it checks:
carrying the last walk's maps over and pruning only what went away, and taking
a file's row from the cache when the watcher saw no event naming it."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ckpt_support import later
from infai.checkpoints import Snapshotter
from infai.checkpoints import watch as watch_module
from infai.store.file.objects import FileObjects

pytestmark = pytest.mark.skipif(not watch_module.Watcher().ok, reason="no inotify on this system")

_DIRS = ["", "a/", "b/", "a/x/", "a/y/", "b/z/", "a/x/deep/"]
_NAMES = ["f0", "f1", "f2", "g.log", "h", "ign"]
_IGNORES = [b"*.log\n", b"ign\n", b"f1\n", b"x/\n", b"!g.log\n*.log\n", b"deep/\n"]


def _files(wd: Path) -> list[Path]:
    """Files, links and fifos (every non-directory)."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(wd):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        out.extend(Path(dirpath, n) for n in filenames)
    return sorted(out)


def _dirs(wd: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, _ in os.walk(wd):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        out.extend(p for p in (Path(dirpath, n) for n in dirnames) if not p.is_symlink())
    return sorted(out)


def _spot(wd: Path, rng: random.Random) -> Path:
    where = wd / rng.choice(_DIRS)
    where.mkdir(parents=True, exist_ok=True)
    return where / rng.choice(_NAMES)


def _regular(wd: Path) -> list[Path]:
    return [p for p in _files(wd) if not p.is_symlink() and p.is_file()]


def _same_size_same_mtime(wd: Path, rng: random.Random) -> None:
    files = _regular(wd)
    if files:
        path = rng.choice(files)
        st = path.stat()
        path.write_bytes(bytes(rng.randrange(256) for _ in range(st.st_size)))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _create(wd: Path, rng: random.Random) -> None:
    path = _spot(wd, rng)
    if (path.is_file() and not path.is_symlink()) or not os.path.lexists(path):
        path.write_bytes(rng.randbytes(rng.randrange(1, 40)))


def _delete(wd: Path, rng: random.Random) -> None:
    files = _files(wd)
    if files:
        rng.choice(files).unlink()


def _rename(wd: Path, rng: random.Random) -> None:
    files = _files(wd)
    target = _spot(wd, rng)
    if files and not target.is_dir():
        rng.choice(files).rename(target)


def _chmod(wd: Path, rng: random.Random) -> None:
    files = _regular(wd)
    if files:
        path = rng.choice(files)
        path.chmod(path.stat().st_mode ^ 0o100)


def _rmdir(wd: Path, rng: random.Random) -> None:
    dirs = _dirs(wd)
    if dirs:
        shutil.rmtree(rng.choice(dirs))


def _dir_over_file(wd: Path, rng: random.Random) -> None:
    files = [p for p in _files(wd) if p.name != ".gitignore"]
    if files:
        path = rng.choice(files)
        path.unlink()
        path.mkdir()
        (path / "inner").write_bytes(b"i")


def _file_over_dir(wd: Path, rng: random.Random) -> None:
    dirs = _dirs(wd)
    if dirs:
        path = rng.choice(dirs)
        shutil.rmtree(path)
        path.write_bytes(b"was a directory")


def _gitignore(wd: Path, rng: random.Random) -> None:
    where = wd / rng.choice(_DIRS)
    where.mkdir(parents=True, exist_ok=True)
    path = where / ".gitignore"
    if path.exists() and rng.random() < 0.3:
        path.unlink()
    elif (path.is_file() and not path.is_symlink()) or not os.path.lexists(path):
        path.write_bytes(rng.choice(_IGNORES))


def _link(wd: Path, rng: random.Random) -> None:
    path = _spot(wd, rng)
    if not path.exists() and not path.is_symlink():
        path.symlink_to(rng.choice(["f0", "../f1", "nowhere"]))


def _fifo(wd: Path, rng: random.Random) -> None:
    path = _spot(wd, rng)
    if not path.exists() and not path.is_symlink():
        os.mkfifo(path)


def _rename_dir(wd: Path, rng: random.Random) -> None:
    dirs = _dirs(wd)
    target = wd / rng.choice(["moved", "a/moved", "b/z/moved"])
    if dirs and not target.exists():
        source = rng.choice(dirs)
        if not str(target).startswith(str(source) + "/"):
            source.rename(target)


_EDITS: list[tuple[Callable[[Path, random.Random], None], int]] = [
    (_create, 8),
    (_same_size_same_mtime, 6),
    (_delete, 4),
    (_rename, 3),
    (_chmod, 3),
    (_rmdir, 1),
    (_dir_over_file, 1),
    (_file_over_dir, 1),
    (_gitignore, 3),
    (_link, 2),
    (_fifo, 1),
    (_rename_dir, 1),
]


@pytest.mark.parametrize("seed", range(12))
def test_random_edits_give_what_a_full_walk_gives(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    wd, home = tmp_path / "wd", tmp_path / "home"
    for rel in _DIRS:
        for name in _NAMES[:3]:
            (wd / rel).mkdir(parents=True, exist_ok=True)
            (wd / rel / name).write_bytes(rng.randbytes(rng.randrange(1, 40)))
    # half the seeds see every file as racy for a while (the real clock)
    clock: Callable[[], int] = later if seed % 2 else time.time_ns
    objects = FileObjects(home)
    snap = Snapshotter(objects, wd, home=home, clock=clock)
    snap.snapshot()
    weights = [w for _, w in _EDITS]
    try:
        for step in range(60):
            for _ in range(rng.randrange(1, 4)):
                edit = rng.choices([e for e, _ in _EDITS], weights)[0]
                # (no edit if a path component is now of the other kind)
                with contextlib.suppress(
                    FileExistsError, FileNotFoundError, NotADirectoryError, IsADirectoryError
                ):
                    edit(wd, rng)
            got = snap.snapshot()
            fresh = Snapshotter(objects, wd, clock=clock, watch=False)
            want = fresh.snapshot()
            where = f"seed {seed}, step {step}"
            assert got.tree == want.tree, where
            assert (got.files, got.bytes) == (want.files, want.bytes), where
            assert got.every_skipped == want.every_skipped, where
            # the stat cache and the skips kept for the next walk: nothing stale
            assert {p: d.tree for p, d in snap.cache.dirs.items()} == {
                p: d.tree for p, d in fresh.cache.dirs.items()
            }, where
            assert snap._carry is not None and fresh._carry is not None
            assert {p: sorted(s) for p, s in snap._carry[2].items()} == {
                p: sorted(s) for p, s in fresh._carry[2].items()
            }, where
            assert {p: set(s) for p, s in snap._carry[1].items()} == {
                p: set(s) for p, s in fresh._carry[1].items()
            }, where
    finally:
        snap.close()
        objects.close()


def test_the_watcher_notes_the_names_events_are_about() -> None:
    """Events about entries give their names; one about the directory itself
    (no name) means every entry must be looked at."""
    watcher = watch_module.Watcher()
    try:
        watcher._by_wd.update({1: "a/", 2: "b/"})

        def event(wd: int, mask: int, name: bytes) -> bytes:
            padded = name + b"\0" * (-len(name) % 16) if name else b""
            return struct.pack("iIII", wd, mask, 0, len(padded)) + padded

        buf = (
            event(1, watch_module.IN_MODIFY, b"f1")
            + event(1, watch_module.IN_CREATE, b"caf\xc3\xa9")
            + event(2, watch_module.IN_CLOSE_WRITE, b"x")
            + event(2, watch_module.IN_ATTRIB, b"")
        )
        dirty: set[str] = set()
        assert watcher._parse(buf, dirty) is False
        assert dirty == {"a/", "b/"}
        assert watcher.names == {"a/": {"f1", "caf\u00e9"}, "b/": None}
    finally:
        watcher.close()


def test_the_exclude_files_are_read_again_only_when_their_stat_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.checkpoints import repo as repo_module

    wd, home = tmp_path / "wd", tmp_path / "home"
    (wd / ".git" / "info").mkdir(parents=True)
    exclude = wd / ".git" / "info" / "exclude"
    exclude.write_bytes(b"*.a\n")
    (wd / "x.a").write_text("a")
    (wd / "x.b").write_text("b")
    reads: list[int] = []
    from infai.checkpoints.repo import PatternFile
    from infai.checkpoints.repo import read_patterns as real_read

    def counting(paths: list[PatternFile]) -> list[bytes]:
        reads.append(1)
        return real_read(paths)

    monkeypatch.setattr(repo_module, "read_patterns", counting, raising=True)
    objects = FileObjects(home)
    snap = Snapshotter(objects, wd, home=home, clock=later, watch=False)
    try:
        # just written: racy, so read at every snapshot
        assert "x.a" in snap.snapshot().every_skipped
        snap.snapshot()
        assert len(reads) == 2
        # seconds later, the same stat: not read again
        monkeypatch.setattr(repo_module, "_now_ns", lambda: time.time_ns() + 10**10)
        snap.snapshot()
        snap.snapshot()
        assert len(reads) == 2
        # the same size and mtime, other bytes: the ctime says it changed
        st = exclude.stat()
        exclude.write_bytes(b"*.b\n")
        os.utime(exclude, ns=(st.st_atime_ns, st.st_mtime_ns))
        got = snap.snapshot()
        assert len(reads) == 3
        assert "x.b" in got.every_skipped and "x.a" not in got.every_skipped
        exclude.unlink()
        assert got.every_skipped != snap.snapshot().every_skipped
    finally:
        snap.close()
        objects.close()

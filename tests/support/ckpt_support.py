"""Helpers for the harness checkpoint tests: real git repositories, a counting
object store, and a fingerprint of a directory's exact state."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from infai.store.file.objects import FileObjects
from infai.store.objects import ObjectBatch

#: a clock far enough ahead that no file written by a test is "racy"
LATER = 10 * 1_000_000_000


def later() -> int:
    """``time.time_ns()`` plus ten seconds (files written now are not racy)."""
    return time.time_ns() + LATER


def git_env(home: Path) -> dict[str, str]:
    """An environment where git reads no user or system configuration."""
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_SYSTEM=os.devnull,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.invalid",
    )
    return env


def git(wd: Path, *args: str) -> str:
    """Run git in ``wd`` (no user configuration); its stdout."""
    out = subprocess.run(
        ["git", *args], cwd=wd, env=git_env(wd.parent), check=True, capture_output=True
    )
    return out.stdout.decode("utf-8", "surrogateescape")


def init_repo(wd: Path) -> None:
    """A git repository with one commit in ``wd``."""
    wd.mkdir(parents=True, exist_ok=True)
    git(wd, "init", "-q", "-b", "main")
    (wd / "README.md").write_text("hello\n")
    git(wd, "add", "README.md")
    git(wd, "commit", "-q", "-m", "first")


def tree_state(root: Path, skip_git: bool = True) -> dict[str, tuple[str, ...]]:
    """Every path under ``root``: (kind, content digest or link target, mode bits,
    mtime_ns, inode) so "untouched" can be asserted exactly."""
    out: dict[str, tuple[str, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if skip_git and ".git" in dirnames and Path(dirpath) == root:
            dirnames.remove(".git")
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel + "/"] = ("dir",)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[rel] = (
                    "file",
                    digest,
                    oct(stat.S_IMODE(st.st_mode)),
                    str(st.st_mtime_ns),
                    str(st.st_ino),
                )
    return out


def contents(root: Path) -> dict[str, tuple[str, ...]]:
    """Like :func:`tree_state` without mtimes and inodes: what a snapshot restores."""
    return {p: v[:3] if v[0] == "file" else v for p, v in tree_state(root).items()}


def hash_git_dir(root: Path) -> dict[str, str]:
    """Every file under ``root/.git`` with its SHA-256 and mode."""
    out: dict[str, str] = {}
    for dirpath, _, filenames in os.walk(root / ".git"):
        for name in filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[str(path.relative_to(root))] = f"{digest} {oct(st.st_mode)} {st.st_mtime_ns}"
    return out


class CountingObjects(FileObjects):
    """A directory store's objects that count batches and puts (a seam for
    "a snapshot of an unchanged tree writes nothing")."""

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.batches = 0
        self.puts = 0

    def batch(self, *, durable: bool = True) -> AbstractContextManager[ObjectBatch]:  # type: ignore[override]
        self.batches += 1
        return self._counted(super().batch(durable=durable))

    @contextmanager
    def _counted(self, inner: AbstractContextManager[ObjectBatch]) -> Iterator[ObjectBatch]:
        owner = self

        class Counting:
            def __init__(self, real: ObjectBatch) -> None:
                self.real = real

            def put(self, data: bytes) -> str:
                owner.puts += 1
                return self.real.put(data)

        with inner as real:
            yield Counting(real)


def write(root: Path, files: Iterable[tuple[str, bytes | str]]) -> None:
    """Write ``(path, content)`` pairs under ``root`` (parents created)."""
    for rel, data in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            data = data.encode()
        path.write_bytes(data)

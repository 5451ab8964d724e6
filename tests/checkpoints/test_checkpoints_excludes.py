"""Snapshots honour git's whole-tree pattern files as git does: the repository's
``info/exclude`` and the user's global excludes file (``core.excludesFile``, by
default ``$XDG_CONFIG_HOME/git/ignore``), below every ``.gitignore`` in
precedence; checked against ``git check-ignore`` in real repositories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ckpt_support import later, write
from infai.checkpoints import Snapshotter
from infai.store.file.objects import FileObjects


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A user of our own: HOME, XDG_CONFIG_HOME and a global git config under tmp_path
    (the snapshot's ``git config`` and the test's git both see them)."""
    home = tmp_path / "user"
    (home / "xdg").mkdir(parents=True)
    config = home / "gitconfig"
    config.write_text("")
    values = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "xdg"),
        "GIT_CONFIG_GLOBAL": str(config),
        "GIT_CONFIG_SYSTEM": os.devnull,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return dict(os.environ)


def _git(wd: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=wd, env=env, check=True, capture_output=True)
    return done.stdout.decode()


def _repo(wd: Path, env: dict[str, str]) -> None:
    wd.mkdir(parents=True)
    _git(wd, env, "init", "-q", "-b", "main")


def _git_ignored(wd: Path, env: dict[str, str], paths: list[str]) -> set[str]:
    done = subprocess.run(
        ["git", "check-ignore", "--stdin", "-z", "--no-index"],
        cwd=wd,
        env=env,
        input="\0".join(paths).encode(),
        capture_output=True,
    )
    return {p for p in done.stdout.decode().split("\0") if p}


def _skipped(wd: Path, home: Path) -> dict[str, str]:
    snap = Snapshotter(FileObjects(home), wd, home=home, clock=later, watch=False)
    return dict(snap.snapshot().skipped)


_FILES = ["keep.txt", "a.secret", "build/out.o", "notes.log", "keep.log", "x.bak", "d/y.bak"]


def test_info_exclude_is_honoured_like_git(tmp_path: Path, env: dict[str, str]) -> None:
    wd = tmp_path / "wd"
    _repo(wd, env)
    write(wd, [(p, p) for p in _FILES])
    (wd / ".git" / "info").mkdir(exist_ok=True)
    (wd / ".git" / "info" / "exclude").write_text("*.secret\nbuild/\n")
    skipped = _skipped(wd, tmp_path / "home")
    assert skipped == {"a.secret": "ignored", "build/": "ignored"}
    assert _git_ignored(wd, env, [*_FILES, "build"]) == {"a.secret", "build", "build/out.o"}


def test_the_default_global_excludes_file_is_honoured(tmp_path: Path, env: dict[str, str]) -> None:
    wd = tmp_path / "wd"
    _repo(wd, env)
    write(wd, [(p, p) for p in _FILES])
    (Path(env["XDG_CONFIG_HOME"]) / "git").mkdir()
    (Path(env["XDG_CONFIG_HOME"]) / "git" / "ignore").write_text("*.log\n")
    (wd / ".gitignore").write_text("!keep.log\n")  # a .gitignore outranks the global file
    (wd / ".git" / "info" / "exclude").write_text("!notes.log\n*.bak\n")  # and so does this
    skipped = _skipped(wd, tmp_path / "home")
    want = {"x.bak", "d/y.bak"}
    assert set(skipped) == want
    assert _git_ignored(wd, env, _FILES) == want


def test_core_excludes_file_is_found_through_git_config(
    tmp_path: Path, env: dict[str, str]
) -> None:
    wd = tmp_path / "wd"
    _repo(wd, env)
    write(wd, [(p, p) for p in _FILES])
    (Path(env["HOME"]) / "my-ignore").write_text("*.bak\n")
    (Path(env["XDG_CONFIG_HOME"]) / "git").mkdir()
    (Path(env["XDG_CONFIG_HOME"]) / "git" / "ignore").write_text("*.txt\n")  # not in force
    _git(wd, env, "config", "--global", "core.excludesFile", "~/my-ignore")
    skipped = _skipped(wd, tmp_path / "home")
    assert set(skipped) == {"x.bak", "d/y.bak"}
    assert _git_ignored(wd, env, _FILES) == {"x.bak", "d/y.bak"}


def test_a_worktree_reads_its_repository_s_info_exclude(
    tmp_path: Path, env: dict[str, str]
) -> None:
    main = tmp_path / "main"
    _repo(main, env)
    write(main, [("f.txt", "f")])
    _git(main, env, "add", "f.txt")
    _git(main, env, "commit", "-q", "-m", "one")
    (main / ".git" / "info").mkdir(exist_ok=True)
    (main / ".git" / "info" / "exclude").write_text("*.secret\n")
    other = tmp_path / "other"
    _git(main, env, "worktree", "add", "-q", str(other))
    assert (other / ".git").is_file()
    write(other, [("w.secret", "s"), ("w.txt", "t")])
    assert _skipped(other, tmp_path / "home") == {"w.secret": "ignored"}
    assert _git_ignored(other, env, ["w.secret", "w.txt"]) == {"w.secret"}


def test_a_changed_exclude_file_applies_to_the_next_warm_snapshot(
    tmp_path: Path, env: dict[str, str]
) -> None:
    wd, home = tmp_path / "wd", tmp_path / "home"
    _repo(wd, env)
    write(wd, [("a.secret", "s"), ("b.txt", "b")])
    snap = Snapshotter(FileObjects(home), wd, home=home, clock=later)  # watching
    assert snap.snapshot().skipped == {}
    assert snap.snapshot().skipped == {}  # armed: nothing in the tree changes after this
    (wd / ".git" / "info" / "exclude").write_text("*.secret\n")
    assert snap.snapshot().skipped == {"a.secret": "ignored"}
    (wd / ".git" / "info" / "exclude").write_text("")
    assert snap.snapshot().skipped == {}
    snap.close()

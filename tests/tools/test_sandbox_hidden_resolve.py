"""How hidden paths are found: resolved by the kernel (an ``O_PATH`` descriptor's
``/proc/self/fd`` link), with ``os.path.realpath`` where that is not available;
both must find the same paths, links and dangling links included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infai.tools import sandbox_hide
from infai.tools.sandbox_hide import hidden_paths


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "home"
    (root / ".ssh").mkdir(parents=True)
    (root / "dotfiles" / "aws").mkdir(parents=True)
    (root / "dotfiles" / "id").write_text("x")
    (root / ".ssh" / "id").symlink_to(root / "dotfiles" / "id")  # a link in a hidden dir
    (root / ".ssh" / "gone").symlink_to(root / "nowhere")  # dangling
    (root / ".ssh" / "loop").symlink_to(root / ".ssh" / "loop")
    (root / ".aws").symlink_to("dotfiles/aws")  # a relative link entry
    (root / ".netrc").write_text("x")
    (root / ".kube").symlink_to(root / "missing")  # a dangling entry
    (root / "work").mkdir()
    monkeypatch.setenv("HOME", str(root))
    return root


ENTRIES = ("~/.ssh", "~/.aws", "~/.netrc", "~/.kube", "~/.pgpass", "~/.ssh/id")


def expected(home: Path) -> dict[str, bool]:
    return {
        str(home / ".netrc"): False,
        str(home / ".ssh"): True,
        str(home / "dotfiles" / "aws"): True,
        str(home / "dotfiles" / "id"): False,
    }


def test_the_kernel_resolves_what_realpath_would(home: Path) -> None:
    assert hidden_paths(ENTRIES, home / "work") == expected(home)


def test_without_o_path_realpath_finds_the_same(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_hide, "_O_PATH", 0)
    assert hidden_paths(("~/.nothing", *ENTRIES), home / "work") == expected(home)


def test_without_proc_realpath_finds_the_same(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readlink = os.readlink

    def no_proc(path: str) -> str:
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(path)
        return readlink(path)

    monkeypatch.setattr(os, "readlink", no_proc)
    assert hidden_paths(("~/.none", *ENTRIES), home / "work") == expected(home)

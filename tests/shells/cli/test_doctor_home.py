"""``infai doctor`` on ``sandbox.home``: what a command reads of the home directory,
listed and checked in the sandbox (a ``bwrap`` that confines nothing is caught)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A ``$HOME`` outside /tmp with a toolchain (``~/.cargo``), a ``~/.bashrc`` and
    a notes directory, infai's store and config in it."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    root = Path(tempfile.mkdtemp(prefix="infai-doctor-home-", dir=base)).resolve()
    (root / ".cargo" / "bin").mkdir(parents=True)
    (root / ".bashrc").write_text("export KEY=x\n")
    (root / "notes").mkdir()
    (root / "store").mkdir()
    (root / "user.toml").write_text("")
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("INFAI_HOME", str(root / "store"))
    monkeypatch.setenv("INFAI_CONFIG", str(root / "user.toml"))
    monkeypatch.delenv("INFAI_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def doctor(*args: str) -> Result:
    return CliRunner().invoke(main, ["doctor", *args])


def test_doctor_says_what_of_home_a_command_reads(home: Path) -> None:
    (home / "user.toml").write_text('[sandbox]\nunhide = ["~/notes"]\n')
    result = doctor()
    assert result.exit_code == 0, result.output
    assert f"home directory {home}: hidden (sandbox.home)" in result.stdout
    assert "  ~/.cargo\n  ~/notes\n" in result.stdout
    assert "PASS: ~ lists .cargo, notes there" in result.stdout
    report = json.loads(doctor("--json").stdout)
    assert report["home_hidden"] is True
    assert report["home"] == {
        "mode": "hidden",
        "path": str(home),
        "hidden": True,
        "readable": ["~/.cargo", "~/notes"],
        "writable": [],
        "seen": [".cargo", "notes"],
    }


def test_a_writable_root_in_home_is_listed_and_passes(home: Path) -> None:
    (home / "scratch").mkdir()
    (home / "user.toml").write_text('[sandbox]\nwritable = ["~/scratch"]\n')
    result = doctor()
    assert result.exit_code == 0, result.output
    assert "  ~/scratch (writable: sandbox.writable)\n" in result.stdout
    assert "PASS: ~ lists .cargo, scratch there" in result.stdout


def test_visible_home_is_said(home: Path) -> None:
    (home / "user.toml").write_text('[sandbox]\nhome = "visible"\n')
    result = doctor()
    assert result.exit_code == 0, result.output
    assert f"home directory {home}: visible (sandbox.home)" in result.stdout
    report = json.loads(doctor("--json").stdout)
    assert report["home"]["hidden"] is False and ".bashrc" in report["home"]["seen"]


def test_a_bwrap_that_shows_home_is_caught(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')
    fake.chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    result = doctor()
    assert result.exit_code == 1
    assert "FAIL: ~ lists .bashrc, .cargo, notes, store, user.toml there" in result.stdout
    report = json.loads(doctor("--json").stdout)
    assert report["home_hidden"] is False and "home_hidden" in report["reason"]

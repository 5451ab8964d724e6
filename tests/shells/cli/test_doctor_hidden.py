"""``infai doctor``'s hidden paths: which exist and read as empty in the sandbox (read
there for real), which defaults the user's ``unhide`` took out, and infai's own
config and store; names printed inert, everything in ``--json`` too."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed"
)
ODD = "odd\x1b[31mname"  # a hidden entry whose name holds an escape sequence


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A ``$HOME`` outside /tmp (the sandbox replaces /tmp: a home there reads empty
    anyway) with ~/.ssh and ~/.netrc holding secrets, infai's store home and user
    config in it, and a config that unhides ~/.kube and hides one odd name more."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    root = Path(tempfile.mkdtemp(prefix="infai-doctor-hide-", dir=base)).resolve()
    (root / ".ssh").mkdir()
    (root / ".ssh" / "id_ed25519").write_text("SECRET-ssh")
    (root / ".netrc").write_text("SECRET-netrc")
    (root / ODD).write_text("SECRET-odd")
    (root / "store" / "sessions").mkdir(parents=True)
    (root / "store" / "sessions" / "s.json").write_text("SECRET-session")
    (root / "user.toml").write_text(
        '[sandbox]\nunhide = ["~/.kube"]\nhidden = ["~/odd\\u001b[31mname"]\n'
    )
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("INFAI_HOME", str(root / "store"))
    monkeypatch.setenv("INFAI_CONFIG", str(root / "user.toml"))
    monkeypatch.delenv("INFAI_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def doctor(*args: str) -> Result:
    return CliRunner().invoke(main, ["doctor", *args])


def rows(report: dict[str, Any], key: str) -> dict[str, dict[str, Any]]:
    return {r["entry"]: r for r in report[key]}


@needs_bwrap
def test_doctor_lists_the_hidden_paths_and_reads_them_in_the_sandbox(home: Path) -> None:
    result = doctor()
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "\x1b" not in out  # the odd name is shown escaped
    assert "  ~/.ssh                         hidden\n" in out
    assert "  ~/.netrc                       hidden\n" in out
    assert "odd\\x1b[31mname" in out
    assert f"  {home / 'user.toml'}" in out and f"  {home / 'store'}" in out
    assert "hidden (infai's own config and store)" in out
    assert "more configured, not on this machine" in out
    assert "unhidden by your config (sandbox.unhide): ~/.kube\n" in out
    assert "~/.aws" not in out  # configured, not here: counted, not named

    report = json.loads(doctor("--json").stdout)
    assert report["working"] and report["hidden_paths_empty"]
    hidden = rows(report, "hidden")
    assert hidden["~/.ssh"] == {
        "entry": "~/.ssh",
        "path": str(home / ".ssh"),
        "exists": True,
        "inside": None,
        "empty_in_sandbox": True,
    }
    assert hidden["~/.aws"]["exists"] is False and "empty_in_sandbox" not in hidden["~/.aws"]
    assert "~/.kube" not in hidden and report["unhidden"] == ["~/.kube"]
    private = rows(report, "private")
    assert private[str(home / "store")]["empty_in_sandbox"] is True
    sessions = private[str(home / "store" / "sessions")]
    assert sessions["empty_in_sandbox"] is True and sessions["inside"] == str(home / "store")
    assert f"  {home / 'store' / 'sessions'}" not in out  # shown once, as the store


def test_a_sandbox_that_hides_nothing_is_caught(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``bwrap`` that runs the command unconfined: the hidden paths read as what
    they hold, and doctor says so (exit 1)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')
    fake.chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    result = doctor()
    report = json.loads(doctor("--json").stdout)
    assert result.exit_code == 1
    assert "  ~/.ssh                         NOT HIDDEN\n" in result.stdout
    assert report["hidden_paths_empty"] is False and "hidden_paths_empty" in report["reason"]
    assert rows(report, "hidden")["~/.netrc"]["empty_in_sandbox"] is False


def test_with_mode_off_nothing_is_hidden_and_doctor_says_so(home: Path) -> None:
    with (home / "user.toml").open("a") as config:
        config.write('mode = "off"\n')
    result = doctor()
    assert result.exit_code == 1
    assert "hidden paths (none while sandbox.mode is off; with it on):" in result.stdout
    assert "~/.ssh" in result.stdout


def test_a_store_that_cannot_be_opened_leaves_only_its_files_out(home: Path) -> None:
    result = CliRunner().invoke(main, ["--store", "postgresql://127.0.0.1:1/x", "doctor", "--json"])
    assert "the store cannot be opened" in result.stderr
    report = json.loads(result.stdout)
    assert report["private"] == [] and rows(report, "hidden")["~/.ssh"]["exists"]

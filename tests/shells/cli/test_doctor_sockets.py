"""``infai doctor``'s io_uring and Unix-socket checks, against the real bubblewrap
and against one whose seccomp filter was left out (what issue 28 amounted to)."""

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
from uring_shim import io_uring_setup

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "user.toml"))


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fake ``$XDG_RUNTIME_DIR`` outside /tmp (the sandbox's /tmp is its own)."""
    where = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    path = Path(tempfile.mkdtemp(prefix="infai-xdg-", dir=where))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def doctor(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _has_io_uring() -> bool:
    try:
        fd, _ = io_uring_setup(1)
    except OSError:
        return False
    os.close(fd)
    return True


def test_doctor_proves_io_uring_and_unix_sockets_are_out_of_reach(runtime: Path) -> None:
    result = doctor("doctor")
    assert result.exit_code == 0, result.output
    assert "PASS io_uring in the sandbox: EPERM" in result.output
    for where in ("$XDG_RUNTIME_DIR", "/tmp", "working directory"):
        assert f"PASS unix socket listener in {where} unreachable" in result.output
    report = json.loads(doctor("doctor", "--json").output)
    assert report["io_uring_blocked"] and report["unix_sockets_unreachable"]
    rows = {row["where"]: row for row in report["unix_sockets"]}
    assert rows["$XDG_RUNTIME_DIR"]["path"].startswith(str(runtime))
    assert not rows["$XDG_RUNTIME_DIR"]["visible"] and not rows["/tmp"]["visible"]
    assert rows["working directory"]["visible"]  # only the filter stops this one
    assert {row["socket"] for row in rows.values()} == {"EACCES"}
    assert not any(row["reached"] for row in rows.values())
    assert list(runtime.iterdir()) == []  # its listener's directory is gone again


def test_doctor_fails_a_sandbox_without_the_seccomp_filter(
    tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``bwrap`` that confines but drops ``--seccomp FD``: every other check
    passes, these two see the listener reached and (where the kernel has it) a ring."""
    real = shutil.which("bwrap")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        "n=$#; while [ $n -gt 0 ]; do a=$1; shift; n=$((n-1))\n"
        '  if [ "$a" = --seccomp ]; then shift; n=$((n-1)); else set -- "$@" "$a"; fi\n'
        f'done\nexec {real} "$@"\n'
    )
    fake.chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    result = doctor("doctor")
    assert result.exit_code == 1, result.output
    assert "FAIL unix socket listener in working directory unreachable: a connection arrived" in (
        result.output
    )
    assert "unix_sockets_unreachable" in result.output
    # the hidden ones stay hidden (the mounts do not need the filter)
    assert "PASS unix socket listener in $XDG_RUNTIME_DIR unreachable: hidden" in result.output
    if _has_io_uring():
        assert "FAIL io_uring in the sandbox: ring" in result.output

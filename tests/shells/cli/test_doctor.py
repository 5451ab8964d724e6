"""``infai doctor`` / ``infai sandbox check``: exit 0 where the sandbox confines, 1 where not."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in an empty directory with an empty user config (no sandbox settings)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "user.toml"))


def doctor(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
@pytest.mark.parametrize("args", [["doctor"], ["sandbox", "check"]])
def test_doctor_says_the_sandbox_works(args: list[str]) -> None:
    result = doctor(*args)
    assert result.exit_code == 0, result.output
    assert "the sandbox works" in result.output
    assert "write outside blocked  yes" in result.output
    report = json.loads(doctor(*args, "--json").output)
    assert report["working"] and report["probe_ok"] and report["bwrap"]
    assert report["write_outside_blocked"] and report["write_git_blocked"]
    assert report["network_blocked"] and report["write_inside_allowed"]
    assert report["bwrap_version"].startswith("bubblewrap")


def test_doctor_without_bwrap_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = doctor("doctor")
    assert result.exit_code == 1
    assert "bwrap:           not found" in result.output
    assert "bwrap is not on PATH" in result.output
    report = json.loads(doctor("sandbox", "check", "--json").output)
    assert report["working"] is False and report["bwrap"] is None


def test_doctor_reports_a_sandbox_that_does_not_confine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``bwrap`` that runs the command but confines nothing (passes the probe)
    is caught by the real checks, judged on the host."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    # skip the options up to "--" and run the command plainly
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')
    fake.chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    result = doctor("doctor", "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["probe_ok"] and not report["working"]
    assert "did not confine" in report["reason"] and "write_git_blocked" in report["reason"]


#: a bwrap that mounts the root writable (the sandbox's /tmp still a tmpfs of its own)
WRITABLE_ROOT = """#!/bin/bash
args=()
while [ $# -gt 0 ]; do
  if [ "$1" = --ro-bind ] && [ "$2" = / ] && [ "$3" = / ]; then args+=(--bind / /); shift 3
  else args+=("$1"); shift; fi
done
exec {real} "${{args[@]}}"
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_the_write_outside_is_tried_where_the_host_would_see_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Confined, the write outside is tried in /var/tmp (shared with the host, not
    the sandbox's own /tmp) and blocked; with the root mounted writable it lands
    on the host and the check fails (a write under /tmp would not have told)."""
    report = json.loads(doctor("doctor", "--json").output)
    assert report["write_outside_blocked"] and report["write_outside_place"] == "/var/tmp"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text(WRITABLE_ROOT.format(real=shutil.which("bwrap")))
    fake.chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    result = doctor("doctor", "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["probe_ok"] and report["bwrap"] == str(fake)
    assert not report["write_outside_blocked"] and report["write_outside_place"] == "/var/tmp"
    assert report["write_git_blocked"]  # only the root's mount was changed
    assert "write_outside_blocked" in report["reason"]


def test_doctor_with_mode_off(tmp_path: Path) -> None:
    (tmp_path / "user.toml").write_text('sandbox = "off"\n')
    result = doctor("doctor")
    assert result.exit_code == 1
    assert "sandbox mode:    off" in result.output


def test_doctor_with_a_bad_config_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "user.toml").write_text('sandbox = "maybe"\n')
    result = doctor("doctor")
    assert result.exit_code == 2
    assert "sandbox: must be one of auto, required, off" in result.output


def test_doctor_without_bash_says_commands_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.tools import bash_path

    monkeypatch.setattr(bash_path, "BASH_CANDIDATES", (str(tmp_path / "no-bash"),))
    result = doctor("doctor")
    assert result.exit_code == 1
    assert "bash:            NOT FOUND: shell commands are refused" in result.output
    report = json.loads(doctor("doctor", "--json").output)
    assert report["bash"] is None and report["working"] is False
    assert "bash is not installed" in report["reason"]


def test_the_network_check_counts_only_its_own_probes_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Confined, no connection: blocked. With ``network = true`` the probe's
    connection arrives: not blocked. A stranger's connection to the same port
    (a client retrying a server that had it) is not taken for the probe's."""
    from infai.shells.cli import doctor as doctor_module
    from infai.shells.cli import doctor_sockets
    from infai.tools import Sandbox, SandboxSettings

    assert doctor_module._network_check(Sandbox(SandboxSettings(mode="required")))
    open_net = Sandbox(SandboxSettings(mode="required", network=True))
    assert not doctor_module._network_check(open_net)

    real_run = doctor_sockets.run_launched

    def stranger_first(sandbox: Sandbox, command: str, wd: Path, **kw: bool) -> object:
        found = re.search(r"127\.0\.0\.1\D+(\d+)", command)
        assert found, command
        port = int(found.group(1))
        with socket.create_connection(("127.0.0.1", port)) as stranger:
            stranger.sendall(b"GET / HTTP/1.1\r\n\r\n")
            return real_run(sandbox, command, wd, **kw)

    monkeypatch.setattr(doctor_module, "run_launched", stranger_first)
    assert doctor_module._network_check(Sandbox(SandboxSettings(mode="required")))

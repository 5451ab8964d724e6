"""``infai doctor``'s Python probes run wherever infai's interpreter lives.

Finding: the Unix-socket probe ran the venv's ``python`` in the sandbox, where
``/tmp`` is private (and the home directory hidden): with infai installed in a
venv under ``/tmp`` the probe could not start, so the check failed, and the
io_uring and network checks, which only looked for a ring or a connection that
never came, passed without having run anything. And its FIFO check: a FIFO
outside, written through the read-only mount unless Landlock stops it.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from infai.shells.cli import doctor_sockets, main

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)


@pytest.mark.parametrize("how", ["--symlinks", "--copies"])
def test_doctor_run_from_a_venv_under_tmp_proves_each_check(tmp_path: Path, how: str) -> None:
    """A real venv in the private-in-sandbox ``/tmp`` (pytest's ``tmp_path`` is
    there), with infai importable through a ``.pth`` file, runs ``infai doctor``;
    with ``--copies`` its python binary itself lives there."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", how, "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    venv_site = subprocess.run(
        [python, "-c", "import site; print(site.getsitepackages()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = site.getsitepackages()[0]
    Path(venv_site, "infai-under-test.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    assert str(venv).startswith("/tmp/")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "INFAI_HOME": str(tmp_path / "home")}
    env.pop("XDG_RUNTIME_DIR", None)  # its listener is tested elsewhere
    done = subprocess.run(
        [python, "-c", "from infai.shells.cli.main import entry; entry()", "doctor", "--json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    rows = report["unix_sockets"]
    assert [row.get("socket") for row in rows] == ["EACCES", "EACCES"], done.stdout
    assert report["unix_sockets_unreachable"] and report["network_blocked"]
    assert report["io_uring"]["in_sandbox"] in ("EPERM", "ENOSYS"), report["io_uring"]
    assert done.returncode == 0, done.stderr


def test_a_probe_that_never_ran_fails_its_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ring and no connection is no proof when the probe did not start."""
    # imported before the patch: a first import here would bind the patched probe
    # as doctor's own, and the teardown would "restore" that (the next doctor test
    # in this process then never ran its network probe)
    from infai.shells.cli import doctor

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFAI_HOME", str(tmp_path / "home"))
    never = lambda code, *args: ["/nonexistent/python", "-c", code]  # noqa: E731
    monkeypatch.setattr(doctor_sockets, "python_probe", never)
    monkeypatch.setattr(doctor, "python_probe", never)
    result = CliRunner().invoke(main, ["doctor", "--json"])
    report = json.loads(result.output)
    assert not report["io_uring_blocked"] and not report["network_blocked"]
    assert not report["unix_sockets_unreachable"]
    assert result.exit_code == 1


def test_doctor_proves_a_fifo_outside_unwritable_and_fails_without_landlock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The FIFO under /var/tmp is read-only in the sandbox, which does not stop a
    write into it; only the Landlock starter does: without it, doctor fails."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFAI_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(main, ["doctor"])
    assert "PASS fifo outside the working directory unwritable: refused" in result.output
    from infai.tools import sandbox

    monkeypatch.setattr(sandbox, "write_limited", lambda argv, roots: list(argv))
    result = CliRunner().invoke(main, ["doctor"])
    assert "FAIL fifo outside the working directory unwritable: written" in result.output
    assert result.exit_code == 1 and "fifo_unwritten" in result.output

"""``infai doctor`` and ``infai sandbox check``: does the sandbox work here, and if not, why.

The check does not trust the probe alone: it runs real commands through the
same :class:`~infai.tools.Sandbox` the ``bash`` tool uses and judges them by
their effect. A write outside the working directory must leave the host's file
system unchanged, a write to the working directory's ``.git/`` must fail, and
a connection to a listener this process opens on loopback must never arrive.
It also reports what explains a failure: where ``bwrap`` is, its version,
whether user namespaces are enabled (needed unless infai runs as root) and the
configured mode. Exit status 0 means shell commands will run confined, 1 that
they will not.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..inert import inert_json
from .common import echo, emit_json
from .errors import mapped_errors

if TYPE_CHECKING:
    from infai.tools import Sandbox

USERNS_FILES = (
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
)


def _version(bwrap: str | None) -> str | None:
    if bwrap is None:
        return None
    try:
        done = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def _user_namespaces() -> dict[str, Any]:
    found: dict[str, Any] = {"root": os.geteuid() == 0}
    for name in USERNS_FILES:
        try:
            found[Path(name).name] = Path(name).read_text().strip()
        except OSError:
            continue
    return found


def _run(sandbox: Sandbox, command: str, wd: Path) -> subprocess.CompletedProcess[str]:
    launch = sandbox.launch(command, wd)
    try:
        return subprocess.run(
            launch.argv,
            cwd=wd,
            env=launch.env,
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            pass_fds=launch.fds,
        )
    finally:
        launch.close()


def _write_checks(sandbox: Sandbox) -> dict[str, Any]:
    """Writes outside the working directory and to its ``.git/``, judged on the host."""
    with tempfile.TemporaryDirectory(prefix="infai-doctor-") as tmp:
        wd = Path(tmp) / "wd"
        (wd / ".git").mkdir(parents=True)
        outside = Path(tmp) / "outside.txt"
        inside = wd / "inside.txt"
        _run(sandbox, f"echo x > {outside}; echo x > .git/config; echo x > {inside}", wd)
        return {
            "write_inside_allowed": inside.exists(),
            "write_outside_blocked": not outside.exists(),
            "write_git_blocked": not (wd / ".git" / "config").exists(),
        }


def _network_check(sandbox: Sandbox) -> bool:
    """Whether a connection to a loopback listener of this process is impossible."""
    with socket.socket() as server, tempfile.TemporaryDirectory() as wd:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.2)
        port = server.getsockname()[1]
        code = (
            "import socket; s = socket.socket(); s.settimeout(2); "
            f"s.connect(('127.0.0.1', {port})); s.sendall(b'x')"
        )
        _run(sandbox, shlex.join([sys.executable, "-c", code]), Path(wd))
        try:
            conn, _ = server.accept()
        except TimeoutError:
            return True
        conn.close()
        return False


def diagnose(sandbox: Sandbox) -> dict[str, Any]:
    """Everything ``infai doctor`` reports, as data (``--json`` prints it)."""
    probe = sandbox.probe()
    bwrap = probe.bwrap or shutil.which("bwrap")
    report: dict[str, Any] = {
        "mode": sandbox.mode,
        "network_configured": sandbox.settings.network,
        "bwrap": bwrap,
        "bwrap_version": _version(bwrap),
        "user_namespaces": _user_namespaces(),
        "probe_ok": probe.ok,
        "reason": probe.reason,
    }
    if probe.ok:
        report.update(_write_checks(sandbox))
        report["network_blocked"] = _network_check(sandbox)
        failed = [k for k in ("write_outside_blocked", "write_git_blocked") if not report[k]]
        if not report["write_inside_allowed"]:
            failed.append("write_inside_allowed")
        if not sandbox.settings.network and not report["network_blocked"]:
            failed.append("network_blocked")
        if failed:
            report["reason"] = f"the sandbox ran but did not confine: {', '.join(failed)}"
    report["working"] = probe.ok and not report["reason"]
    return report


def _sandbox_here() -> tuple[Sandbox, str]:
    """The sandbox commands run in here (the configuration of the current directory);
    in ``mode = "off"`` the checks still try bwrap, to say whether it would work."""
    from infai.agent import load_config
    from infai.tools import Sandbox, SandboxSettings

    settings = load_config(Path(os.getcwd())).sandbox  # a ConfigError is bad input
    if settings.mode == "off":
        return Sandbox(SandboxSettings(mode="auto", network=settings.network)), "off"
    return Sandbox(settings), settings.mode


def _report(as_json: bool) -> None:
    sandbox, mode = _sandbox_here()
    report = diagnose(sandbox)
    report["mode"] = mode
    confined = report["working"] and mode != "off"
    if as_json:
        emit_json(report)
    else:
        echo(f"sandbox mode:    {mode}")
        echo(f"bwrap:           {report['bwrap'] or 'not found'}")
        if report["bwrap_version"]:
            echo(f"version:         {report['bwrap_version']}")
        userns = report["user_namespaces"]
        echo(f"user namespaces: {inert_json(userns)}")
        for key in ("write_inside_allowed", "write_outside_blocked", "write_git_blocked"):
            if key in report:
                echo(f"{key.replace('_', ' '):<22} {'yes' if report[key] else 'NO'}")
        if "network_blocked" in report:
            echo(f"{'network blocked':<22} {'yes' if report['network_blocked'] else 'no'}")
        if confined:
            echo("the sandbox works: shell commands run confined")
        elif mode == "off":
            echo("sandbox.mode is off: shell commands are not confined")
        else:
            echo(f"the sandbox does not work here: {report['reason']}")
    sys.exit(0 if confined else 1)


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@mapped_errors
def doctor_command(as_json: bool) -> None:
    """Check that shell commands can run in the sandbox here (exit 1 if not)."""
    _report(as_json)


@click.group("sandbox")
def sandbox_group() -> None:
    """The sandbox shell commands run in."""


@sandbox_group.command("check")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@mapped_errors
def sandbox_check(as_json: bool) -> None:
    """Check that shell commands can run in the sandbox here (exit 1 if not)."""
    _report(as_json)


__all__ = ["diagnose", "doctor_command", "sandbox_check", "sandbox_group"]

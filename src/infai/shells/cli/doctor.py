"""``infai doctor`` and ``infai sandbox check``: does the sandbox work here, and if not, why.

The check does not trust the probe alone: it runs real commands through the
same :class:`~infai.tools.Sandbox` the ``bash`` tool uses and judges them by
their effect. A write outside the working directory must leave the host's file
system unchanged: tried in a place the sandbox shares with the host
(``/var/tmp``, else the home directory, when the sandbox reads a marker left
there; not ``/tmp``, the sandbox's own, where a write never reaches the host
whatever the mounts), in a directory doctor makes and removes; a write to the
working directory's ``.git/`` must fail, and a connection to a listener this
process opens on loopback must never arrive.
Each hidden path that exists (``sandbox.hidden``, and infai's own config and
store) is read in the sandbox and must read as empty. io_uring must be refused
in the sandbox, and Unix-socket listeners this process opens (under
``$XDG_RUNTIME_DIR``, ``/tmp`` and in the working directory) must never hear
from it, nor a FIFO it reads under ``/var/tmp`` (:mod:`.doctor_sockets`;
PASS/FAIL lines). It also reports what
explains a failure: where ``bwrap`` is, its version, whether user namespaces
are enabled (needed unless infai runs as root) and the configured mode; and
which paths are hidden, which defaults the user's ``unhide`` took out. Exit
status 0 means shell commands will run confined, 1 that they will not.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..inert import inert_json
from .common import echo, emit_json, store_of
from .doctor_sockets import (
    FIFO_DIR,
    fifo_check,
    python_probe,
    run_launched,
    socket_lines,
    unix_socket_check,
    uring_check,
)
from .errors import mapped_errors

if TYPE_CHECKING:
    from infai.tools import Sandbox

#: prints, one line per path given, how many bytes it reads as (a directory: its listing)
READ_EACH = (
    'for p in "$@"; do if [ -d "$p" ]; then ls -A -- "$p"; else cat -- "$p"; fi 2>/dev/null '
    "| wc -c; done"
)
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
    return run_launched(sandbox, command, wd)


#: where doctor tries a write outside: places the sandbox shares with the host (read-only
#: there), not its own ``/tmp``, where a write proves nothing (it never reaches the host)
OUTSIDE_PLACES = (FIFO_DIR, "~")
#: what the sandboxed command prints when it sees the marker doctor left in the place
SEEN = "infai-doctor-shared"


def _outside_places(sandbox: Sandbox) -> list[Path]:
    """The places to try a write outside in: those this process may write to,
    outside the working directory and every writable root the user configured."""
    roots = [Path(e).expanduser().resolve() for e in sandbox.settings.writable]
    places = []
    for entry in OUTSIDE_PLACES:
        place = Path(entry).expanduser().resolve()
        inside = any(place == r or r in place.parents for r in roots)
        if place.is_dir() and os.access(place, os.W_OK) and not inside:
            places.append(place)
    return places


def _write_outside(sandbox: Sandbox, wd: Path) -> dict[str, Any]:
    """A write outside, tried in the first place of :func:`_outside_places` the
    sandbox shares (it reads the marker doctor left there), in a directory made
    for it and removed after: blocked if the host then holds nothing new there.
    Where no place is shared, ``/tmp`` (the sandbox's own: it proves little,
    ``write_outside_place`` says so)."""
    for place in _outside_places(sandbox):
        made = Path(tempfile.mkdtemp(prefix="infai-doctor-", dir=place))
        try:
            (made / "marker").write_text(SEEN)
            target = made / "outside.txt"
            said = _run(sandbox, f"cat {made / 'marker'}; echo x > {target}", wd).stdout
            if SEEN in said:
                written = sorted(p.name for p in made.iterdir()) != ["marker"]
                return {"write_outside_blocked": not written, "write_outside_place": str(place)}
        finally:
            shutil.rmtree(made, ignore_errors=True)
    target = wd.parent / "outside.txt"
    _run(sandbox, f"echo x > {target}", wd)
    unshared = f"{wd.parent} (the sandbox's own /tmp: no shared place to write to)"
    return {"write_outside_blocked": not target.exists(), "write_outside_place": unshared}


def _write_checks(sandbox: Sandbox) -> dict[str, Any]:
    """Writes outside the working directory (:func:`_write_outside`) and to its
    ``.git/``, judged on the host."""
    with tempfile.TemporaryDirectory(prefix="infai-doctor-") as tmp:
        wd = Path(tmp) / "wd"
        (wd / ".git").mkdir(parents=True)
        inside = wd / "inside.txt"
        _run(sandbox, f"echo x > .git/config; echo x > {inside}", wd)
        return {
            "write_inside_allowed": inside.exists(),
            **_write_outside(sandbox, wd),
            "write_git_blocked": not (wd / ".git" / "config").exists(),
        }


def _network_check(sandbox: Sandbox) -> bool:
    """Whether a connection to a loopback listener of this process is impossible.

    Only a connection that sends this check's own nonce counts: another program
    on the machine may connect to the same port by chance (a client retrying a
    server that used the port before)."""
    nonce = secrets.token_hex(8)
    with socket.socket() as server, tempfile.TemporaryDirectory() as wd:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(0.2)
        port = server.getsockname()[1]
        code = (
            "import socket; print('ran', flush=True); s = socket.socket(); s.settimeout(2); "
            f"s.connect(('127.0.0.1', {port})); s.sendall(b'{nonce}')"
        )
        probe = shlex.join(python_probe(code))
        ran = run_launched(sandbox, probe, Path(wd))
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                return ran.stdout.startswith("ran")  # a probe that never ran proves nothing
            with conn:
                conn.settimeout(0.5)
                with suppress(OSError):
                    if conn.recv(64) == nonce.encode():
                        return False


def _hidden_check(sandbox: Sandbox, rows: list[dict[str, Any]]) -> bool:
    """Read each existing path of ``rows`` in the sandbox, judged by what came back:
    sets each one's ``empty_in_sandbox``; whether all were."""
    there = [r for r in rows if r["exists"]]
    if not there:
        return True
    with tempfile.TemporaryDirectory(prefix="infai-doctor-") as wd:
        command = shlex.join(["sh", "-c", READ_EACH, "sh", *(r["path"] for r in there)])
        counts = _run(sandbox, command, Path(wd)).stdout.split()
    for n, found in enumerate(there):
        found["empty_in_sandbox"] = n < len(counts) and counts[n] == "0"
    return all(r["empty_in_sandbox"] for r in there)


def _home_check(sandbox: Sandbox, home: dict[str, Any]) -> bool:
    """List the home directory in the sandbox, from a directory outside it: sets
    ``home["seen"]`` (its entries there); whether, when hidden, only the first
    names of the readable paths appear."""
    with tempfile.TemporaryDirectory(prefix="infai-doctor-") as wd:
        listing = _run(sandbox, 'ls -A -- "$HOME"', Path(wd)).stdout.split("\n")
    home["seen"] = seen = sorted(name for name in listing if name)
    if not home["hidden"]:
        return True
    return set(seen) <= _first_names(home)


def diagnose(sandbox: Sandbox) -> dict[str, Any]:
    """Everything ``infai doctor`` reports, as data (``--json`` prints it)."""
    from infai.tools import bash_missing, budget_report, find_bash, hidden_report, home_report

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
        **hidden_report(sandbox.settings.hidden, sandbox.private),
        "bash": find_bash(),
        **budget_report(sandbox.settings.write_budget, probe.bwrap if probe.ok else None),
        "home": home_report(
            sandbox.settings.home,
            sandbox.settings.home_unhide,
            tempfile.gettempdir(),
            sandbox.settings.writable,
        ),
    }
    if report["bash"] is None:  # commands are refused, confined or not
        report["reason"] = bash_missing()
    elif probe.ok:
        report.update(_write_checks(sandbox))
        report["network_blocked"] = _network_check(sandbox)
        rows = [*report["hidden"], *report["private"]]
        report["hidden_paths_empty"] = _hidden_check(sandbox, rows)
        report.update(uring_check(sandbox))
        report.update(unix_socket_check(sandbox))
        report.update(fifo_check(sandbox))
        report["home_hidden"] = _home_check(sandbox, report["home"])
        checks = (
            "write_outside_blocked",
            "write_git_blocked",
            "hidden_paths_empty",
            "io_uring_blocked",
            "unix_sockets_unreachable",
            "fifo_unwritten",
            "home_hidden",
        )
        failed = [k for k in checks if not report[k]]
        if not report["write_inside_allowed"]:
            failed.append("write_inside_allowed")
        if not sandbox.settings.network and not report["network_blocked"]:
            failed.append("network_blocked")
        if failed:
            report["reason"] = f"the sandbox ran but did not confine: {', '.join(failed)}"
    report["working"] = probe.ok and not report["reason"]
    return report


def _sandbox_here() -> tuple[Sandbox, str, Path | None]:
    """The sandbox commands run in here: the harness's, so with the current
    directory's configuration and infai's own files protected and hidden. In
    ``mode = "off"`` the checks still try bwrap, to say whether it would work.

    The store is opened only for where its home is (returned: where a pass is
    recorded); one that cannot be opened (a database that is down) leaves
    infai's files out, not the whole check."""
    from infai.agent import Harness, load_config
    from infai.store import StoreError
    from infai.tools import Sandbox

    try:
        store = store_of(click.get_current_context())
    except StoreError as exc:
        echo(f"infai: the store cannot be opened ({exc}): its files are not listed", err=True)
        sandbox = Sandbox(load_config(Path(os.getcwd())).sandbox)  # a ConfigError: bad input
        home = None
    else:
        sandbox = Harness(store, Path(os.getcwd()), model_name="offline").sandbox
        home = Path(store.home)
    if sandbox.mode == "off":
        return replace(sandbox, settings=replace(sandbox.settings, mode="auto")), "off", home
    return sandbox, sandbox.mode, home


def _report(as_json: bool) -> None:
    from infai.tools import budget_line, record_pass

    sandbox, mode, home = _sandbox_here()
    report = diagnose(sandbox)
    report["mode"] = mode
    confined = report["working"] and mode != "off"
    if confined and home is not None:  # what the approval mode for a verified sandbox needs
        report["pass_recorded"] = str(record_pass(home, report["bwrap"], sandbox.settings))
    if as_json:
        emit_json(report)
    else:
        echo(f"sandbox mode:    {mode}")
        echo(f"bwrap:           {report['bwrap'] or 'not found'}")
        echo(f"bash:            {report['bash'] or 'NOT FOUND: shell commands are refused'}")
        if report["bwrap_version"]:
            echo(f"version:         {report['bwrap_version']}")
        userns = report["user_namespaces"]
        echo(f"user namespaces: {inert_json(userns)}")
        for key in ("write_inside_allowed", "write_outside_blocked", "write_git_blocked"):
            if key in report:
                echo(f"{key.replace('_', ' '):<22} {'yes' if report[key] else 'NO'}")
        if "write_outside_place" in report:
            echo(f"  (the write outside was tried in {report['write_outside_place']})")
        if "network_blocked" in report:
            echo(f"{'network blocked':<22} {'yes' if report['network_blocked'] else 'no'}")
        for line in socket_lines(report):
            echo(line)
        echo(budget_line(report))
        _print_hidden(report, mode)
        _print_home(report["home"])
        if confined:
            echo("the sandbox works: shell commands run confined")
            if "pass_recorded" in report:
                echo(_mode_line(sandbox))
        elif mode == "off":
            echo("sandbox.mode is off: shell commands are not confined")
        else:
            echo(f"the sandbox does not work here: {report['reason']}")
    sys.exit(0 if confined else 1)


def _mode_line(sandbox: Sandbox) -> str:
    """What the pass means for the approval mode for a verified sandbox."""
    if sandbox.settings.approvals != "sandboxed":
        return 'pass recorded: sandbox.approvals = "sandboxed" may be turned on here'
    unasked = "writes inside the working directory"
    if not sandbox.settings.network:
        unasked = "confined commands and " + unasked
    return f'pass recorded: sandbox.approvals = "sandboxed" applies ({unasked} run unasked)'


def _print_hidden(report: dict[str, Any], mode: str) -> None:
    """The hidden paths that exist (one inside another shown once), how many more
    are configured, and what ``unhide`` took out; ``echo`` keeps names inert."""
    if mode == "off":
        echo("hidden paths (none while sandbox.mode is off; with it on):")
    else:
        echo("hidden paths (they read as empty in the sandbox):")
    own = {r["entry"] for r in report["private"]}
    for row in (*report["hidden"], *report["private"]):
        if not row["exists"] or row["inside"]:
            continue
        state = {True: "hidden", False: "NOT HIDDEN"}.get(row.get("empty_in_sandbox"))
        own_note = " (infai's own config and store)" if row["entry"] in own else ""
        echo(f"  {row['entry']:<30} {state or 'not checked'}{own_note}")
    absent = sum(1 for r in report["hidden"] if not r["exists"])
    if absent:
        echo(f"  ({absent} more configured, not on this machine)")
    if report["unhidden"]:
        echo(f"unhidden by your config (sandbox.unhide): {', '.join(report['unhidden'])}")


def _first_names(home: dict[str, Any]) -> set[str]:
    """The names in the home directory its readable and writable paths start with."""
    return {p.removeprefix("~/").split("/")[0] for p in (*home["readable"], *home["writable"])}


def _print_home(home: dict[str, Any]) -> None:
    """What of the home directory a command reads (``sandbox.home``)."""
    if home["mode"] == "visible":
        echo(f"home directory {home['path']}: visible (sandbox.home): commands read all of it")
        echo("  but the hidden paths above")
        return
    echo(f"home directory {home['path']}: hidden (sandbox.home); commands read only these of it,")
    echo("  read-only (toolchains, sandbox.unhide), and the working directory:")
    for path in home["readable"]:
        echo(f"  {path}")
    for path in home["writable"]:
        echo(f"  {path} (writable: sandbox.writable)")
    if "seen" in home:
        ok = set(home["seen"]) <= _first_names(home)
        echo(f"  {'PASS' if ok else 'FAIL'}: ~ lists {', '.join(home['seen']) or 'nothing'} there")


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

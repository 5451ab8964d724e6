"""``infai doctor``'s socket checks: can a sandboxed command reach a process outside?

Issue 28: a command that gets a Unix-domain socket can ask an unconfined
process to act for it (tmux types into the user's pane, an ssh agent signs).
Two real attempts, judged by effect:

- io_uring: ``io_uring_setup`` called by its number in the sandbox must fail
  (a ring creates sockets without the ``socket`` call the filter inspects).
  The same call is made outside, to say whether the kernel here has io_uring
  at all (if not, the check passes without proving the filter; the test suite
  proves it either way);
- Unix listeners: doctor listens on a socket in a fresh directory under
  ``$XDG_RUNTIME_DIR`` (or ``/run/user/UID``), under ``/tmp`` and in the
  working directory (a path the command can see, so only the filter stops it);
  the sandboxed command tries ``socket(AF_UNIX)`` + ``connect`` and a datagram
  ``socketpair`` re-pointed at each. No connection may arrive.

- a FIFO: doctor makes one under ``/var/tmp`` (read-only in the sandbox) and
  reads from it; a sandboxed ``echo`` into it must be refused, nothing arrive.

The two socket probes are Python run in the sandbox with this interpreter (which every
command starts through, so the sandbox binds it wherever it lives:
:mod:`infai.tools.landlock`), and a probe that printed nothing fails its check.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infai.shells.sandbox_probes import CONNECT_PROBE, URING_PROBE
from infai.tools import sandbox_interpreter

if TYPE_CHECKING:
    from infai.tools import Sandbox


def run_launched(
    sandbox: Sandbox, command: str, wd: Path, *, outside: bool = False
) -> subprocess.CompletedProcess[str]:
    """``command`` run as the bash tool would run it (in the sandbox unless
    ``outside``), its output captured; the doctor's checks all go through here."""
    launch = sandbox.launch(command, wd, outside=outside)
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


def python_probe(code: str, *args: str) -> list[str]:
    """The argv that runs ``code`` with this Python, isolated and without ``site``:
    a probe needs the standard library only, not the venv's packages."""
    return [sandbox_interpreter(), "-I", "-S", "-c", code, *args]


def _run(sandbox: Sandbox, argv: list[str], wd: Path, *, outside: bool = False) -> str:
    """What the Python probe ``argv`` printed (or why it did not run)."""
    try:
        done = run_launched(sandbox, shlex.join(argv), wd, outside=outside)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"not run: {exc}"
    return done.stdout.strip()


def uring_check(sandbox: Sandbox) -> dict[str, Any]:
    """``io_uring``: what io_uring_setup answered in the sandbox and outside it, and
    ``io_uring_blocked``: whether no ring was made in the sandbox."""
    probe = python_probe(URING_PROBE)
    with tempfile.TemporaryDirectory(prefix="infai-doctor-") as wd:
        inside = _run(sandbox, probe, Path(wd))
        outside = _run(sandbox, probe, Path(wd), outside=True)
    return {
        "io_uring": {"in_sandbox": inside, "outside": outside},
        # an errno's name: the probe ran and the call failed (nothing printed: it never ran)
        "io_uring_blocked": re.fullmatch(r"E[A-Z0-9]+", inside) is not None,
    }


def _runtime_dir() -> str | None:
    """``$XDG_RUNTIME_DIR``, else ``/run/user/UID``, if it is a directory doctor may
    write in."""
    for where in (os.environ.get("XDG_RUNTIME_DIR", ""), f"/run/user/{os.getuid()}"):
        if os.path.isabs(where) and os.path.isdir(where) and os.access(where, os.W_OK):
            return where
    return None


def _listen(path: Path, stack: ExitStack) -> socket.socket:
    server = stack.enter_context(socket.socket(socket.AF_UNIX))
    server.bind(str(path))
    server.listen(8)
    server.setblocking(False)
    return server


def _heard(server: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = server.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def unix_socket_check(sandbox: Sandbox) -> dict[str, Any]:
    """``unix_sockets``: one row per listener (``where``, ``path``, ``visible`` in the
    sandbox, ``reached``: a connection arrived), and ``unix_sockets_unreachable``."""
    with ExitStack() as stack:
        wd = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="infai-doctor-")))
        places = [("/tmp", tempfile.mkdtemp(prefix="infai-doctor-", dir="/tmp"))]
        if runtime := _runtime_dir():
            places.insert(0, ("$XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="doctor-", dir=runtime)))
        for _, made in places:
            stack.callback(shutil.rmtree, made, True)
        places.append(("working directory", str(wd)))
        paths = [Path(d) / "s" for _, d in places]
        servers = [_listen(p, stack) for p in paths]
        said = _run(sandbox, python_probe(CONNECT_PROBE, *map(str, paths)), wd)
        seen = [json.loads(line) for line in said.splitlines() if line.startswith("{")]
        rows = []
        for n, ((where, _), path, server) in enumerate(zip(places, paths, servers, strict=True)):
            row = seen[n] if n < len(seen) else {}
            rows.append({"where": where, "path": str(path), **row, "reached": _heard(server) > 0})
    return {
        "unix_sockets": rows,
        "unix_sockets_unreachable": len(seen) == len(rows) and not any(r["reached"] for r in rows),
    }


#: where doctor makes a FIFO the sandbox shows read-only (not /tmp: the sandbox's own)
FIFO_DIR = "/var/tmp"


def fifo_check(sandbox: Sandbox) -> dict[str, Any]:
    """``fifo``: what a sandboxed ``echo`` into a FIFO doctor made under
    :data:`FIFO_DIR` (read-only in the sandbox, open for reading here) got, and
    ``fifo_unwritten``: whether nothing arrived (a read-only mount does not stop
    it: :mod:`infai.tools.landlock` does). No such directory: ``fifo`` is None."""
    if not os.access(FIFO_DIR, os.W_OK):
        return {"fifo": None, "fifo_unwritten": True}
    with ExitStack() as stack:
        where = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=FIFO_DIR)))
        wd = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="infai-doctor-")))
        fifo = where / "fifo"
        os.mkfifo(fifo, 0o600)
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        stack.callback(os.close, reader)
        try:
            said = run_launched(sandbox, f"echo x > {shlex.quote(str(fifo))}", wd).stderr
        except (OSError, subprocess.TimeoutExpired) as exc:
            said = f"not run: {exc}"
        try:
            got = os.read(reader, 64)
        except BlockingIOError:
            got = b""
    refused = "Permission denied" in said
    return {"fifo": {"path": str(fifo), "refused": refused}, "fifo_unwritten": refused and not got}


def socket_lines(report: dict[str, Any]) -> list[str]:
    """The PASS/FAIL lines of these checks, for people."""
    lines = []
    if "io_uring" in report:
        ring = report["io_uring"]
        verdict = "PASS" if report["io_uring_blocked"] else "FAIL"
        outside = "a ring" if ring["outside"] == "ring" else ring["outside"]
        lines.append(
            f"{verdict} io_uring in the sandbox: {ring['in_sandbox']} (outside it: {outside})"
        )
    if "fifo" in report:
        fifo = report["fifo"]
        if fifo is None:
            lines.append(f"SKIP fifo outside the working directory: {FIFO_DIR} is not writable")
        else:
            verdict = "PASS" if report["fifo_unwritten"] else "FAIL"
            how = "refused" if fifo["refused"] else "written (no Landlock here?)"
            lines.append(f"{verdict} fifo outside the working directory unwritable: {how}")
    rows = report.get("unix_sockets", ())
    if rows and not any(row["where"] == "$XDG_RUNTIME_DIR" for row in rows):
        lines.append("SKIP unix socket listener in $XDG_RUNTIME_DIR: there is none here")
    for row in rows:
        ok = not row["reached"] and "socket" in row
        how = "hidden" if not row.get("visible") else "visible, no socket to connect with"
        if row["reached"]:
            how = "a connection arrived"
        elif "socket" not in row:
            how = "the probe did not run"
        lines.append(
            f"{'PASS' if ok else 'FAIL'} unix socket listener in {row['where']} unreachable: {how}"
        )
    return lines


__all__ = [
    "fifo_check",
    "python_probe",
    "socket_lines",
    "unix_socket_check",
    "uring_check",
]

"""A throwaway PostgreSQL cluster for tests: initdb in a temp dir, a loopback port.

Nothing depends on a server the machine happens to run: the cluster is made
from the system's PostgreSQL binaries (``.ci/run`` installs them), started on a
free 127.0.0.1 port with trust authentication, and removed afterwards. As root
(CI), the server runs as the ``postgres`` user, since PostgreSQL refuses root.
``fsync`` is off for tests: the backend's durability is PostgreSQL's commit,
which they do not crash-test; they test the backend's logic. The benchmark
starts one with ``durable=True`` in a directory of its choosing (``parent``).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    """PostgreSQL's server binaries are missing: install them (``.ci/run`` does)."""


def _bindir() -> Path:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not candidates:
        raise PostgresUnavailable(
            "PostgreSQL is not installed (no initdb): apt-get install postgresql"
        )
    return Path(candidates[-1]).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """``with Cluster() as url:`` a running server and a database URL."""

    def __init__(self, *, durable: bool = False, parent: Path | None = None) -> None:
        #: with fsync on (benchmarks); tests run without it
        self.durable = durable
        self.bindir = _bindir()
        self.root = Path(tempfile.mkdtemp(prefix="infai-pg-", dir=parent))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0

    def _run(self, *args: str) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stderr or done.stdout}")

    def start(self) -> str:
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        # a port free when probed may be taken before the server binds it (another
        # test's connection, another worker's server): then another port, twice
        self.port = _free_port()
        for attempt in range(3):
            try:
                self._pg_ctl_start()
                break
            except RuntimeError:
                log = self.root / "log"
                taken = log.exists() and "already in use" in log.read_text(errors="replace")
                if not taken or attempt == 2:
                    raise
                log.unlink()
                self.port = _free_port()
        url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return url
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start: {(self.root / 'log').read_text()}")
            time.sleep(0.05)

    def _pg_ctl_start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root}"
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        log = str(self.root / "log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

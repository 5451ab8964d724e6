"""Real ``infai serve`` processes on one PostgreSQL database, and SSE watchers of them.

Each node is a subprocess on a free loopback port with token auth, its model
the fake OpenAI server (tests/support/fakeapi.py) named by a config file, so a
turn streams its deltas as slowly as the test's scripted replies say. A node
can be killed with SIGKILL and started again; ``Nodes`` stops every process it
started, whatever happens, and says whether one was left behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

TOKEN = "multi-node-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: how long anything may take on a loaded machine
WAIT = 30.0
#: how long a node may take to start (three at once, on a loaded machine)
START_WAIT = 90.0
#: the developer's own provider settings, never given to a node
PROVIDER_ENV = frozenset(
    {"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "INFAI_MODEL"}
)


class Node:
    """One ``infai serve`` process; ``url`` is its API base (``.../v1``)."""

    def __init__(self, name: str, env: dict[str, str], work: Path, *extra: str) -> None:
        self.name = name
        self.env = env
        self.work = work
        self.extra = extra
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.log: list[str] = []

    def start(self) -> Node:
        """Start the process and wait until it serves."""
        return self.launch().ready()

    def launch(self) -> Node:
        """Start the process (several may start at once; then :meth:`ready` each)."""
        self.url = ""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "infai", "serve", "--port", "0", *self.extra],
            cwd=self.work, env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        return self

    def ready(self) -> Node:
        """Wait until the process says where it serves."""
        assert self.proc is not None and self.proc.stderr is not None
        deadline = time.monotonic() + START_WAIT
        while not self.url:
            line = self.proc.stderr.readline()
            self.log.append(line)
            found = re.search(r"serving (http://\S+/v1)", line)
            if found:
                self.url = found.group(1)
            assert line or self.proc.poll() is None, f"{self.name} exited: {''.join(self.log)}"
            assert time.monotonic() < deadline, f"{self.name} did not start"
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        return self

    def _drain(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        try:
            for line in proc.stderr:
                self.log.append(line)
        finally:
            proc.stderr.close()

    def kill(self) -> None:
        """SIGKILL: nothing of the process runs after it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(WAIT)
        self.url = ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(WAIT)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Nodes:
    """``with Nodes(pg_url, tmp_path, fake, 3) as nodes:`` three started nodes."""

    def __init__(self, pg_url: str, tmp: Path, base_url: str, count: int, *extra: str) -> None:
        self.work = tmp / "work"
        self.work.mkdir(exist_ok=True)
        config = tmp / "nodes-config.toml"
        config.write_text(
            'model = "local"\n[models.local]\nprovider = "openai"\nmodel = "m"\n'
            f'base_url = "{base_url}"\ncontext_window = 32768\n'
        )
        self.nodes: list[Node] = []
        base = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
        for n in range(count):
            env = {
                **base,
                "INFAI_STORE": pg_url,
                "INFAI_SERVER_TOKEN": TOKEN,
                "INFAI_HOME": str(tmp / f"home-{n}"),
                "INFAI_CONFIG": str(config),
                "OPENAI_API_KEY": "sk-test",
            }
            self.nodes.append(Node("abcdefgh"[n], env, self.work, *extra))

    def __enter__(self) -> list[Node]:
        try:
            for node in self.nodes:
                node.launch()
            for node in self.nodes:
                node.ready()
        except BaseException:
            self.__exit__()
            raise
        return self.nodes

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes:
            node.stop()
        left = [n.name for n in self.nodes if n.alive]
        assert not left, f"nodes left running: {left}"


class Watcher:
    """An SSE client on a thread: every frame as (event name, data, SSE id)."""

    def __init__(self, base: str, sid: str, last_event: str | None = None) -> None:
        self.frames: list[tuple[str, dict[str, Any], str | None]] = []
        self.open = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self._stop = False
        headers = dict(AUTH)
        if last_event is not None:
            headers["Last-Event-ID"] = last_event
        self._thread = threading.Thread(
            target=self._run, args=(f"{base}/sessions/{sid}/stream", headers), daemon=True
        )
        self._thread.start()
        assert self.open.wait(WAIT), "the stream did not open"

    def _run(self, url: str, headers: dict[str, str]) -> None:
        try:
            with (
                httpx.Client(timeout=httpx.Timeout(WAIT, read=None)) as client,
                client.stream("GET", url, headers=headers) as response,
            ):
                assert response.status_code == 200, response.status_code
                self.open.set()
                name, sse_id = "", None
                for line in response.iter_lines():
                    if self._stop:
                        return
                    if line.startswith("event:"):
                        name = line.split(":", 1)[1].strip()
                    elif line.startswith("id:"):
                        sse_id = line.split(":", 1)[1].strip()
                    elif line.startswith("data:"):
                        self.frames.append((name, json.loads(line.split(":", 1)[1]), sse_id))
                        name, sse_id = "", None
        except BaseException as exc:  # a killed node ends the stream: that is said
            self.error = exc
        finally:
            self.open.set()
            self.done.set()

    def names(self) -> list[str]:
        return [name for name, _, _ in self.frames]

    def of(self, name: str) -> list[dict[str, Any]]:
        return [data for n, data, _ in self.frames if n == name]

    def wait(self, test: Any, what: str, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        while not test():
            assert time.monotonic() < deadline, f"{what}: frames {self.names()}"
            time.sleep(0.02)

    def wait_ended(self, turn: str | None = None, timeout: float = WAIT) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            for data in self.of("turn_ended"):
                if turn is None or data["turn"] == turn:
                    return data
            return None

        self.wait(lambda: found() is not None, "no turn_ended", timeout)
        ended = found()
        assert ended is not None
        return ended

    def stop(self) -> None:
        self._stop = True


def messages(client: httpx.Client, base: str, sid: str) -> list[dict[str, Any]]:
    """The session's stored events (every branch), in order."""
    got = client.get(f"{base}/sessions/{sid}/events", params={"all": "true"})
    assert got.status_code == 200, got.text
    events: list[dict[str, Any]] = got.json()["events"]
    return events

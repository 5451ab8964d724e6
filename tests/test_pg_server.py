"""Two `infai serve` processes on one PostgreSQL database: fan-out and conflicts.

An event settled through node A reaches the SSE clients of node B (LISTEN /
NOTIFY), with the same ids, and prompts may alternate between the nodes; when
two nodes really race on one session, the one whose turn was decided on an
older HEAD fails with a conflict instead of forking, and a retry continues.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

TOKEN = "pg-fan-out-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@contextmanager
def node(url: str, tmp_path: Path, name: str) -> Iterator[str]:
    """``infai serve`` on a free port against ``url``; yields its base URL."""
    env = {
        **os.environ,
        "INFAI_STORE": url,
        "INFAI_SERVER_TOKEN": TOKEN,
        "INFAI_HOME": str(tmp_path / name),
    }
    work = tmp_path / f"work-{name}"
    work.mkdir(exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "infai", "serve", "--port", "0"],
        cwd=work,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 30
        base = None
        while base is None:
            line = proc.stderr.readline()
            found = re.search(r"serving (http://\S+/v1)", line)
            if found:
                base = found.group(1)
            assert line or proc.poll() is None, "the server exited"
            assert time.monotonic() < deadline, "the server did not start"
        yield base
    finally:
        proc.terminate()
        proc.wait(15)


class Watcher:
    """An SSE client on a thread, collecting settled events as (id, kind, content)."""

    def __init__(self, base: str, sid: str) -> None:
        self.settled: list[dict[str, Any]] = []
        self.ended: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, args=(base, sid), daemon=True)
        self._thread.start()
        assert self.ready.wait(10), "the stream did not open"

    def _run(self, base: str, sid: str) -> None:
        with (
            httpx.Client(headers=AUTH, timeout=None) as client,
            client.stream("GET", f"{base}/sessions/{sid}/stream") as response,
        ):
            self.ready.set()
            name = ""
            for line in response.iter_lines():
                if self._stop:
                    return
                if line.startswith("event:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("data:"):
                    data = json.loads(line.split(":", 1)[1])
                    if name == "settled":
                        self.settled.append(data)
                    elif name == "turn_ended":
                        self.ended.append(data)

    def wait_for(self, count: int) -> list[dict[str, Any]]:
        deadline = time.monotonic() + 15
        while len(self.settled) < count:
            assert time.monotonic() < deadline, f"only {len(self.settled)} of {count} events"
            time.sleep(0.02)
        return self.settled

    def stop(self) -> None:
        self._stop = True


def wait_idle(client: httpx.Client, base: str, sid: str) -> None:
    deadline = time.monotonic() + 15
    while client.get(f"{base}/sessions/{sid}").json().get("turn") is not None:
        assert time.monotonic() < deadline, "the turn did not end"
        time.sleep(0.02)


def test_events_settled_on_one_node_reach_the_other_nodes_streams(
    pg_url: str, tmp_path: Path
) -> None:
    with (
        node(pg_url, tmp_path, "a") as a,
        node(pg_url, tmp_path, "b") as b,
        httpx.Client(headers=AUTH, timeout=30) as client,
    ):
        sid = client.post(f"{a}/sessions", json={"name": "shared"}).json()["id"]
        on_b = Watcher(b, sid)
        assert client.post(f"{a}/sessions/{sid}/prompt", json={"text": "hello"}).status_code == 202
        events = on_b.wait_for(2)
        wait_idle(client, a, sid)
        assert events[0]["record"]["content"] == "hello"

        # prompts may alternate between nodes: B heard A's events and continues them
        assert client.post(f"{b}/sessions/{sid}/prompt", json={"text": "via b"}).status_code == 202
        on_b.wait_for(4)
        wait_idle(client, b, sid)
        assert client.post(f"{a}/sessions/{sid}/prompt", json={"text": "via a"}).status_code == 202
        on_b.wait_for(6)
        wait_idle(client, a, sid)
        assert all(e["outcome"] == "done" for e in on_b.ended)
        final = client.get(f"{b}/sessions/{sid}/events").json()["events"]
        assert [e["preview"] for e in final][::2] == ["hello", "via b", "via a"]
        assert [e["id"] for e in on_b.settled] == [e["id"] for e in final]  # no gap, no double
        assert all(e["parent_id"] == p["id"] for p, e in itertools.pairwise(final))  # one chain
        on_b.stop()


def test_a_turn_that_raced_another_node_fails_with_a_conflict(pg_url: str) -> None:
    from infai.llm import ScriptedModel
    from infai.shells.server import create_app
    from infai.shells.server_run import ServerThread
    from infai.store.pg import PgStore
    from test_server import Gated

    slow = Gated("B's answer, decided before A spoke")
    stores = [PgStore(pg_url), PgStore(pg_url)]
    apps = [
        create_app(stores[0], token=TOKEN, model_factory=lambda name: ScriptedModel(["A's"])),
        create_app(stores[1], token=TOKEN, model_factory=lambda name: slow),
    ]
    servers = [ServerThread(app).start() for app in apps]
    try:
        a, b = (f"{server.url}/v1" for server in servers)
        with httpx.Client(headers=AUTH, timeout=30) as client:
            sid = client.post(f"{a}/sessions", json={}).json()["id"]
            on_b = Watcher(b, sid)
            client.post(f"{b}/sessions/{sid}/prompt", json={"text": "b asks"})
            on_b.wait_for(1)  # B's prompt is stored; its model is still thinking
            client.post(f"{a}/sessions/{sid}/prompt", json={"text": "a asks"})
            wait_idle(client, a, sid)
            slow.release()
            wait_idle(client, b, sid)
            deadline = time.monotonic() + 10
            while not on_b.ended:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert on_b.ended[-1]["outcome"] == "error"
            assert "another writer appended first" in on_b.ended[-1]["error"]
            events = client.get(f"{a}/sessions/{sid}/events?all=true").json()["events"]
            assert [e["preview"] for e in events] == ["b asks", "a asks", "A's"]
            assert all(e["parent_id"] == p["id"] for p, e in itertools.pairwise(events))
            retry = client.post(f"{b}/sessions/{sid}/prompt", json={"text": "b again"})
            assert retry.status_code == 202
            wait_idle(client, b, sid)
            events = client.get(f"{a}/sessions/{sid}/events").json()["events"]
            assert [e["preview"] for e in events][-2] == "b again"
            on_b.stop()
    finally:
        for server in servers:
            server.stop()
        for store in stores:
            store.close()

"""Two `infai serve` processes on one PostgreSQL database: fan-out and conflicts.

An event settled through node A reaches the SSE clients of node B (LISTEN /
NOTIFY), with the same ids, and prompts may alternate between the nodes. While
a turn runs on one node, the others refuse to start one (the session's lease);
a writer that takes no lease and races a turn makes that turn fail with a
conflict instead of forking. A session deleted on one node closes on the others.
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
        proc.stderr.close()  # type: ignore[union-attr]


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

    def messages(self) -> list[dict[str, Any]]:
        """The settled messages (a turn's files snapshots left out)."""
        return [e for e in self.settled if e["kind"] == "message"]

    def wait_for(self, count: int) -> list[dict[str, Any]]:
        """Wait until ``count`` messages have settled; the messages."""
        deadline = time.monotonic() + 15
        while len(self.messages()) < count:
            assert time.monotonic() < deadline, f"only {len(self.messages())} of {count} messages"
            time.sleep(0.02)
        return self.messages()

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
        said = [e["preview"] for e in final if e["kind"] == "message"]
        assert said[::2] == ["hello", "via b", "via a"]
        assert [e["id"] for e in on_b.settled] == [e["id"] for e in final]  # no gap, no double
        assert all(e["parent_id"] == p["id"] for p, e in itertools.pairwise(final))  # one chain
        on_b.stop()


@contextmanager
def two_nodes(pg_url: str, slow: Any) -> Iterator[tuple[str, str, list[Any]]]:
    """Two servers in this process on one database: A answers at once, B with ``slow``."""
    from infai.llm import ScriptedModel
    from infai.shells.server import create_app
    from infai.shells.server.run import ServerThread
    from infai.store.pg import PgStore

    stores = [PgStore(pg_url), PgStore(pg_url)]
    apps = [
        create_app(stores[0], token=TOKEN, model_factory=lambda name: ScriptedModel(["A's"] * 5)),
        create_app(stores[1], token=TOKEN, model_factory=lambda name: slow),
    ]
    servers = [ServerThread(app).start() for app in apps]
    try:
        a, b = (f"{server.url}/v1" for server in servers)
        yield a, b, stores
    finally:
        for server in servers:
            server.stop()
        for store in stores:
            store.close()


def wait_ended(watcher: Watcher, count: int = 1) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while len(watcher.ended) < count:
        assert time.monotonic() < deadline, "the turn did not end"
        time.sleep(0.02)
    return watcher.ended


def test_a_turn_on_one_node_makes_the_session_busy_on_the_others(pg_url: str) -> None:
    from test_server import Gated

    slow = Gated("B's answer")
    with two_nodes(pg_url, slow) as (a, b, _), httpx.Client(headers=AUTH, timeout=30) as client:
        sid = client.post(f"{a}/sessions", json={}).json()["id"]
        on_b = Watcher(b, sid)
        assert client.post(f"{b}/sessions/{sid}/prompt", json={"text": "b asks"}).status_code == 202
        on_b.wait_for(1)  # B's prompt is stored; its model is still thinking
        for method, path, body in (
            ("POST", "prompt", {"text": "a asks"}),
            ("POST", "compact", {}),
            ("DELETE", "", None),
        ):
            url = f"{a}/sessions/{sid}/{path}".rstrip("/")
            refused = client.request(method, url, json=body)
            assert refused.status_code == 409, (path, refused.text)
            assert "another process is running a turn" in refused.json()["error"]
        slow.release()
        assert wait_ended(on_b)[-1]["outcome"] == "done"
        # the lease went with B's turn: A continues B's events
        assert client.post(f"{a}/sessions/{sid}/prompt", json={"text": "a asks"}).status_code == 202
        on_b.wait_for(4)
        wait_idle(client, a, sid)
        events = client.get(f"{a}/sessions/{sid}/events?all=true").json()["events"]
        assert [e["preview"] for e in events] == ["b asks", "B's answer", "a asks", "A's"]
        assert all(e["parent_id"] == p["id"] for p, e in itertools.pairwise(events))
        assert [e["id"] for e in on_b.settled] == [e["id"] for e in events]
        on_b.stop()


def test_a_foreign_append_during_a_turn_is_replayed_and_the_turn_conflicts(pg_url: str) -> None:
    """A writer that takes no lease (a script on the store) appends while B's turn runs:
    B's watchers see it, replay and joins mid-message stay whole, B's reply conflicts."""
    from test_server import Gated

    from infai.store import MessageRecord

    slow = Gated("B's answer, decided before the script spoke")
    with (
        two_nodes(pg_url, slow) as (_, b, stores),
        httpx.Client(headers=AUTH, timeout=30) as client,
    ):
        sid = client.post(f"{b}/sessions", json={}).json()["id"]
        on_b = Watcher(b, sid)
        client.post(f"{b}/sessions/{sid}/prompt", json={"text": "b asks"})
        first = on_b.wait_for(1)[0]
        with stores[0].open_writer(sid) as script:
            foreign = script.append(MessageRecord(content="from a script"), "user")
        on_b.wait_for(2)
        assert on_b.settled[1]["id"] == foreign.id
        # reconnecting after the first event replays the foreign one; joining sees
        # the message B is writing so far, and HEAD as published
        headers = {"Last-Event-ID": first["id"]}
        with client.stream("GET", f"{b}/sessions/{sid}/stream", headers=headers) as r:
            assert r.status_code == 200
            names, seen = [], []
            for line in r.iter_lines():
                if line.startswith("event:"):
                    names.append(line.split(":", 1)[1].strip())
                elif line.startswith("data:"):
                    seen.append(json.loads(line.split(":", 1)[1]))
                    if names[-1] == "ready":
                        break
        assert names[0] == "settled" and seen[0]["id"] == foreign.id
        assert "delta" in names  # the turn's message so far survived the foreign event
        assert seen[-1]["head"] == foreign.id
        slow.release()
        ended = wait_ended(on_b)[-1]
        assert ended["outcome"] == "error" and "another writer appended first" in ended["error"]
        events = client.get(f"{b}/sessions/{sid}/events?all=true").json()["events"]
        assert [e["preview"] for e in events] == ["b asks", "from a script"]
        on_b.stop()


def test_deleting_a_session_on_one_node_closes_it_on_the_others(pg_url: str) -> None:
    from infai.llm import ScriptedModel

    with (
        two_nodes(pg_url, ScriptedModel(["B's"])) as (a, b, _),
        httpx.Client(headers=AUTH, timeout=30) as client,
    ):
        sid = client.post(f"{a}/sessions", json={}).json()["id"]
        closed = threading.Event()

        def watch() -> None:
            with client.stream("GET", f"{b}/sessions/{sid}/stream") as response:
                for line in response.iter_lines():
                    if line.startswith("event:") and "closed" in line:
                        closed.set()
                        return

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while client.get(f"{b}/sessions/{sid}").json().get("watchers") != 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert client.delete(f"{a}/sessions/{sid}").status_code == 204
        assert closed.wait(10), "B's watcher was not told"
        assert client.get(f"{b}/sessions/{sid}/stream").status_code == 404
        gone = client.post(f"{b}/sessions/{sid}/prompt", json={"text": "hello?"})
        assert gone.status_code == 404

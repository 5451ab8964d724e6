"""A node killed mid-turn, and a soak of three nodes with one killed and restarted.

A turn runs on node A when A gets SIGKILL: another node notices that A's lock
is gone, records the turn as interrupted (the prompt stays), and ends it, so
the streams on the other nodes show the end instead of hanging; a new prompt on
another node continues from the interruption, and the session checks clean.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from fakeapi import FakeOpenAI, Reply
from infai.agent.context import INTERRUPTED_NOTE
from servenodes import AUTH, WAIT, Nodes, Watcher, messages

#: the issue's bound: a lost node's turn is ended within this many seconds
LOST_WITHIN = 15.0


def interrupted(client: httpx.Client, base: str, sid: str) -> int:
    """How many interruption markers the session holds."""
    count = 0
    for entry in messages(client, base, sid):
        if entry["kind"] != "message" or entry["role"] != "user":
            continue
        event = client.get(f"{base}/sessions/{sid}/events/{entry['id']}").json()
        if (event["record"].get("metadata") or {}).get("interrupted") is True:
            count += 1
    return count


@pytest.mark.crash
def test_a_node_killed_mid_turn_is_noticed_and_its_turn_ends_everywhere(
    pg_url: str, tmp_path: Path
) -> None:
    slow = Reply(text=" ".join(["endless"] * 60), pieces=60, pause=0.25)
    with (
        FakeOpenAI([slow, Reply(text="picked up")]) as fake,
        Nodes(pg_url, tmp_path, fake.base_url, 3) as (a, b, c),
        httpx.Client(headers=AUTH, timeout=WAIT) as client,
    ):
        made = client.post(f"{a.url}/sessions", json={"working_dir": str(tmp_path / "work")})
        sid = made.json()["id"]
        on_b, on_c = Watcher(b.url, sid), Watcher(c.url, sid)
        turn = client.post(f"{a.url}/sessions/{sid}/prompt", json={"text": "go"}).json()["turn"]
        on_b.wait(lambda: len(on_b.of("delta")) >= 2, "no deltas on B")
        a.kill()
        killed = time.monotonic()
        for watcher in (on_b, on_c):
            ended = watcher.wait_ended(turn, timeout=LOST_WITHIN + 5)
            assert ended["outcome"] == "error" and "lost" in ended["error"]
        assert time.monotonic() - killed < LOST_WITHIN
        assert on_b.error is None and on_c.error is None  # the streams go on
        stored = messages(client, b.url, sid)
        said = [e["preview"] for e in stored if e["kind"] == "message"]
        assert said[0] == "go" and interrupted(client, b.url, sid) == 1
        assert client.get(f"{c.url}/sessions/{sid}").json()["turn"] is None

        # a new prompt on another node continues after the interruption
        nxt = client.post(f"{c.url}/sessions/{sid}/prompt", json={"text": "go on"})
        assert nxt.status_code == 202, nxt.text
        assert on_b.wait_ended(nxt.json()["turn"])["outcome"] == "done"
        sent = [m for m in fake.requests[-1].body["messages"] if m["role"] != "system"]
        roles = [m["role"] for m in sent]
        assert not any(x == y == "user" for x, y in itertools.pairwise(roles)), roles
        assert sent[0]["content"] == f"go\n\n{INTERRUPTED_NOTE}\n\ngo on"
        assert interrupted(client, b.url, sid) == 1
        on_b.stop()
        on_c.stop()
        fsck = subprocess.run(
            [sys.executable, "-m", "infai", "--store", pg_url, "session", "fsck", sid],
            capture_output=True, text=True, timeout=WAIT,
        )  # fmt: skip
        assert fsck.returncode == 0, fsck.stdout + fsck.stderr

"""Any node serves any client: three real ``infai serve`` processes on one PostgreSQL.

The model is the fake OpenAI server streaming its reply slowly, so a turn on
node A is observably running while the tests watch it from nodes B and C:
its deltas arrive there in order before it ends and make up the settled
reply; a Last-Event-ID reconnect to another node replays exactly what was
missed; a cancel posted to B stops A's turn; a question A asks is listed and
answered on C; two prompts at once on two nodes start one turn.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from fakeapi import FakeOpenAI, Reply
from servenodes import AUTH, WAIT, Node, Nodes, Watcher, messages

#: three server processes on a database of their own: ~20 s of the fast suite on one
#: worker (as test_multinode_kill.py, make crash runs them)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trio(
    pg_cluster: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[FakeOpenAI, list[Node], Path]]:
    """Three nodes on a database of their own, shared by this module's tests (starting
    them is most of a test's time); each test works in sessions of its own."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_cluster, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = pg_cluster.rsplit("/", 1)[0] + f"/{name}"
    tmp = tmp_path_factory.mktemp("trio")
    try:
        with FakeOpenAI() as fake, Nodes(url, tmp, fake.base_url, 3) as nodes:
            yield fake, nodes, tmp / "work"
    finally:
        with psycopg.connect(pg_cluster, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def script(fake: FakeOpenAI, *replies: Reply) -> None:
    """What the model answers next (to whichever node asks)."""
    with fake._lock:
        fake.replies[:] = list(replies)
        fake.requests.clear()


def text_of(event: dict[str, Any]) -> str:
    record = event.get("record") or {}
    content = record.get("content")
    return content if isinstance(content, str) else ""


def session(client: httpx.Client, base: str, work: Path) -> str:
    made = client.post(f"{base}/sessions", json={"working_dir": str(work)})
    assert made.status_code == 201, made.text
    sid: str = made.json()["id"]
    return sid


def deltas_between(watcher: Watcher, turn: str) -> list[str]:
    """The text deltas of ``turn`` as the watcher got them, in order."""
    return [d["text"] for d in watcher.of("delta") if d["turn"] == turn and d["kind"] == "text"]


Trio = tuple[FakeOpenAI, list[Node], Path]


def test_live_deltas_reach_every_node_and_last_event_id_replays_on_another(trio: Trio) -> None:
    fake, (a, b, c), work = trio
    words = " ".join(f"word{n}" for n in range(8))
    rest = threading.Event()  # the role and three words, then the rest once looked at
    script(fake, Reply(text=words, pieces=8, pause=0.2, hold=(4, rest)), Reply(text="second"))
    with httpx.Client(headers=AUTH, timeout=WAIT) as client:
        sid = session(client, a.url, work)
        on_b, on_c = Watcher(b.url, sid), Watcher(c.url, sid)
        started = client.post(f"{a.url}/sessions/{sid}/prompt", json={"text": "count"})
        assert started.status_code == 202, started.text
        turn = started.json()["turn"]
        # deltas reach B while the turn still runs on A: the reply is not stored yet
        on_b.wait(lambda: len(deltas_between(on_b, turn)) >= 2, "no deltas on B")
        assert [e["kind"] for e in messages(client, a.url, sid)].count("message") == 1
        assert client.get(f"{c.url}/sessions/{sid}").json()["turn"] == turn
        rest.set()
        for watcher in (on_b, on_c):
            assert watcher.wait_ended(turn)["outcome"] == "done"
        stored = messages(client, a.url, sid)
        reply = [e for e in stored if e["kind"] == "message" and e["role"] == "assistant"]
        full = client.get(f"{a.url}/sessions/{sid}/events/{reply[0]['id']}").json()
        for watcher in (on_b, on_c):
            assert "".join(deltas_between(watcher, turn)) == text_of(full) == words
            names = watcher.names()
            # in order: every delta before the settled reply, the end after it
            settled_reply = next(
                i for i, (n, d, _) in enumerate(watcher.frames)
                if n == "settled" and d["id"] == reply[0]["id"]
            )  # fmt: skip
            last_delta = max(i for i, n in enumerate(names) if n == "delta")
            assert last_delta < settled_reply < names.index("turn_ended")
            assert [d["id"] for d in watcher.of("settled")] == [e["id"] for e in stored]
        on_b.stop()

        # a client that saw only the prompt reconnects to C after another turn ran on B
        prompt_id = stored[0]["id"]
        again = client.post(f"{b.url}/sessions/{sid}/prompt", json={"text": "more"})
        assert again.status_code == 202
        on_c.wait_ended(again.json()["turn"])
        stored = messages(client, a.url, sid)
        replay = Watcher(c.url, sid, last_event=prompt_id)
        replay.wait(lambda: "ready" in replay.names(), "no ready")
        before = replay.frames[: replay.names().index("ready")]
        sent = [(d["id"], sse) for n, d, sse in before if n == "settled"]
        after = [e["id"] for e in stored[1:]]
        assert [i for i, _ in sent] == after  # exactly the missed ones, once, in order
        assert [sse for _, sse in sent] == after  # each with its SSE id
        replay.stop()
        on_c.stop()


def test_cancel_posted_to_another_node_stops_the_turn(trio: Trio) -> None:
    fake, (a, b, c), work = trio
    # 20 s if left to run: a cancel answered in well under that stopped the turn
    slow = Reply(text=" ".join(["slow"] * 40), pieces=40, pause=0.5)
    script(fake, slow, slow)
    with httpx.Client(headers=AUTH, timeout=WAIT) as client:
        sid = session(client, a.url, work)
        on_c = Watcher(c.url, sid)
        turn = client.post(f"{a.url}/sessions/{sid}/prompt", json={"text": "go"}).json()["turn"]
        on_c.wait(lambda: deltas_between(on_c, turn), "no deltas on C")
        asked = time.monotonic()
        cancelled = client.post(f"{b.url}/sessions/{sid}/cancel", json={})
        took = time.monotonic() - asked
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json() == {"turn": turn, "outcome": "cancelled"}
        assert took < 10.0, took  # (the reply alone would have run 20 s)
        # B answered once it had stopped: A is free, and C's watchers saw the end
        assert client.get(f"{a.url}/sessions/{sid}").json()["turn"] is None
        assert on_c.wait_ended(turn)["outcome"] == "cancelled"
        stored = messages(client, a.url, sid)
        markers = [e for e in stored if e["kind"] == "message" and "interrupted" in e["preview"]]
        assert len(markers) == 1, [e["preview"] for e in stored]
        assert client.post(f"{b.url}/sessions/{sid}/cancel", json={}).status_code == 409
        # the next prompt starts at once, on any node, and an acknowledged turn is
        # known to every node: a cancel sent elsewhere right after the 202 finds it
        nxt = client.post(f"{c.url}/sessions/{sid}/prompt", json={"text": "again"})
        assert nxt.status_code == 202, nxt.text
        stopped = client.post(f"{a.url}/sessions/{sid}/cancel", json={})
        assert stopped.json() == {"turn": nxt.json()["turn"], "outcome": "cancelled"}
        on_c.wait_ended(nxt.json()["turn"])
        on_c.stop()


def test_two_prompts_at_once_on_two_nodes_start_one_turn(trio: Trio) -> None:
    fake, (a, b, _), work = trio
    slow = Reply(text=" ".join(["long"] * 20), pieces=20, pause=0.2)
    script(fake, slow, Reply(text="never asked"))
    with httpx.Client(headers=AUTH, timeout=WAIT) as client:
        sid = session(client, a.url, work)
        for node in (a, b):  # both have the session open: the race is the turn's alone
            assert client.get(f"{node.url}/sessions/{sid}/head").status_code == 200
        barrier = threading.Barrier(2)
        answers: dict[str, httpx.Response] = {}

        def send(name: str, base: str) -> None:
            with httpx.Client(headers=AUTH, timeout=WAIT) as mine:
                barrier.wait()
                answers[name] = mine.post(f"{base}/sessions/{sid}/prompt", json={"text": name})

        threads = [threading.Thread(target=send, args=(n.name, n.url)) for n in (a, b)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        codes = sorted(r.status_code for r in answers.values())
        assert codes == [202, 409], {k: (r.status_code, r.text) for k, r in answers.items()}
        stored = messages(client, a.url, sid)
        prompts = [e["preview"] for e in stored if e["kind"] == "message" and e["role"] == "user"]
        winner = next(k for k, r in answers.items() if r.status_code == 202)
        assert prompts == [winner]
        assert len(fake.requests) == 1
        # the loser may cancel the winner's turn at once: an acknowledged turn is known
        # to every node (and this frees the trio for the next test)
        loser = next(n for n in (a, b) if answers[n.name].status_code == 409)
        cancelled = client.post(f"{loser.url}/sessions/{sid}/cancel", json={})
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["outcome"] == "cancelled"


def test_a_question_asked_on_one_node_is_answered_on_another(trio: Trio, pg_cluster: str) -> None:
    fake, (a, b, c), work = trio
    command = f"echo hi > {work}/made-by-a.txt"
    script(fake, Reply(tool_calls=[("call_1", "bash", {"command": command})]), Reply(text="done"))
    with httpx.Client(headers=AUTH, timeout=WAIT) as client:
        sid = session(client, a.url, work)
        on_b = Watcher(b.url, sid)
        turn = client.post(f"{a.url}/sessions/{sid}/prompt", json={"text": "make"}).json()["turn"]
        on_b.wait(lambda: on_b.of("approval"), "no question on B")
        [asked] = on_b.of("approval")
        assert asked["turn"] == turn and asked["tool"] == "bash"
        # a client attaching to C now, having watched nothing, is told of it
        detail = client.get(f"{c.url}/sessions/{sid}").json()  # not open on C yet
        assert (detail["open"], detail["turn"], detail["pending_approvals"]) == (False, turn, 1)
        listed = client.get(f"{c.url}/sessions/{sid}/approvals").json()["approvals"]
        assert [q["id"] for q in listed] == [asked["id"]]
        late = Watcher(c.url, sid)
        late.wait(lambda: "ready" in late.names(), "no ready on C")
        first = late.names()[: late.names().index("ready")]
        assert first[:1] == ["turn_started"] and late.of("approval")[0]["id"] == asked["id"]
        assert client.get(f"{c.url}/sessions/{sid}").json()["pending_approvals"] == 1
        answer = {"id": asked["id"], "answer": "allow"}
        answered = client.post(f"{c.url}/sessions/{sid}/approvals", json=answer)
        assert answered.status_code == 200, answered.text
        again = client.post(f"{b.url}/sessions/{sid}/approvals", json={**answer, "answer": "deny"})
        assert again.status_code == 404  # answered once, whichever node is asked next
        assert on_b.wait_ended(turn)["outcome"] == "done"
        assert (work / "made-by-a.txt").read_text() == "hi\n"  # the turn went on on A
        resolved = on_b.of("approval_resolved")
        assert resolved == [{"id": asked["id"], "answer": "allow", "by": "api"}]
        late.wait(lambda: late.of("approval_resolved"), "C was not told")
        assert client.get(f"{b.url}/sessions/{sid}/approvals").json()["approvals"] == []
        results = [e for e in messages(client, a.url, sid) if e["kind"] == "tool_result"]
        assert len(results) == 1
        on_b.stop()
        late.stop()

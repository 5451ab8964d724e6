"""The HTTP server against a real client on a loopback port: turns, streams, approvals.

Each test starts uvicorn on a thread with a free loopback port and drives it
with httpx, as an editor would: REST for commands, Server-Sent Events (read
line by line) for what happens.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from infai.llm import (
    Done,
    Message,
    Model,
    Request,
    ScriptedModel,
    StreamEvent,
    TextDelta,
    ToolCall,
)
from infai.llm.registry import build_model
from infai.shells.server import create_app
from infai.shells.server.run import ServerThread
from infai.shells.server.sessions import Sessions
from infai.store import MessageRecord, Store, StoreOptions

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
Factory = Callable[[str | None], Model]


def registry(name: str | None) -> Model:
    """Models by name, as ``infai serve`` builds them (``offline`` by default)."""
    return build_model(name or "offline")


@dataclass
class SSE:
    name: str
    data: Any
    id: str | None


class Stream:
    """An open SSE response, read one event at a time (comments skipped)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()

    def next(self) -> SSE:
        name, data, event_id = "message", "", None
        for line in self._lines:
            if not line:
                if data:
                    return SSE(name, json.loads(data), event_id)
                continue
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            elif field == "data":
                data += value
            elif field == "id":
                event_id = value
        raise EOFError("the stream ended")

    def until(self, name: str, pred: Callable[[SSE], bool] = lambda e: True) -> list[SSE]:
        """Events up to and including the first ``name`` that ``pred`` accepts."""
        seen = []
        while True:
            event = self.next()
            seen.append(event)
            if event.name == name and pred(event):
                return seen


class Running:
    """A server on a loopback port, a store under it, and an authenticated client."""

    def __init__(
        self,
        home: Path,
        work: Path,
        factory: Factory = registry,
        *,
        approval_timeout: float = 30.0,
        lock_timeout: float = 5.0,
        idle_close: float | None = None,
    ) -> None:
        self.store = Store(home, options=StoreOptions(lock_timeout=lock_timeout))
        self.app = create_app(
            self.store,
            token=TOKEN,
            model_factory=factory,
            working_dir=work,
            approval_timeout=approval_timeout,
            idle_close=idle_close,
        )
        self.server = ServerThread(self.app).start()
        self.url = self.server.url
        self.client = httpx.Client(base_url=self.url, headers=AUTH, timeout=10)
        #: other clients a test opened, closed with the harness
        self.closing: list[httpx.Client] = []

    @property
    def sessions(self) -> Sessions:
        sessions: Sessions = self.app.state.sessions
        return sessions

    def new_session(self, **body: Any) -> str:
        response = self.client.post("/v1/sessions", json=body)
        assert response.status_code == 201, response.text
        sid: str = response.json()["id"]
        return sid

    def prompt(self, sid: str, text: str, **more: Any) -> str:
        response = self.client.post(f"/v1/sessions/{sid}/prompt", json={"text": text, **more})
        assert response.status_code == 202, response.text
        turn: str = response.json()["turn"]
        return turn

    def detail(self, sid: str) -> dict[str, Any]:
        response = self.client.get(f"/v1/sessions/{sid}")
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()
        return data

    @contextmanager
    def stream(self, sid: str, after: str | None = None) -> Iterator[Stream]:
        headers = {"Last-Event-ID": after} if after else {}
        with self.client.stream("GET", f"/v1/sessions/{sid}/stream", headers=headers) as r:
            assert r.status_code == 200, r.read()
            yield Stream(r)

    @contextmanager
    def watch(self, sid: str, after: str | None = None) -> Iterator[tuple[Stream, list[SSE]]]:
        """A stream that has caught up: what it sent up to ``ready`` comes with it."""
        with self.stream(sid, after) as stream:
            yield stream, stream.until("ready")

    def wait(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, "timed out waiting"
            time.sleep(0.01)

    def close(self) -> None:
        self.client.close()
        for client in self.closing:
            client.close()
        self.server.stop()


def harnesses(home: Path, work: Path) -> Iterator[Callable[..., Running]]:
    """Start harnesses on demand (all on one home); stop them all afterwards."""
    started: list[Running] = []

    def start(factory: Factory = registry, **options: Any) -> Running:
        harness = Running(home, work, factory, **options)
        started.append(harness)
        return harness

    yield start
    for harness in started:
        harness.close()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.fixture
def make(tmp_path: Path, work: Path) -> Iterator[Callable[..., Running]]:
    yield from harnesses(tmp_path / "home", work)


class Gated:
    """Streams the first half of its text, waits to be released, then streams the rest."""

    name = "gated"
    context_window = 128_000

    def __init__(self, text: str) -> None:
        self.text = text
        self._lock = threading.Lock()
        self._released = False
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def release(self) -> None:
        """Let every stream waiting (or to wait) go on; safe from any thread."""
        with self._lock:
            self._released = True
            for loop, event in self._waiting:
                if not loop.is_closed():  # a server stopped under it is gone
                    loop.call_soon_threadsafe(event.set)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        half = len(self.text) // 2
        yield TextDelta(self.text[: half // 2])
        yield TextDelta(self.text[half // 2 : half])
        released = asyncio.Event()
        with self._lock:
            if self._released:
                released.set()
            self._waiting.append((asyncio.get_running_loop(), released))
        await released.wait()
        yield TextDelta(self.text[half:])
        yield Done(Message(role="assistant", content=self.text, model=self.name))


def write_call(path: str = "out.txt", content: str = "hi") -> Message:
    call = ToolCall("c1", "write_file", {"path": path, "content": content})
    return Message(role="assistant", content="writing", tool_calls=(call,))


def settled_ids(events: list[SSE]) -> list[str]:
    return [e.data["id"] for e in events if e.name == "settled"]


def store_ids(harness: Running, sid: str) -> list[str]:
    response = harness.client.get(f"/v1/sessions/{sid}/events", params={"all": "true"})
    return [e["id"] for e in response.json()["events"]]


def text_of(events: list[SSE]) -> str:
    return "".join(e.data["text"] for e in events if e.name == "delta" and "text" in e.data)


# -- the full flow -------------------------------------------------------------


def test_prompt_watch_approve_and_see_the_result(make: Callable[..., Running], work: Path) -> None:
    h = make(lambda name: ScriptedModel([write_call(), "done"]))
    sid = h.new_session(name="demo")
    with h.watch(sid) as (stream, hello):
        assert hello[-1].data == {"session": sid, "head": None, "turn": None}
        turn = h.prompt(sid, "write it")
        asked = stream.until("approval")
        question = asked[-1].data
        assert question["tool"] == "write_file" and question["subject"] == "out.txt"
        assert question["turn"] == turn and question["arguments"] == {
            "path": "out.txt",
            "content": "hi",
        }
        call_event = [e for e in asked if e.name == "settled"][-1].data
        assert call_event["kind"] == "tool_call" and question["call_event_id"] == call_event["id"]
        assert not (work / "out.txt").exists()

        pending = h.client.get(f"/v1/sessions/{sid}/approvals").json()["approvals"]
        assert [q["id"] for q in pending] == [question["id"]]
        answer = {"id": question["id"], "answer": "allow"}
        assert h.client.post(f"/v1/sessions/{sid}/approvals", json=answer).status_code == 200

        rest = stream.until("turn_ended")
    assert rest[0].name == "approval_resolved" and rest[0].data["by"] == "api"
    assert rest[-1].data == {"turn": turn, "outcome": "done", "error": None}
    result = next(e.data for e in rest if e.name == "settled")
    assert result["kind"] == "tool_result"
    assert result["record"]["content"] == "wrote 2 characters to out.txt"
    assert (work / "out.txt").read_text() == "hi"
    everything = [*hello, *asked, *rest]
    assert [e.data["kind"] for e in everything if e.name == "settled"] == [
        "message", "message", "tool_call", "tool_result", "message",
    ]  # fmt: skip
    assert text_of(everything) == "writingdone"
    assert settled_ids(everything) == store_ids(h, sid)
    assert all(e.id == e.data["id"] for e in everything if e.name == "settled")
    assert all(e.id is None for e in everything if e.name != "settled")

    shown = h.client.get(f"/v1/sessions/{sid}/events/{result['id']}").json()
    assert shown["record"]["metadata"]["permission"]["by"] == "user"
    context = h.client.get(f"/v1/sessions/{sid}/context").json()
    assert [e["id"] for e in context["events"]] == store_ids(h, sid)
    assert context["boundary"] is None
    detail = h.detail(sid)
    assert detail["open"] and detail["turn"] is None and detail["events"] == 5
    assert h.client.get(f"/v1/sessions/{sid}/approvals").json() == {"approvals": []}


def test_many_watchers_see_the_same_frames(make: Callable[..., Running]) -> None:
    h = make()
    sid = h.new_session()
    with h.watch(sid) as (a, _), h.watch(sid) as (b, _), h.watch(sid) as (c, _):
        assert h.detail(sid)["watchers"] == 3
        h.prompt(sid, "hello")
        seen = [s.until("turn_ended") for s in (a, b, c)]
    assert seen[0] == seen[1] == seen[2]
    assert len(settled_ids(seen[0])) == 2 and text_of(seen[0]).startswith("offline model")
    h.wait(lambda: h.detail(sid)["watchers"] == 0)


# -- reconnecting --------------------------------------------------------------


def test_last_event_id_replays_every_settled_event_after_it_once(
    make: Callable[..., Running],
) -> None:
    h = make()
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "one")
        first = settled_ids(stream.until("turn_ended"))
        h.prompt(sid, "two")
        second = settled_ids(stream.until("turn_ended"))
    assert len(first) == len(second) == 2
    with h.watch(sid, after=first[0]) as (stream, caught_up):
        assert settled_ids(caught_up) == [*first[1:], *second]
        h.prompt(sid, "three")
        live = stream.until("turn_ended")
    assert len(settled_ids(live)) == 2
    assert settled_ids(caught_up) + settled_ids(live) == store_ids(h, sid)[1:]
    # The same with ?after= (for EventSource, which cannot set the header on its first try).
    response = h.client.get(f"/v1/sessions/{sid}/events/{first[0]}")
    assert response.status_code == 200
    with h.client.stream("GET", f"/v1/sessions/{sid}/stream?after={second[-1]}") as r:
        assert [e.name for e in Stream(r).until("ready")] == ["settled", "settled", "ready"]


def test_last_event_id_that_is_not_an_event_of_the_session(make: Callable[..., Running]) -> None:
    h = make()
    sid = h.new_session()
    url = f"/v1/sessions/{sid}/stream"
    missing = h.client.get(url, headers={"Last-Event-ID": sid})
    assert missing.status_code == 404 and "no event" in missing.json()["error"]
    junk = h.client.get(url, headers={"Last-Event-ID": "3"})
    assert junk.status_code == 400 and "Last-Event-ID" in junk.json()["error"]


def test_joining_mid_message_and_reconnecting_mid_turn(make: Callable[..., Running]) -> None:
    text = "a message long enough to arrive in several deltas"
    gated = Gated(text)
    h = make(lambda name: gated)
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        turn = h.prompt(sid, "go")
        seen = stream.until("delta")
        seen += stream.until("delta")  # the message so far, then the gate holds it
    user_event = settled_ids(seen)[-1]
    with h.watch(sid) as (joined, hello):  # no Last-Event-ID: the turn in flight only
        assert [e.name for e in hello] == ["turn_started", "delta", "delta", "ready"]
        assert hello[-1].data["turn"] == turn and text_of(hello) == text_of(seen)
        with h.watch(sid, after=user_event) as (back, again):
            assert again == hello  # nothing settled since: the same picture
            gated.release()
            live = back.until("turn_ended")
        assert joined.until("turn_ended") == live
    assert text_of(hello) + text_of(live) == text
    settled = [e for e in live if e.name == "settled"]
    assert [e.data["record"]["content"] for e in settled] == [text]


def test_a_client_disconnecting_mid_turn_leaves_the_turn_running(
    make: Callable[..., Running],
) -> None:
    gated = Gated("the answer nobody stayed for")
    h = make(lambda name: gated)
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "go")
        stream.until("delta")
    h.wait(lambda: h.detail(sid)["watchers"] == 0)
    assert h.detail(sid)["turn"] is not None
    gated.release()
    h.wait(lambda: h.detail(sid)["turn"] is None)
    with h.watch(sid, after=store_ids(h, sid)[0]) as (_, caught_up):
        assert [e.data["preview"] for e in caught_up if e.name == "settled"] == [
            "the answer nobody stayed for"
        ]


def test_a_streamed_prompt_answers_with_its_turn_and_ends_with_it(
    make: Callable[..., Running],
) -> None:
    h = make(lambda name: ScriptedModel(["streamed answer"]))
    sid = h.new_session()
    body = {"text": "go", "stream": True}
    with h.client.stream("POST", f"/v1/sessions/{sid}/prompt", json=body) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        turn = r.headers["Infai-Turn"]
        stream = Stream(r)
        seen = stream.until("turn_ended")
        assert seen[0].name == "turn_started" and seen[0].data == {"turn": turn}
        assert seen[-1].data == {"turn": turn, "outcome": "done", "error": None}
        with pytest.raises(EOFError):
            stream.next()  # the response ends with the turn
    assert [e.data["preview"] for e in seen if e.name == "settled"] == ["go", "streamed answer"]
    assert settled_ids(seen) == store_ids(h, sid)
    assert h.detail(sid)["turn"] is None


def test_a_streamed_prompt_whose_client_goes_is_cancelled(
    make: Callable[..., Running],
) -> None:
    gated = Gated("an answer nobody waited for")
    h = make(lambda name: gated)
    sid = h.new_session()
    try:
        with h.watch(sid) as (other, _):
            body = {"text": "go", "stream": True}
            with h.client.stream("POST", f"/v1/sessions/{sid}/prompt", json=body) as r:
                assert r.status_code == 200, r.read()
                Stream(r).until("delta")
            # the prompting client is gone; another watcher sees the turn end cancelled
            end = other.until("turn_ended")
    finally:
        gated.release()
    assert end[-1].data["outcome"] == "cancelled"
    assert [e.data["record"]["content"] for e in end if e.name == "settled"][-1] == (
        "[turn interrupted]"
    )
    assert h.detail(sid)["turn"] is None
    again = h.client.post(f"/v1/sessions/{sid}/prompt", json={"text": "still usable"})
    assert again.status_code == 202, again.text


def test_a_streamed_prompt_to_a_busy_session_is_refused_and_holds_nothing(
    make: Callable[..., Running],
) -> None:
    gated = Gated("busy")
    h = make(lambda name: gated)
    sid = h.new_session()
    try:
        h.prompt(sid, "first")
        busy = h.client.post(f"/v1/sessions/{sid}/prompt", json={"text": "x", "stream": True})
        assert busy.status_code == 409 and "busy" in busy.json()["error"]
        assert h.detail(sid)["watchers"] == 0
    finally:
        gated.release()
    h.wait(lambda: h.detail(sid)["turn"] is None)


# -- turns ---------------------------------------------------------------------


def test_cancelling_a_turn_marks_it_interrupted(make: Callable[..., Running]) -> None:
    gated = Gated("never finished")
    h = make(lambda name: gated)
    sid = h.new_session()
    try:
        with h.watch(sid) as (stream, _):
            turn = h.prompt(sid, "go")
            stream.until("delta")
            busy = h.client.post(f"/v1/sessions/{sid}/prompt", json={"text": "again"})
            assert busy.status_code == 409 and "busy" in busy.json()["error"]
            cancelled = h.client.post(f"/v1/sessions/{sid}/cancel", json={"turn": turn})
            assert cancelled.json() == {"turn": turn, "outcome": "cancelled"}
            end = stream.until("turn_ended")
    finally:
        gated.release()
    # what had been streamed is kept, marked interrupted, then the marker (issue 13)
    assert [e.data["record"]["content"] for e in end if e.name == "settled"] == [
        "never f",
        "[turn interrupted]",
    ]
    assert end[-1].data == {"turn": turn, "outcome": "cancelled", "error": None}
    assert len(store_ids(h, sid)) == 3
    again = h.client.post(f"/v1/sessions/{sid}/cancel")
    assert again.status_code == 409  # and it reads right (it said "no turn is not in flight")
    assert again.json()["error"] == f"no turn is in flight in session {sid}"
    other = h.client.post(f"/v1/sessions/{sid}/cancel", json={"turn": turn})
    assert other.json()["error"] == f"turn {turn} is not in flight in session {sid}"


def test_an_unanswered_question_is_denied_after_the_timeout(
    make: Callable[..., Running], work: Path
) -> None:
    h = make(lambda name: ScriptedModel([write_call(), "gave up"]), approval_timeout=0.2)
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "write it")
        events = stream.until("turn_ended")
    resolved = next(e for e in events if e.name == "approval_resolved")
    assert resolved.data["answer"] == "deny" and resolved.data["by"] == "timeout"
    result = next(e.data["record"] for e in events if e.data.get("kind") == "tool_result")
    assert result["is_error"] and "permission denied" in result["content"]
    assert result["metadata"]["permission"]["by"] == "timeout"  # recorded as such
    assert not (work / "out.txt").exists()


def test_allow_always_answers_later_questions_itself(
    make: Callable[..., Running], work: Path
) -> None:
    replies: list[Message | str] = [write_call(content="1"), "one", write_call(content="2"), "two"]
    h = make(lambda name: ScriptedModel(replies))
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "first")
        question = stream.until("approval")[-1].data
        assert question["always"] == ["out.txt"]  # what answering adds
        assert question["reason"] == "write_file can change things"
        body = {"id": question["id"], "answer": "allow-always"}
        assert h.client.post(f"/v1/sessions/{sid}/approvals", json=body).status_code == 200
        stream.until("turn_ended")
        h.prompt(sid, "second")
        second = stream.until("turn_ended")
    assert not any(e.name == "approval" for e in second)
    assert (work / "out.txt").read_text() == "2"
    stale = h.client.post(f"/v1/sessions/{sid}/approvals", json=body)
    assert stale.status_code == 404 and "no pending question" in stale.json()["error"]


def test_allow_always_with_patterns_allows_what_they_match_and_is_kept(
    make: Callable[..., Running], work: Path
) -> None:
    replies: list[Message | str] = [
        write_call("notes/a.txt", "1"),
        "one",
        write_call("notes/deep/b.txt", "2"),
        "two",
    ]
    h = make(lambda name: ScriptedModel(replies))
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "first")
        question = stream.until("approval")[-1].data
        assert question["always"] == ["notes/*"]
        url = f"/v1/sessions/{sid}/approvals"
        for bad, problem in (
            ({"answer": "allow", "patterns": ["x"]}, "only with the answer 'allow-always'"),
            ({"answer": "allow-always", "patterns": []}, "needs at least 1 item"),
            ({"answer": "allow-always", "patterns": ["  "]}, "must not be blank"),
            ({"answer": "allow-always", "patterns": ["x"] * 21}, "more than 20 items"),
        ):
            refused = h.client.post(url, json={"id": question["id"], **bad})
            assert refused.status_code == 422 and problem in refused.json()["error"], bad
        body = {"id": question["id"], "answer": "allow-always", "patterns": ["notes/**"]}
        assert h.client.post(url, json=body).status_code == 200
        resolved = stream.until("approval_resolved")[-1].data
        assert resolved["answer"] == "allow-always" and resolved["patterns"] == ["notes/**"]
        stream.until("turn_ended")
        h.prompt(sid, "second")
        second = stream.until("turn_ended")
    assert not any(e.name == "approval" for e in second)
    assert (work / "notes" / "deep" / "b.txt").read_text() == "2"
    assert h.store.info(sid).extra["allowed"] == ["write_file notes/**"]


def test_branch_selection_compaction_and_delete(make: Callable[..., Running]) -> None:
    h = make()
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "one")
        first = settled_ids(stream.until("turn_ended"))
        h.prompt(sid, "two")
        stream.until("turn_ended")
        head = h.client.get(f"/v1/sessions/{sid}/head").json()
        assert head["pending_parent"] is None
        chosen = h.client.post(f"/v1/sessions/{sid}/select", json={"event_id": first[1]})
        assert chosen.json() == {"head": head["head"], "pending_parent": first[1], "summary": None}
        assert stream.until("selected")[-1].data["pending_parent"] == first[1]
        h.prompt(sid, "instead")
        branch = stream.until("turn_ended")
        user = next(e.data for e in branch if e.name == "settled")
        assert user["parent_id"] == first[1] and user["branch_from"] == first[1]
        compacted = h.client.post(f"/v1/sessions/{sid}/compact")
        assert compacted.status_code == 201 and compacted.json()["kind"] == "compaction"
        assert stream.until("settled")[-1].data["id"] == compacted.json()["id"]
        path = h.client.get(f"/v1/sessions/{sid}/events").json()["events"]
        assert [e["kind"] for e in path] == ["compaction"]
        tree = h.client.get(f"/v1/sessions/{sid}/events?all=1").json()
        assert len(tree["events"]) == 7 and len(tree["leaves"]) == 2
        assert h.client.delete(f"/v1/sessions/{sid}").status_code == 204
        assert stream.until("closed")[-1].data == {"reason": "session deleted"}
    assert h.client.get(f"/v1/sessions/{sid}").status_code == 404
    assert h.store.list_sessions() == []


def test_two_servers_on_one_home_never_write_one_session_together(
    make: Callable[..., Running],
) -> None:
    gated = Gated("a long answer")
    a = make(lambda name: gated, lock_timeout=0.1)
    b = make(lambda name: registry(None), lock_timeout=0.1)  # offline, whatever a used
    sid = a.new_session()
    try:
        with a.watch(sid) as (stream, _):
            a.prompt(sid, "mine")
            stream.until("delta")  # a's turn holds the session's writer
            refused = b.client.post(f"/v1/sessions/{sid}/prompt", json={"text": "mine too"})
            assert refused.status_code == 409
            assert "being written by another process" in refused.json()["error"]
            assert b.client.get(f"/v1/sessions/{sid}/stream").status_code == 409
            assert store_ids(b, sid) == store_ids(a, sid)  # reading needs no lock
            assert b.client.delete(f"/v1/sessions/{sid}").status_code == 409
            gated.release()
            stream.until("turn_ended")
    finally:
        gated.release()
    # a releases the writer when its turn ends (issue 13): b's turn goes next
    b.prompt(sid, "now mine")
    b.wait(lambda: b.detail(sid)["turn"] is None)
    assert len(store_ids(b, sid)) == 4


def test_shutdown_ends_streams_and_releases_every_session(
    make: Callable[..., Running], tmp_path: Path
) -> None:
    gated = Gated("cut short")
    h = make(lambda name: gated)
    sid = h.new_session()
    try:
        with h.watch(sid) as (stream, _):
            h.prompt(sid, "go")
            stream.until("delta")
            started = time.monotonic()
            h.server.stop()
            ending = stream.until("closed")
    finally:
        gated.release()
    assert time.monotonic() - started < 4
    assert ending[-1].data == {"reason": "server shutting down"}
    assert h.sessions.open == {}
    with Store(tmp_path / "home").open_writer(sid, timeout=0) as writer:  # the lock is free
        assert writer.context().events[-1].preview == "[turn interrupted]"


def test_scripted_model_sees_the_prompt(make: Callable[..., Running]) -> None:
    model = ScriptedModel(["fine"])
    h = make(lambda name: model)
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "how are you?")
        stream.until("turn_ended")
    assert [m.content for m in model.requests[0].messages] == ["how are you?"]


def test_a_served_session_offers_subagents_that_stay_out_of_its_context(
    make: Callable[..., Running],
) -> None:
    call = ToolCall("t1", "task", {"prompt": "count"})
    replies: list[Any] = [
        Message(role="assistant", tool_calls=(call,)),
        "three",
        "it counted three",
    ]
    model = ScriptedModel(replies)
    h = make(lambda name: model)
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "delegate")
        events = stream.until("turn_ended")
    result = next(e.data["record"] for e in events if e.data.get("kind") == "tool_result")
    assert result["content"] == "three" and not result.get("is_error")
    child = result["metadata"]["child_session"]
    assert h.store.info(child).parent_session == sid
    with h.store.open_reader(sid) as reader:
        last = reader.context().events[-1].record
    assert isinstance(last, MessageRecord) and last.content == "it counted three"


def test_deleting_a_session_while_it_compacts_cancels_the_compaction(
    make: Callable[..., Running],
) -> None:
    gated = Gated('{"summary": "late"}')
    h = make(lambda name: gated)
    sid = h.new_session()
    writer_events = h.client.post(f"/v1/sessions/{sid}/prompt", json={"text": "hi"})
    assert writer_events.status_code == 202
    gated.release()  # the turn's reply
    _wait_idle(h, sid)
    gated_summary = Gated('{"summary": "never"}')
    h.sessions.open[sid].agent.model = gated_summary  # the compaction will hang
    result: dict[str, Any] = {}

    def compact() -> None:
        result["response"] = h.client.post(f"/v1/sessions/{sid}/compact")

    thread = threading.Thread(target=compact)
    thread.start()
    deadline = time.monotonic() + 10
    while h.client.get(f"/v1/sessions/{sid}").json().get("busy") != "compacting":
        assert time.monotonic() < deadline, "the compaction never started"
        time.sleep(0.02)
    deleted = h.client.delete(f"/v1/sessions/{sid}")
    thread.join(10)
    gated_summary.release()
    assert deleted.status_code == 204
    response = result["response"]
    assert response.status_code == 409 and "closed before this finished" in response.json()["error"]
    assert not h.store.exists(sid)


def _wait_idle(h: Running, sid: str) -> None:
    deadline = time.monotonic() + 10
    while h.client.get(f"/v1/sessions/{sid}").json().get("busy") is not None:
        assert time.monotonic() < deadline, "the session stayed busy"
        time.sleep(0.02)


def test_stopping_the_server_closes_each_session_model(make: Callable[..., Running]) -> None:
    class Closable(ScriptedModel):
        closed = 0

        async def aclose(self) -> None:
            Closable.closed += 1

    h = make(lambda name: Closable(["hello"]))
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "hi")
        stream.until("turn_ended")
    h.close()
    assert Closable.closed == 1


def test_an_idle_session_is_closed_and_its_writer_freed(
    make: Callable[..., Running], tmp_path: Path
) -> None:
    h = make(lambda name: ScriptedModel(["hello", "again"]), idle_close=0.3)
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "hi")
        stream.until("turn_ended")
        time.sleep(0.6)  # watched: stays open however long
        assert sid in h.sessions.open
    deadline = time.monotonic() + 10
    while sid in h.sessions.open:  # nobody watching, nothing in flight: it goes
        assert time.monotonic() < deadline, "the idle session stayed open"
        time.sleep(0.05)
    other = Store(tmp_path / "home", options=StoreOptions(lock_timeout=0))
    with other.open_writer(sid) as writer:
        assert writer.count == 2  # another program can write now
    with h.watch(sid) as (stream, _):  # and the server opens it again when asked
        h.prompt(sid, "more")
        stream.until("turn_ended")


def test_the_bound_socket_takes_connections_before_uvicorn_serves() -> None:
    """`infai serve` prints where it listens right after bind: a client connecting
    at once was refused until uvicorn started (seen in a test of a killed server)."""
    import socket as socket_module

    from infai.shells.server.run import bind

    sock = bind("127.0.0.1", 0)
    try:
        with socket_module.create_connection(sock.getsockname()[:2], timeout=2):
            pass
    finally:
        sock.close()

"""What the server holds and for how long: models, per-session locks, the event loop.

A model built to check a name is closed at once; the per-session lock table
keeps no entry for an id nobody is using; and a slow store call runs in a worker
thread, so another session's requests and stream are answered meanwhile.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from test_server import AUTH, TOKEN, Running, harnesses

from infai.llm import Model, ScriptedModel
from infai.llm.providers import ModelUnavailable
from infai.shells.server import create_app
from infai.shells.server.run import ServerThread
from infai.shells.server.sessions import Sessions
from infai.store import SessionStore, Store


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.fixture
def make(tmp_path: Path, work: Path) -> Iterator[Callable[..., Running]]:
    yield from harnesses(tmp_path / "home", work)


class Proxy:
    """A store that passes every call through, after ``trap(name, args)`` has seen it
    (a trap may wait, or raise as a failing store would)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.trap: Callable[[str, tuple[Any, ...]], None] = lambda name, args: None

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.trap(name, args)
            return attr(*args, **kwargs)

        return call


class Served:
    """An app on a loopback port over ``store``, with an authenticated client."""

    def __init__(self, store: Any, work: Path, **options: Any) -> None:
        self.app = create_app(cast(SessionStore, store), token=TOKEN, working_dir=work, **options)
        self.server = ServerThread(self.app).start()
        self.client = httpx.Client(base_url=self.server.url, headers=AUTH, timeout=10)

    def close(self) -> None:
        self.client.close()
        self.server.stop()


# -- models --------------------------------------------------------------------


def test_every_model_built_is_closed(make: Callable[..., Running]) -> None:
    """Creating a session with a model name builds the model to check the name: that
    model is closed, as are the models of sessions opened and then deleted, and the
    harness's own when the server stops."""
    built: list[str] = []
    closed: list[str] = []

    class Counted(ScriptedModel):
        async def aclose(self) -> None:
            closed.append(self.name)

    def factory(name: str | None) -> Model:
        if name == "nope":
            raise ModelUnavailable("unknown model 'nope'")
        built.append(name or "default")
        return Counted(["hello"], name=name or "default")

    h = make(factory)
    assert built == ["offline"]  # the harness's own model, built once, closed at stop
    sids = [h.new_session(model=f"m{i}") for i in range(5)]
    assert built[1:] == [f"m{i}" for i in range(5)]
    assert sorted(closed) == sorted(built[1:])  # one SDK client per request would leak here
    refused = h.client.post("/v1/sessions", json={"model": "nope"})
    assert refused.status_code == 422 and "unknown model 'nope'" in refused.json()["error"]
    with h.watch(sids[0]) as (stream, _):
        h.prompt(sids[0], "hi")
        stream.until("turn_ended")
    assert h.client.delete(f"/v1/sessions/{sids[0]}").status_code == 204
    assert len(built) == 7 and sorted(closed) == sorted(built[1:])
    h.close()
    assert sorted(closed) == sorted(built)


# -- the per-session lock table ----------------------------------------------------


def test_the_lock_table_keeps_no_entry_nobody_uses(
    make: Callable[..., Running], tmp_path: Path
) -> None:
    h = make()
    for _ in range(20):  # ids that name no session
        missing = str(uuid.uuid4())
        assert (
            h.client.post(f"/v1/sessions/{missing}/prompt", json={"text": "x"}).status_code == 404
        )
        assert h.client.get(f"/v1/sessions/{missing}/stream").status_code == 404
        assert h.client.post(f"/v1/sessions/{missing}/compact").status_code == 404
    broken = h.store.create_session(model="no-such-model").id  # its model cannot be built
    for _ in range(3):
        failed = h.client.post(f"/v1/sessions/{broken}/prompt", json={"text": "x"})
        assert failed.status_code == 409 and "cannot open session" in failed.json()["error"]
    for _ in range(3):  # sessions opened, used and deleted
        sid = h.new_session()
        with h.watch(sid) as (stream, _):
            h.prompt(sid, "hi")
            stream.until("turn_ended")
        assert h.client.delete(f"/v1/sessions/{sid}").status_code == 204
    sessions: Sessions = h.sessions
    assert sessions.open == {}
    assert len(sessions._locks) == 0


# -- the event loop ------------------------------------------------------------------


@pytest.mark.parametrize("slow", ["list_summaries", "open_reader"])
def test_a_slow_store_call_does_not_stall_another_session(
    tmp_path: Path, work: Path, slow: str
) -> None:
    """While one request waits on the store (a slow disk, a slow database), another
    session's requests and its stream are answered as if nothing were waiting."""
    proxy = Proxy(Store(tmp_path / "home"))
    server = Served(proxy, work, model_factory=lambda name: ScriptedModel(["hello"] * 3))
    entered, gate = threading.Event(), threading.Event()
    try:
        stuck_sid = server.client.post("/v1/sessions", json={}).json()["id"]
        other = server.client.post("/v1/sessions", json={}).json()["id"]

        def trap(name: str, args: tuple[Any, ...]) -> None:
            if name == slow and (name == "list_summaries" or args[:1] == (stuck_sid,)):
                entered.set()
                gate.wait(60)  # a store call held until the fast requests are done

        proxy.trap = trap
        path = "/v1/sessions" if slow == "list_summaries" else f"/v1/sessions/{stuck_sid}/events"
        answers: list[int] = []
        waiting = threading.Thread(
            target=lambda: answers.append(server.client.get(path, timeout=60).status_code)
        )
        waiting.start()
        assert entered.wait(30), "the slow call never started"
        # had they waited behind the held call, they would still be waiting (timing
        # out): answered while it is held is the point, however loaded the machine
        with httpx.Client(base_url=server.server.url, headers=AUTH, timeout=20) as fast:
            assert fast.get(f"/v1/sessions/{other}/head").status_code == 200
            with fast.stream("GET", f"/v1/sessions/{other}/stream") as response:
                assert response.status_code == 200
                assert (
                    fast.post(f"/v1/sessions/{other}/prompt", json={"text": "hi"}).status_code
                    == 202
                )
                lines = response.iter_lines()
                assert any("turn_ended" in line for line in lines)
        assert not gate.is_set() and answers == []  # the slow call was still waiting
        gate.set()
        waiting.join(10)
        assert answers == [200]
    finally:
        gate.set()
        server.close()

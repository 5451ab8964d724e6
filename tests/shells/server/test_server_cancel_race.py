"""A prompt sent once ``POST /cancel`` has answered is taken, even when the turn had
just ended by itself and its slot was still being given back.

The race CI once met (a 409 for the prompt right after the cancel): the turn
ends, clears itself, and releases its slot in a worker thread (the lease, and
the writer parked between turns); a cancel arriving then finds no turn to
cancel and answered at once, the slot still taken, so the next prompt got
``Busy``. Here the park is held open until the cancel has shown whether it
waits: answering at once (the old behaviour) leaves the slot taken for the
prompt that follows; waiting lets the park go on and the prompt is taken.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_server import Running, harnesses

from infai.agent import AgentSession, Turn
from infai.llm import ScriptedModel

#: a generous bound for waits on worker threads (a loaded machine is slow)
WAIT = 30.0


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    work = tmp_path / "work"
    work.mkdir()
    yield from harnesses(tmp_path / "home", work)


def hold_the_park_until_cancel_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[threading.Event, threading.Event]:
    """A park after slot work waits for the gate; a cancel that does not finish in
    its first steps (it waits for something) opens it. Returns (parking, gate)."""
    parking, gate = threading.Event(), threading.Event()
    real_park, real_cancel = AgentSession.park, AgentSession.cancel

    def park(agent: AgentSession) -> None:
        if agent.busy is not None:  # a release after slot work, not opening's park
            parking.set()
            assert gate.wait(WAIT), "the test never let the park go on"
        real_park(agent)

    async def cancel(agent: AgentSession, turn_id: str | None = None) -> Turn:
        task = asyncio.ensure_future(real_cancel(agent, turn_id))
        for _ in range(10):  # a cancel that answers at once has answered by now
            await asyncio.sleep(0)
        if not task.done():
            gate.set()
        return await task

    monkeypatch.setattr(AgentSession, "park", park)
    monkeypatch.setattr(AgentSession, "cancel", cancel)
    return parking, gate


def test_a_prompt_after_cancelling_a_turn_that_just_ended_is_taken(
    make: Callable[..., Running], monkeypatch: pytest.MonkeyPatch
) -> None:
    parking, gate = hold_the_park_until_cancel_waits(monkeypatch)
    model = ScriptedModel(["hello", "again"])
    h = make(lambda name: model)
    sid = h.new_session()
    try:
        turn = h.prompt(sid, "hi")
        h.wait(parking.is_set, timeout=WAIT)  # the turn is over, its slot being given back
        cancelled = h.client.post(f"/v1/sessions/{sid}/cancel", json={"turn": turn})
        assert cancelled.status_code == 409, cancelled.text  # it had ended: not in flight
        assert "not in flight" in cancelled.text
        again = h.client.post(
            f"/v1/sessions/{sid}/prompt", json={"text": "go", "stream": True}, timeout=WAIT
        )
        assert again.status_code == 200, again.text  # was 409: busy
        assert "event: turn_ended" in again.text
    finally:
        gate.set()  # no park left waiting
    events = h.client.get(f"/v1/sessions/{sid}/events", params={"all": "true"}).json()
    assert [e["preview"] for e in events["events"]] == ["hi", "hello", "go", "again"]

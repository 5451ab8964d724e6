"""The slot after a turn: over means free, even while it is being given back.

A turn clears :attr:`AgentSession.turn` as it ends, then gives the slot back in
a worker thread (the lease released and, between turns, the writer parked).
During that release the turn is over (there is nothing to cancel) but the slot
is still taken. A cancel that arrives then (the turn ended by itself just as it
was cancelled) returns only once the slot is free, and a new turn started then
waits for the release instead of failing :class:`~infai.agent.Busy`; a close
waits for it too, never closing the writer under the park.

The release is held open deterministically: the park waits for the test to let
it go, and the test lets it go only from the event loop, once the call under
test has had its chance to fail at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession, NotInFlight, Turn
from infai.llm import ScriptedModel
from infai.store import Store, StoreOptions
from infai.tools import AllowAll, Toolbox

#: a generous bound for waits on the worker thread (a loaded machine is slow)
WAIT = 30.0


class HeldPark:
    """Parks that follow a turn (the slot still taken) wait until :attr:`gate` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.parking = threading.Event()
        self.gate = threading.Event()
        real = AgentSession.park

        def park(agent: AgentSession) -> None:
            if agent.busy is not None:  # a release after slot work, not opening's park
                self.parking.set()
                assert self.gate.wait(WAIT), "the test never let the park go on"
            real(agent)

        monkeypatch.setattr(AgentSession, "park", park)

    async def releasing(self, agent: AgentSession, turn: Turn) -> None:
        """Wait until ``turn`` is over and its slot's release is held in its park."""
        assert await asyncio.to_thread(self.parking.wait, WAIT), "the turn never parked"
        assert turn.task is not None and not turn.task.done()
        assert agent.turn is None and agent.busy is not None  # over, the slot still taken

    def let_go_from_the_loop(self) -> None:
        """Let the park go on the next time the event loop runs its callbacks: a call
        that fails at once fails before that; one that waits lets it go on."""
        asyncio.get_running_loop().call_soon(self.gate.set)


def run(held: HeldPark, agent: AgentSession, body: Callable[[], Coroutine[Any, Any, None]]) -> None:
    try:
        asyncio.run(body())
    finally:
        held.gate.set()
        agent.close()


def parked_session(tmp_path: Path, replies: list[str]) -> AgentSession:
    home = tmp_path / "home"
    store = Store(home, options=StoreOptions(lock_timeout=0))
    sid = store.create_session(working_dir=str(tmp_path)).id
    model = ScriptedModel(replies)
    agent = AgentSession(store, sid, model=model, toolbox=Toolbox([]), permissions=AllowAll())
    agent.park_between_turns = True
    agent.park()
    return agent


def test_cancelling_a_turn_that_just_ended_returns_once_its_slot_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails without the fix: the cancel said "not in flight" at once, the slot
    still taken (the next prompt was answered 409 in the server)."""
    agent = parked_session(tmp_path, ["hello", "again"])
    held = HeldPark(monkeypatch)

    async def body() -> None:
        turn = await agent.start("hi")
        await held.releasing(agent, turn)
        held.let_go_from_the_loop()
        with pytest.raises(NotInFlight):
            await agent.cancel(turn.id)  # it ended by itself: nothing to cancel
        assert agent.busy is None
        assert turn.outcome is not None and turn.outcome.outcome == "done"
        again = await agent.start("again")
        assert (await again.wait()).outcome == "done"

    run(held, agent, body)
    assert [e.preview for e in agent.view.path()] == ["hi", "hello", "again", "again"]


def test_a_turn_started_while_the_last_one_gives_its_slot_back_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails without the fix: Busy, though the turn before was over."""
    agent = parked_session(tmp_path, ["hello", "again"])
    held = HeldPark(monkeypatch)

    async def body() -> None:
        turn = await agent.start("hi")
        await held.releasing(agent, turn)
        held.let_go_from_the_loop()
        again = await agent.start("next")
        assert turn.task is not None and turn.task.done()
        assert (await again.wait()).outcome == "done"
        assert agent.busy is None and agent.parked

    run(held, agent, body)
    assert [e.preview for e in agent.view.path()] == ["hi", "hello", "next", "again"]


def test_aclose_while_the_last_turn_gives_its_slot_back_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails without the fix: the close released everything in one thread while
    the park still ran in another (the writer closed under it). The park is let
    go once the close has reached its release, or after a while if it waits."""
    agent = parked_session(tmp_path, ["hello"])
    held = HeldPark(monkeypatch)
    order: list[str] = []
    closing = threading.Event()
    real_release_all = agent._release_all

    def release_all() -> None:
        order.append("close" if held.gate.is_set() else "close during the park")
        closing.set()
        real_release_all()

    monkeypatch.setattr(agent, "_release_all", release_all)

    async def body() -> None:
        turn = await agent.start("hi")
        await held.releasing(agent, turn)
        close = asyncio.ensure_future(agent.aclose())
        await asyncio.to_thread(closing.wait, 1.0)  # a close that does not wait gets there
        held.gate.set()
        await close
        assert turn.task is not None and turn.task.done()

    run(held, agent, body)
    assert order[0] == "close"  # (the test's own close after it does nothing more)

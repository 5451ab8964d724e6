"""The event hub: live fan-out of a session's events to its watchers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession, Saved, Streamed, TurnEnded
from infai.agent.hub import EventHub, Lagged, Subscription
from infai.llm import ScriptedModel
from infai.store import Store
from infai.tools import AllowAll, Toolbox


def test_every_watcher_sees_the_turn_live_and_in_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id
    model = ScriptedModel(["a reply long enough to stream in several deltas"])

    async def scenario(session: AgentSession) -> tuple[list[Any], list[Any], list[Any]]:
        first, second = session.hub.subscribe(), session.hub.subscribe()

        async def watch(sub: Subscription[Any]) -> list[Any]:
            seen: list[Any] = []
            async for event in sub:
                seen.append(event)
                if isinstance(event, TurnEnded):
                    sub.close()
            return seen

        watchers = [asyncio.create_task(watch(s)) for s in (first, second)]
        driven = [e async for e in session.prompt("hi")]
        a, b = await asyncio.gather(*watchers)
        return driven, a, b

    with AgentSession(store, sid, model=model, toolbox=Toolbox(), permissions=AllowAll()) as s:
        driven, a, b = asyncio.run(scenario(s))
        assert s.hub.subscribers == 0
    assert a == b == driven
    assert isinstance(driven[0], Saved) and isinstance(driven[-1], TurnEnded)
    assert sum(isinstance(e, Streamed) for e in driven) > 2


def test_a_late_subscriber_sees_only_what_follows_and_a_slow_one_is_dropped() -> None:
    async def scenario() -> None:
        hub = EventHub(limit=3)
        early = hub.subscribe()
        hub.publish(TurnEnded("done"))
        late = hub.subscribe()
        for _ in range(3):
            hub.publish(TurnEnded("error", "x"))
        # early now holds 4 > 3: dropped; late holds 3: fine.
        assert hub.subscribers == 1
        received = []
        with pytest.raises(Lagged):
            async for event in early:
                received.append(event)
        assert received == [TurnEnded("done"), TurnEnded("error", "x"), TurnEnded("error", "x")]
        late.close()
        assert [e async for e in late] == [TurnEnded("error", "x")] * 3  # nothing lost on close

    asyncio.run(scenario())

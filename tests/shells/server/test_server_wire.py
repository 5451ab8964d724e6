"""The one JSON form: what the server sends as SSE data is the agent's event_to_obj.

A turn's agent events (read from the session's own hub) and the frames the
server fans out for that turn are compared one by one, through the bytes a
watcher receives: a settled event's data is ``event_to_obj(...)["event"]`` (a
blob's record left out on the stream), a delta's and a turn end's are
``event_to_obj(..., turn=id)`` without its ``type``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from infai.agent import (
    AgentEvent,
    Config,
    Harness,
    Saved,
    Streamed,
    TurnEnded,
    event_to_obj,
)
from infai.llm import Message, Model, ScriptedModel, ToolCall
from infai.shells.server.channel import Frame
from infai.shells.server.sessions import Sessions
from infai.store import Store


class Scripted(Harness):
    def build_model(self, name: str) -> Model:
        call = ToolCall("c1", "list_files", {"path": "."})
        return ScriptedModel([Message(role="assistant", tool_calls=(call,)), "all listed"])


def parsed(item: Frame) -> tuple[str, str | None, Any]:
    """A frame as a watcher reads it off the wire: event name, SSE id, JSON data."""
    name, event_id, data = "", None, None
    for line in item.raw.decode().splitlines():
        field, _, value = line.partition(": ")
        if field == "event":
            name = value
        elif field == "id":
            event_id = value
        elif field == "data":
            data = json.loads(value)
    return name, event_id, data


def test_the_sse_data_of_a_turn_is_event_to_obj_of_its_agent_events(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("hello\n")

    async def scenario() -> tuple[str, list[AgentEvent], list[Frame]]:
        space = Scripted(Store(tmp_path / "home"), work, config=Config())
        sessions = Sessions(space)
        try:
            served = await sessions.serve(space.new_session())
            agent_events = served.agent.hub.subscribe()
            feed, _, _ = served.watch()
            turn = await served.start("list them")
            events: list[AgentEvent] = []
            async for event in agent_events:
                events.append(event)
                if isinstance(event, TurnEnded):
                    break
            frames: list[Frame] = []
            async for item in feed:
                frames.append(item)
                if item.name == "turn_ended":
                    break
            return turn.id, events, frames
        finally:
            await sessions.aclose()
            await space.aclose()

    turn, events, frames = asyncio.run(scenario())
    assert frames[0].name == "turn_started"
    wire = [parsed(item) for item in frames[1:]]
    assert len(wire) == len(events)
    kinds = {type(e) for e in events}
    assert kinds == {Saved, Streamed, TurnEnded}  # every kind of agent event was compared
    saved = [e.event.kind for e in events if isinstance(e, Saved)]
    assert "tool_call" in saved and "tool_result" in saved
    for event, (name, event_id, data) in zip(events, wire, strict=True):
        if isinstance(event, Saved):
            assert (name, event_id) == ("settled", event.event.id)
            assert data == event_to_obj(event, inline_blobs=False)["event"]
        else:
            expected = event_to_obj(event, turn=turn)
            assert name == {Streamed: "delta", TurnEnded: "turn_ended"}[type(event)]
            assert expected.pop("type") in ("stream", "end")
            assert data == expected

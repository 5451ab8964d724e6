"""A turn its process never finished is recorded as interrupted by the next one, once.

The session is left as a killed turn leaves it (its prompt, or its tool call,
with nothing after: ``tests/durability/test_killed_turn.py`` kills real
processes); an :class:`AgentSession` opened on it records the interruption
marker (at open where the writer's lock excludes everyone else, else when the
lease is taken), and the next request says so to the model: never two user
messages in a row.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession
from infai.agent.context import INTERRUPTED, INTERRUPTED_NOTE
from infai.agent.loop import INTERRUPTED_TURN, TURN_PROMPT, prompt_record
from infai.llm import Message, Request, ScriptedModel
from infai.store import (
    MessageRecord,
    SessionStore,
    SnapshotRecord,
    Store,
    ToolCallRecord,
)
from infai.store.pg import PgStore
from infai.tools import AllowAll, Toolbox


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home")


@pytest.fixture
def pg_store(pg_url: str, tmp_path: Path) -> Iterator[PgStore]:
    with PgStore(pg_url, home=tmp_path / "pghome") as opened:
        yield opened


def agent(store: SessionStore, sid: str, model: ScriptedModel) -> AgentSession:
    return AgentSession(store, sid, model=model, toolbox=Toolbox(), permissions=AllowAll())


def killed_in_generation(store: SessionStore) -> str:
    """A session as a turn killed while its reply streamed leaves it."""
    sid = store.create_session().id
    with store.open_writer(sid) as writer:
        writer.append(prompt_record("please do it"), "user")
    return sid


def markers(store: SessionStore, sid: str) -> list[MessageRecord]:
    found = []
    with store.open_reader(sid) as reader:
        for entry in reader.entries():
            record = reader.event(entry.id, resolve=True).record
            if isinstance(record, MessageRecord) and record.metadata.get("interrupted") is True:
                found.append(record)
    return found


def run(session: AgentSession, text: str) -> None:
    async def turn() -> None:
        async for _ in session.prompt(text):
            pass

    asyncio.run(turn())


def sent(request: Request) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in request.messages]


def no_two_users_in_a_row(messages: tuple[Message, ...]) -> bool:
    roles = [m.role for m in messages]
    return all(not (a == b == "user") for a, b in itertools.pairwise(roles))


def test_opening_records_a_killed_turn_once_and_the_model_is_told(store: Store) -> None:
    sid = killed_in_generation(store)
    model = ScriptedModel(["done now"])
    with agent(store, sid, model) as session:  # the writer's lock: recorded at open
        [marker] = markers(store, sid)
        assert marker.content == INTERRUPTED_TURN
        assert marker.metadata == {"interrupted": True, "unfinished": True}
        assert session.view.path()[-1].preview == INTERRUPTED_TURN
    with agent(store, sid, model) as session:  # a reopen finds it recorded
        assert len(markers(store, sid)) == 1
        run(session, "go on")
    assert len(markers(store, sid)) == 1
    [request] = model.requests
    assert no_two_users_in_a_row(request.messages)
    assert sent(request) == [("user", f"please do it\n\n{INTERRUPTED_NOTE}\n\ngo on")]


def test_a_tool_call_with_no_result_is_recorded_past_its_snapshot(store: Store) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as writer:
        writer.append(prompt_record("list it"), "user")
        writer.append_batch(
            [
                (MessageRecord(content="looking"), "assistant"),
                (ToolCallRecord(call_id="c1", name="bash", arguments={"x": 1}), "assistant"),
            ]
        )
        writer.append(SnapshotRecord(tree="sha256:" + "0" * 64, reason="after bash"), "system")
    model = ScriptedModel(["ok"])
    with agent(store, sid, model) as session:
        run(session, "again")
    assert len(markers(store, sid)) == 1
    [request] = model.requests
    assert no_two_users_in_a_row(request.messages)
    assert [m.role for m in request.messages] == ["user", "assistant", "tool", "user"]
    assert request.messages[2].content == INTERRUPTED
    assert request.messages[3].content == f"{INTERRUPTED_NOTE}\n\nagain"


CANCELLED = MessageRecord(content=INTERRUPTED_TURN, metadata={"interrupted": True})


@pytest.mark.parametrize(
    "tail",
    [
        [(MessageRecord(content="a note appended by hand"), "user")],  # no turn was started
        [(prompt_record("asked"), "user"), (MessageRecord(content="answered"), "assistant")],
        [(prompt_record("asked"), "user"), (CANCELLED, "user")],  # recorded already
    ],
    ids=["appended", "answered", "cancelled"],
)
def test_a_finished_turn_or_a_message_no_turn_answers_is_left_alone(
    store: Store, tail: list[tuple[Any, str]]
) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as writer:
        for record, role in tail:
            writer.append(record, role)
        before = writer.count
    with agent(store, sid, ScriptedModel([])), store.open_reader(sid) as reader:
        assert reader.count == before


def test_a_turn_prompt_is_marked_as_one(store: Store) -> None:
    sid = store.create_session().id
    with agent(store, sid, ScriptedModel(["hi"])) as session:
        run(session, "hello")
        first = session.view.path()[0]
        record = session.view.event(first.id, resolve=True).record
    assert isinstance(record, MessageRecord) and record.metadata == {TURN_PROMPT: True}


def test_a_shared_store_records_it_under_the_lease_once(pg_store: PgStore) -> None:
    """Writers do not exclude each other here: a live turn elsewhere holds the lease,
    and nothing is recorded while it does; the first turn to take it records it."""
    sid = killed_in_generation(pg_store)
    live = pg_store.lease(sid)  # "another process is running that turn"
    first, second = ScriptedModel(["one"]), ScriptedModel(["two"])
    with agent(pg_store, sid, first) as one, agent(pg_store, sid, second) as two:
        assert markers(pg_store, sid) == []  # opening alone never records it here
        live.release()  # that process died: its lease went with it
        run(one, "go on")
        run(two, "and more")
    assert len(markers(pg_store, sid)) == 1
    assert sent(first.requests[0]) == [("user", f"please do it\n\n{INTERRUPTED_NOTE}\n\ngo on")]
    assert no_two_users_in_a_row(second.requests[0].messages)
    assert [m.role for m in second.requests[0].messages] == ["user", "assistant", "user"]

"""A prompt is stored before anything else, and a shell can wait for exactly that.

A cancel that comes while the prompt's append is in its worker thread waits for
it (the writer is never used by two threads), then marks the turn interrupted:
the prompt is never left stored with no marker, and every watcher hears of it.
:meth:`Turn.asked` is what the server's 202 waits for: the stored prompt's
event, or what kept it from being stored.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession, Saved, TurnEnded, run_turn
from infai.agent.loop import INTERRUPTED_TURN
from infai.llm import ScriptedModel
from infai.store import Event, MessageRecord, SessionWriter, Store, StoreError
from infai.tools import AllowAll, Toolbox, ToolContext

#: a generous bound for waits on worker threads (a loaded machine is slow)
WAIT = 30.0


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home")


def is_prompt(record: Any, role: str) -> bool:
    """A user message that is not the interruption marker."""
    marker = isinstance(record, MessageRecord) and record.metadata.get("interrupted")
    return role == "user" and not marker


def test_a_cancel_while_the_prompt_is_stored_keeps_it_and_marks_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, gate = threading.Event(), threading.Event()
    real = SessionWriter.append

    def append(self: SessionWriter, record: Any, role: str, **kw: Any) -> Event:
        if is_prompt(record, role):
            entered.set()
            assert gate.wait(WAIT), "the test never let the append go on"
        return real(self, record, role, **kw)

    monkeypatch.setattr(SessionWriter, "append", append)
    sid = store.create_session().id
    saved: list[Event] = []

    async def scenario(writer: SessionWriter) -> None:
        turn = run_turn(
            writer, ScriptedModel(["never asked"]), "keep me", toolbox=Toolbox(),
            permissions=AllowAll(), context=ToolContext(Path("."), sid),
        )  # fmt: skip

        async def drive() -> None:
            async for item in turn:
                if isinstance(item, Saved):
                    saved.append(item.event)

        task = asyncio.create_task(drive())
        assert await asyncio.to_thread(entered.wait, WAIT), "the prompt was never appended"
        task.cancel()  # while the append is in its thread
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    with store.open_writer(sid) as writer:
        asyncio.run(scenario(writer))
        events = writer.context().events
    contents = [getattr(e.record, "content", None) for e in events]
    assert contents == ["keep me", INTERRUPTED_TURN]
    assert [e.id for e in saved] == [e.id for e in events]  # both yielded, once each


def test_asked_is_the_stored_prompt_or_what_kept_it_from_being_stored(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = store.create_session().id

    async def scenario(session: AgentSession) -> tuple[Event, str, Exception]:
        turn = await session.start("first")
        asked = await turn.asked()
        await turn.wait()
        real = SessionWriter.append

        def failing(self: SessionWriter, record: Any, role: str, **kw: Any) -> Event:
            if is_prompt(record, role):
                raise StoreError("the disk is gone")
            return real(self, record, role, **kw)

        monkeypatch.setattr(SessionWriter, "append", failing)
        second = await session.start("second")
        with pytest.raises(StoreError) as failed:
            await second.asked()
        return asked, session.view.path()[0].id, failed.value

    model = ScriptedModel(["one"])
    with AgentSession(
        store, sid, model=model, toolbox=Toolbox(), permissions=AllowAll()
    ) as session:
        asked, first_id, failure = asyncio.run(scenario(session))
    assert isinstance(asked.record, MessageRecord) and asked.record.content == "first"
    assert asked.id == first_id
    assert "the disk is gone" in str(failure)


def test_a_cancel_right_after_start_frees_the_slot_and_stores_nothing(store: Store) -> None:
    """Cancelled before it ever ran, a turn's task would skip its whole body, the
    slot's release included: the session would answer Busy for good."""
    sid = store.create_session().id

    async def scenario(session: AgentSession) -> str:
        turn = await session.start("never mind")
        await session.cancel(turn.id)
        assert await turn.wait() == TurnEnded("cancelled")
        again = await session.start("this one")  # was Busy: the slot never freed
        await again.wait()
        return (await again.asked()).id

    with AgentSession(
        store, sid, model=ScriptedModel(["ok"]), toolbox=Toolbox(), permissions=AllowAll()
    ) as session:
        asked = asyncio.run(scenario(session))
        contents = [e.preview for e in session.view.path()]
        assert session.view.path()[0].id == asked
    assert contents == ["this one", "ok"]  # nothing of the cancelled one: no prompt, no marker

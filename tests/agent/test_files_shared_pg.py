"""Files on the timeline in a shared (PostgreSQL) store (issue 14): another
process's append before a turn-start snapshot is said, not swallowed; another
open session in the same directory makes a restore ask, as with the directory
store's lock files. A real PostgreSQL server, real directories."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession, Streamed, WorkFiles
from infai.llm import Notice, ScriptedModel
from infai.store import MessageRecord, SnapshotRecord
from infai.store.pg import PgStore
from infai.tools import AllowAll, Toolbox


@pytest.fixture
def store(pg_url: str, tmp_path: Path) -> Iterator[PgStore]:
    with PgStore(pg_url, home=tmp_path / "home") as opened:
        yield opened


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    return root


def agent(store: PgStore, work: Path, replies: list[Any], sid: str | None = None) -> AgentSession:
    sid = sid or store.create_session(working_dir=str(work)).id
    return AgentSession(
        store,
        sid,
        model=ScriptedModel(replies),
        toolbox=Toolbox(),
        permissions=AllowAll(),
        files=WorkFiles(store, work),
    )


def test_a_turn_start_snapshot_that_meets_another_writer_says_so(
    store: PgStore, work: Path
) -> None:
    session = agent(store, work, ["ok", "ok"])
    other = store.open_writer(session.session_id)
    files = session.files
    assert files is not None
    take = files.snapshot_record

    def meanwhile(view: Any, at: str | None, reason: str) -> Any:
        # another process appends after the lease was taken, before the snapshot is
        other.refresh()
        other.append(MessageRecord(content="from elsewhere"), "user")
        return take(view, at, reason)

    async def turn() -> list[Any]:
        return [event async for event in session.prompt("hello")]

    with session:
        files.snapshot_record = meanwhile  # type: ignore[method-assign]
        seen = asyncio.run(turn())
        notices = [
            e.event.message for e in seen if isinstance(e, Streamed) and isinstance(e.event, Notice)
        ]
        assert len(notices) == 1 and "turn-start snapshot was not recorded" in notices[0]
        kinds = [e.kind for e in session.view.path()]
        assert "snapshot" not in kinds  # nothing recorded over the other's append
        assert session.view.path()[0].kind == "message"  # theirs, then the turn on it
        # the next turn records the files
        files.snapshot_record = take  # type: ignore[method-assign]
        asyncio.run(turn())
        last = [session.view.event(e.id, resolve=True) for e in session.view.path()]
        assert any(isinstance(e.record, SnapshotRecord) for e in last)

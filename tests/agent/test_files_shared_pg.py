"""Files on the timeline in a shared (PostgreSQL) store (issue 14): another
process's append before a turn-start snapshot is said, not swallowed; another
open session in the same directory makes a restore ask, as with the directory
store's lock files. A real PostgreSQL server, real directories."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession, OnRestore, RestoreRefused, SessionCheckpoints, Streamed
from infai.checkpoints.session import other_writers
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
        files=SessionCheckpoints(store, work),
    )


def test_a_turn_start_snapshot_that_meets_another_writer_says_so(
    store: PgStore, work: Path
) -> None:
    session = agent(store, work, ["ok", "ok"])
    other = store.open_writer(session.session_id)
    files = session.files
    assert files is not None
    take = files.snapshot_record

    def meanwhile(view: Any, at: str | None, reason: str, progress: Any = None) -> Any:
        # another process appends after the lease was taken, before the snapshot is
        other.refresh()
        other.append(MessageRecord(content="from elsewhere"), "user")
        return take(view, at, reason, progress)

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


def two_turns(session: AgentSession, work: Path) -> str:
    """Two turns with the user's edit between; the first turn's end."""

    async def turn(text: str) -> None:
        async for _ in session.prompt(text):
            pass

    asyncio.run(turn("one"))
    first = session.view.head
    (work / "a.txt").write_text("two\n")
    asyncio.run(turn("two"))
    assert first is not None
    return first


def test_a_restore_asks_about_another_open_session_in_the_directory(
    store: PgStore, work: Path, tmp_path: Path
) -> None:
    session = agent(store, work, ["ok", "ok"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with session:
        first = two_turns(session, work)
        unrelated = agent(store, elsewhere, [])  # open, but in another directory
        other = agent(store, work, [])
        try:
            with pytest.raises(RestoreRefused) as refused:
                asyncio.run(session.checkout(first))
            assert refused.value.others == [other.session_id]
            assert (work / "a.txt").read_text() == "two\n"  # nothing changed
            # a session's own mark never counts; the other's is seen from any process
            assert store.marked_open([session.session_id, other.session_id]) == [
                session.session_id,
                other.session_id,
            ]
        finally:
            other.close()
            unrelated.close()
        assert store.marked_open([other.session_id]) == []  # closing released it
        with pytest.raises(RestoreRefused) as again:  # only a.txt, edited by hand, is asked
            asyncio.run(session.checkout(first))
        assert again.value.others == [] and again.value.conflicts == ["a.txt"]
        done = asyncio.run(session.checkout(first, OnRestore(force=True)))
        assert (work / "a.txt").read_text() == "one\n"
        assert done.notices == ["restored 1 file: a.txt (+1 -1)"]
        assert other_writers(store, session.session_id, str(work)) == []


CHILD = """
import sys, time
from infai.store.pg import PgStore
store = PgStore(sys.argv[1], home=sys.argv[2])
mark = store.open_mark(sys.argv[3])
print("held", flush=True)
time.sleep(600)
"""


def test_a_killed_process_open_mark_goes_with_it(
    store: PgStore, work: Path, tmp_path: Path, pg_url: str
) -> None:
    sid = store.create_session(working_dir=str(work)).id
    mine = store.create_session(working_dir=str(work)).id
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, pg_url, str(tmp_path / "home"), sid],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        assert other_writers(store, mine, str(work)) == [sid]
        with store.open_writer(sid):  # a bare writer marks nothing: the child's mark is seen
            assert store.marked_open([sid]) == [sid]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    deadline = time.monotonic() + 60  # the server notices the dropped connection
    while store.marked_open([sid]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.marked_open([sid]) == []


def test_force_restores_beside_another_open_session_and_says_so(store: PgStore, work: Path) -> None:
    session = agent(store, work, ["ok", "ok"])
    with session:
        first = two_turns(session, work)
        other = agent(store, work, [])
        try:
            done = asyncio.run(session.checkout(first, OnRestore(force=True)))
        finally:
            other.close()
    assert (work / "a.txt").read_text() == "one\n"
    assert any(other.session_id in notice for notice in done.notices)


def test_a_parked_session_is_not_open_and_its_next_turn_marks_it_again(
    store: PgStore, work: Path
) -> None:
    """Between turns a parked session (the server's, its writer released) writes
    nothing here: its mark goes, as the directory store's writer lock does, and
    comes back with the next turn."""
    session = agent(store, work, ["ok"])
    mine = store.create_session(working_dir=str(work)).id
    sid = session.session_id
    with session:
        assert other_writers(store, mine, str(work)) == [sid]
        session.park()
        assert session.parked and other_writers(store, mine, str(work)) == []

        async def turn() -> list[str]:
            seen = []
            async for _ in session.prompt("hello"):
                seen.append(store.marked_open([sid]))  # during the turn
            return [s for marks in seen for s in marks]

        assert sid in asyncio.run(turn())
        assert not session.parked and store.marked_open([sid]) == [sid]
    assert store.marked_open([sid]) == []

"""The work in flight that server nodes share (migration 4, ``infai.store.pg.live``).

An old database migrates with its sessions intact; a question's first answer
wins whichever node records it; a turn whose node's lock is gone is found lost
and ended on its node's behalf (once); live frames are notified as ids in
payloads that fit ``NOTIFY``'s limit, however large the frames.
"""

from __future__ import annotations

import json
import time

import psycopg
import pytest

from infai.store import MessageRecord
from infai.store.pg import PgStore, schema
from infai.store.pg.live import LIVE_CHANNEL


def test_a_database_at_schema_3_migrates_to_4_with_its_sessions(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:3])
    monkeypatch.setattr(schema, "LATEST", 3)
    with PgStore(pg_url) as old:
        sid = old.create_session(name="kept").id
        with old.open_writer(sid) as writer:
            first = writer.append(MessageRecord(content="from before"), "user")
    monkeypatch.undo()
    with PgStore(pg_url) as store:
        assert store.migrated == ["4: turns, live frames and questions of every node"]
        with store.open_reader(sid) as reader:
            assert reader.head == first.id and reader.count == 1
        store.live.ask(sid, None, {"id": "0" * 8 + "-0000-4000-8000-" + "0" * 12, "tool": "t"})
        assert len(store.live.pending(sid)) == 1
        store.remove_session(sid)  # its rows go with it
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT count(*) FROM infai_questions").fetchone() == (0,)


def test_the_first_answer_recorded_wins_whichever_node_records_it(pg_url: str) -> None:
    with PgStore(pg_url) as a, PgStore(pg_url) as b, PgStore(pg_url) as c:
        sid = a.create_session().id
        qid = "11111111-1111-4111-8111-111111111111"
        a.live.ask(sid, None, {"id": qid, "tool": "bash"})
        assert [q["id"] for q in c.live.pending(sid)] == [qid]
        assert b.live.answer(sid, qid, {"answer": "allow", "by": "api"}) == a.live.node
        assert c.live.answer(sid, qid, {"answer": "deny", "by": "api"}) is None
        assert a.live.answer_of(qid) == {"answer": "allow", "by": "api"}
        assert c.live.pending(sid) == []


def test_a_turn_whose_node_is_gone_is_lost_and_ended_once(pg_url: str) -> None:
    with PgStore(pg_url) as a, PgStore(pg_url) as b:
        sid = a.create_session().id
        turn = "22222222-2222-4222-8222-222222222222"
        a.live.start()
        a.live.publish(sid, turn, [("turn_started", {"turn": turn})])
        assert b.live.lost_turns() == []  # A is alive: its lock is held
        assert b.live.running(sid) is not None
        a.live.close()  # as a killed process: the node lock goes with its connection
        # The server frees a closed connection's locks when its backend has seen
        # the socket close: soon, but not before close() returns.
        deadline = time.monotonic() + 5.0
        while not b.live.lost_turns() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert b.live.lost_turns() == [(sid, turn)]
        assert b.live.end_lost(sid) == 1
        assert b.live.end_lost(sid) == 0 and b.live.lost_turns() == []
        assert b.live.turn_ended(turn) == (True, "lost")
        assert b.live.running(sid) is None


def test_frames_are_notified_by_id_in_payloads_that_fit(pg_url: str) -> None:
    with PgStore(pg_url) as a, psycopg.connect(pg_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {LIVE_CHANNEL}")
        sid = a.create_session().id
        turn = "33333333-3333-4333-8333-333333333333"
        frames = [("turn_started", {"turn": turn})]
        frames += [("delta", {"turn": turn, "text": f"{n}:" + "x" * 9000}) for n in range(450)]
        a.live.publish(sid, turn, frames)
        ids: list[int] = []
        # a bound to wait for, not a measure: it ends as the third arrives
        for note in listener.notifies(timeout=30.0, stop_after=3):
            assert len(note.payload.encode()) < 8000
            ids += json.loads(note.payload)["ids"]
        rows = a.live.fetch(ids)
        assert [r.name for r in rows] == [n for n, _ in frames]
        assert [r.data for r in rows[1:]] == [d for _, d in frames[1:]]
        a.live.close()

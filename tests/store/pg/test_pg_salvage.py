"""Salvage over PostgreSQL: a record damaged in the database costs that event only;
the events after it are kept under a gap naming it, and the copy is format 3."""

from __future__ import annotations

import psycopg

from infai.store import GapRecord, MessageRecord, salvage_session
from infai.store.pg import PgStore


def test_a_damaged_record_loses_only_its_event(pg_url: str) -> None:
    with PgStore(pg_url) as store:
        sid = store.create_session(name="six").id
        with store.open_writer(sid) as w:
            ids = [w.append(MessageRecord(content=f"event {i}"), "user").id for i in range(6)]
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE infai_events SET record = replace(record, '{', '[')"
                " WHERE session_id = %s AND seq = 2",
                (sid,),
            )
        report = salvage_session(store, sid)
        assert report.kept == 5 and [e for e, _ in report.lost] == [ids[2]]
        [(gap, lost)] = report.gaps
        assert lost == [ids[2]] and report.target is not None
        with store.open_reader(report.target) as reader:
            path = [e.id for e in reader.path(to_boundary=False)]
            assert path == [ids[0], ids[1], gap, *ids[3:]]
            record = reader.event(gap, resolve=True).record
        assert isinstance(record, GapRecord) and record.lost == [ids[2]]
        assert store.info(report.target).format == 3
        assert store.fsck(report.target).ok

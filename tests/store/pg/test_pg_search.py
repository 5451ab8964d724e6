"""PostgreSQL's search index: a database migrated from schema 1 is indexed by its first
search, blobs are indexed once per digest, and the derived rows go with their events."""

from __future__ import annotations

import json

import psycopg

from infai.store import NIL_ID, MessageRecord, StoreOptions, ToolResultRecord
from infai.store.pg import PgStore
from infai.store.pg.schema import MIGRATIONS


def count(url: str, table: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else -1


def test_a_database_from_schema_1_is_migrated_and_its_events_found(pg_url: str) -> None:
    sid, eid = "0190a000-0000-7000-8000-0000000000aa", "0190a000-0000-7000-8000-0000000000bb"
    info = {"id": sid, "format": 1, "created_at": "2026-01-01T00:00:00Z"}
    info["updated_at"] = info["created_at"]
    with psycopg.connect(pg_url, autocommit=True) as conn:  # what an infai of schema 1 left
        conn.execute(
            "CREATE TABLE infai_schema (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        version, name, sql = MIGRATIONS[0]
        conn.execute(sql)
        conn.execute("INSERT INTO infai_schema (version, name) VALUES (%s, %s)", (version, name))
        conn.execute(
            "INSERT INTO infai_sessions (id, info, updated_at, head, head_seq, count)"
            " VALUES (%s, %s, %s, %s, 0, 1)",
            (sid, json.dumps(info), info["updated_at"], eid),
        )
        conn.execute(
            "INSERT INTO infai_events (session_id, seq, id, parent_id, parent_seq, kind, role,"
            " ts, preview, record) VALUES (%s, 0, %s, %s, -1, 'message', 'user', %s, %s, %s)",
            (sid, eid, NIL_ID, info["created_at"], "a capybara", '{"content":"a capybara"}'),
        )
    with PgStore(pg_url) as store:
        assert store.migrated == [
            "2: search index",
            "3: content-addressed objects",
            "4: turns, live frames and questions of every node",
        ]
        hits = store.search("capybara")
        assert [(h.session_id, h.event_id, h.on_head_path) for h in hits] == [(sid, eid, True)]
        assert count(pg_url, "infai_search") == 1


def test_blobs_are_indexed_once_and_leave_with_their_events(pg_url: str) -> None:
    big = ToolResultRecord(call_id="c", name="cat", content="a tardigrade " + "y" * 4000)
    with PgStore(pg_url, StoreOptions(blob_threshold=512)) as store:
        sids = [store.create_session().id for _ in range(2)]
        for sid in sids:
            with store.open_writer(sid) as w:
                w.append(big, "tool")
                w.append(MessageRecord(content="tardigrade talk"), "user")
        assert len(store.search("tardigrade")) == 4
        assert count(pg_url, "infai_search_blobs") == 1  # one digest, indexed once
        assert count(pg_url, "infai_search") == 2  # the inline messages
        store.remove_session(sids[0])
        assert {h.session_id for h in store.search("tardigrade")} == {sids[1]}
        assert count(pg_url, "infai_search") == 1
        store.remove_session(sids[1])
        assert store.search("tardigrade") == []
        assert count(pg_url, "infai_search_blobs") == 0  # gone with the blob
        assert count(pg_url, "infai_search_state") == 0


def test_a_damaged_record_leaves_every_other_hit_and_names_its_session(pg_url: str) -> None:
    big = ToolResultRecord(call_id="c", name="cat", content="a quokka " + "y" * 4000)
    with PgStore(pg_url, StoreOptions(blob_threshold=512)) as store:
        bad, good, blobbed = (store.create_session().id for _ in range(3))
        for sid in (bad, good):
            with store.open_writer(sid) as w:
                for i in range(6):
                    w.append(MessageRecord(content=f"quokka {i}"), "user")
        with store.open_writer(blobbed) as w:
            w.append(big, "tool")
            w.append(MessageRecord(content="quokka talk"), "user")
        with psycopg.connect(pg_url, autocommit=True) as conn:  # one byte changed in each
            conn.execute(
                "UPDATE infai_events SET record = replace(record, '{', '[')"
                " WHERE session_id = %s AND seq = 2",
                (bad,),
            )
            conn.execute("UPDATE infai_blobs SET data = overlay(data PLACING 'z'::bytea FROM 20)")
        hits = store.search("quokka", limit=50)
        assert len([h for h in hits if h.session_id == good]) == 6
        assert sorted(h.seq for h in hits if h.session_id == bad) == [0, 1, 3, 4, 5]
        assert [h.seq for h in hits if h.session_id == blobbed] == [1]
        named = {d.session_id: d for d in hits.damaged}
        assert set(named) == {bad, blobbed} and named[bad].events == 1
        assert "event #2" in named[bad].problem and "blob" in named[blobbed].problem
        assert store.search("quokka", session=good).damaged == []
        again = store.rebuild_search_index()
        assert {d.session_id for d in again} == {bad, blobbed}
        assert len(store.search("quokka", limit=50)) == 12

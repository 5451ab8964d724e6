"""What only the PostgreSQL backend promises: migrations, HEAD compare-and-set,
idempotent retries, pooled connections that survive a drop, and notifications."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from infai.store import (
    NIL_ID,
    MessageRecord,
    SessionBusy,
    Store,
    StoreOptions,
    UnsupportedFormat,
    open_store,
)
from infai.store.errors import BackendUnavailable, HeadConflict
from infai.store.pg import CHANNEL, PgSessionWriter, PgStore
from infai.store.pg.schema import LATEST, migrate


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


def test_migrations_are_recorded_and_applied_once(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert migrate(conn) == [
            "1: sessions, events, blobs",
            "2: search index",
            "3: content-addressed objects",
            "4: turns, live frames and questions of every node",
        ]
        assert migrate(conn) == []
        versions = conn.execute("SELECT version FROM infai_schema ORDER BY version").fetchall()
    assert versions == [(1,), (2,), (3,), (4,)] and LATEST == 4


def test_a_database_from_a_newer_infai_is_refused(pg_url: str) -> None:
    PgStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO infai_schema (version, name) VALUES (99, 'future')")
    with pytest.raises(UnsupportedFormat, match="upgrade infai"):
        PgStore(pg_url)


def test_without_auto_migrate_an_old_schema_says_what_to_run(pg_url: str) -> None:
    with pytest.raises(UnsupportedFormat, match="infai store migrate"):
        PgStore(pg_url, auto_migrate=False)


def test_an_unreachable_server_is_a_clear_error(pg_cluster: str) -> None:
    url = pg_cluster.rsplit(":", 1)[0] + ":1/postgres"  # nothing listens on port 1
    with pytest.raises(BackendUnavailable, match=r"cannot reach postgresql://127\.0\.0\.1:1/"):
        PgStore(url, pool_size=1)


def test_two_writers_never_fork_head_the_loser_retries(pg_url: str) -> None:
    with PgStore(pg_url) as store:
        sid = store.create_session().id
        one, two = store.open_writer(sid), store.open_writer(sid)
        first = one.append(msg("from one"), "user")
        with pytest.raises(HeadConflict, match="another writer appended first"):
            two.append(msg("from two"), "user")
        assert two.head == first.id  # reloaded: deciding again is now possible
        second = two.append(msg("from two, again"), "user")
        assert second.parent_id == first.id and second.branch_from is None
        with store.open_reader(sid) as reader:
            assert [e.record.content for e in reader.context().events] == [  # type: ignore[union-attr]
                "from one",
                "from two, again",
            ]
            assert len(reader.leaves()) == 1


def test_many_writers_at_once_make_one_chain(pg_url: str) -> None:
    with PgStore(pg_url, pool_size=8) as store:
        sid = store.create_session().id
        errors: list[BaseException] = []

        def work(name: str) -> None:
            writer = store.open_writer(sid)
            try:
                for i in range(15):
                    while True:
                        try:
                            writer.append(msg(f"{name}-{i}"), "user")
                            break
                        except HeadConflict:
                            continue
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(f"w{n}",)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        with store.open_reader(sid) as reader:
            entries = list(reader.entries())
            assert len(entries) == 60 and len(reader.leaves()) == 1
            assert all(e.parent_seq == e.seq - 1 for e in entries)  # no fork anywhere
        assert store.fsck(sid).ok


def test_a_lost_commit_answer_is_retried_without_duplicating(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PgStore(pg_url) as store:
        sid = store.create_session().id
        writer = store.open_writer(sid)
        real = PgSessionWriter._transaction
        calls = {"n": 0}

        def flaky(self: PgSessionWriter, *args: Any) -> Any:
            calls["n"] += 1
            result = real(self, *args)  # committed...
            if calls["n"] == 1:
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return result  # ...but the first answer never arrived

        monkeypatch.setattr(PgSessionWriter, "_transaction", flaky)
        big = msg("b" * 40_000)  # over the blob threshold: stored as a blob
        events = writer.append_batch([(msg("a"), "user"), (big, "assistant")])
        assert calls["n"] == 2 and [e.seq for e in events] == [0, 1]
        # the retry answers with the records, as a first try does (the agent keeps them)
        assert events[1].digest is not None and events[1].record == big
        assert events[0].record == msg("a")
        assert writer.count == 2 and writer.head == events[1].id
        monkeypatch.setattr(PgSessionWriter, "_transaction", real)
        with store.open_reader(sid) as reader:
            assert reader.count == 2


def test_dropped_connections_are_replaced(pg_url: str) -> None:
    with PgStore(pg_url, pool_size=2) as store:
        sid = store.create_session().id
        writer = store.open_writer(sid)
        writer.append(msg("before"), "user")
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        after = writer.append(msg("after"), "user")
        assert after.seq == 1
        with store.open_reader(sid) as reader:
            assert [e.record.content for e in reader.context().events] == ["before", "after"]  # type: ignore[union-attr]


def test_each_append_notifies_listeners(pg_url: str) -> None:
    with PgStore(pg_url) as store, psycopg.connect(pg_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        sid = store.create_session().id
        event = store.open_writer(sid).append(msg("hello"), "user")
        notes = list(listener.notifies(timeout=5, stop_after=1))
    assert json.loads(notes[0].payload) == {"session": sid, "seq": 0, "id": event.id}


def test_blobs_are_shared_by_content_and_removed_when_unused(pg_url: str) -> None:
    from infai.store import ToolResultRecord

    big = ToolResultRecord(call_id="c", name="read_file", content="z" * 50_000)
    with PgStore(pg_url) as store:
        one, two = store.create_session().id, store.create_session().id
        store.open_writer(one).append(big, "tool")
        store.open_writer(two).append(big, "tool")
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT count(*) FROM infai_blobs").fetchone() == (1,)
        store.remove_session(one)
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT count(*) FROM infai_blobs").fetchone() == (1,)
        store.remove_session(two)
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT count(*) FROM infai_blobs").fetchone() == (0,)


def test_a_tampered_blob_is_reported_not_returned(pg_url: str) -> None:
    from infai.store import BlobDigestError, ToolResultRecord

    big = ToolResultRecord(call_id="c", name="read_file", content="q" * 50_000)
    with PgStore(pg_url) as store:
        sid = store.create_session().id
        event = store.open_writer(sid).append(big, "tool")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE infai_blobs SET data = %s", (b'{"x": 1}',))
        with store.open_reader(sid) as reader, pytest.raises(BlobDigestError):
            reader.event(event.id, resolve=True)
        report = store.fsck(sid)
        assert not report.ok and "does not match" in report.problems[0].detail


def test_removing_a_session_never_takes_a_blob_an_append_in_flight_needs(pg_url: str) -> None:
    from infai.store import ToolResultRecord
    from infai.store.file.blobs import digest_of
    from infai.store.records import encode_record

    big = ToolResultRecord(call_id="c", name="read_file", content="w" * 50_000)
    digest = digest_of(encode_record(big))
    with PgStore(pg_url) as store:
        old = store.create_session().id
        store.open_writer(old).append(big, "tool")
        other = store.create_session().id
        # another node's append, half done: it found the blob there (inserting
        # nothing) and wrote its event, but has not committed yet
        with psycopg.connect(pg_url) as racer:
            racer.execute(
                "INSERT INTO infai_blobs (digest, data) VALUES (%s, %s)"
                " ON CONFLICT (digest) DO NOTHING",
                (digest, encode_record(big)),
            )
            racer.execute(
                "INSERT INTO infai_events (session_id, seq, id, parent_id, parent_seq, kind,"
                " role, ts, preview, digest) VALUES (%s, 0, %s, %s, -1, 'tool_result', 'tool',"
                " '2026-01-01T00:00:00Z', 'p', %s)",
                (other, "01a00000-0000-7000-8000-000000000001", NIL_ID, digest),
            )
            remover = threading.Thread(target=store.remove_session, args=(old,))
            remover.start()
            remover.join(0.5)
            assert remover.is_alive()  # it waits for the append to settle
            racer.commit()
        remover.join(10)
        assert not remover.is_alive()
        with psycopg.connect(pg_url) as conn:
            kept = conn.execute("SELECT count(*) FROM infai_blobs WHERE digest = %s", (digest,))
            assert kept.fetchone() == (1,)


def test_after_a_conflict_a_picked_event_stays_picked(pg_url: str) -> None:
    with PgStore(pg_url) as store:
        sid = store.create_session().id
        one, two = store.open_writer(sid), store.open_writer(sid)
        first = one.append(msg("first"), "user")
        one.append(msg("second"), "assistant")
        two.refresh()
        one.append(msg("third"), "user")  # two has not seen this one
        two.select(first.id)
        with pytest.raises(HeadConflict):
            two.append(msg("a branch"), "user")
        assert two.pending_parent == first.id
        branch = two.append(msg("a branch"), "user")
        assert branch.parent_id == first.id and branch.branch_from == first.id


def test_a_prompt_that_lost_the_race_follows_the_winner(pg_url: str, tmp_path: Any) -> None:
    import asyncio

    from infai.agent import Saved, Streamed, run_turn
    from infai.llm import Notice, ScriptedModel
    from infai.tools import AllowAll, Toolbox, ToolContext

    with PgStore(pg_url) as store:
        sid = store.create_session().id
        ours, theirs = store.open_writer(sid), store.open_writer(sid)
        won = theirs.append(msg("their event"), "user")
        model = ScriptedModel(["answer"])

        async def go() -> list[Any]:
            context = ToolContext(tmp_path, sid)
            return [
                e
                async for e in run_turn(
                    ours, model, "mine", toolbox=Toolbox(), permissions=AllowAll(), context=context
                )
            ]

        events = asyncio.run(go())
        notes = [
            e.event.message
            for e in events
            if isinstance(e, Streamed) and isinstance(e.event, Notice)
        ]
        assert notes == ["another writer added to this session; your prompt follows it"]
        saved = [e.event for e in events if isinstance(e, Saved)]
        assert saved[0].parent_id == won.id and saved[0].record.content == "mine"  # type: ignore[union-attr]
        assert [m.content for m in model.requests[0].messages] == ["their event", "mine"]


def test_one_turn_lease_per_session_across_processes(pg_url: str) -> None:
    with PgStore(pg_url) as a, PgStore(pg_url) as b:
        sid = a.create_session().id
        other = a.create_session().id
        held = a.lease(sid)
        with pytest.raises(SessionBusy, match=f"session {sid} is busy"):
            b.lease(sid)
        b.lease(other).release()  # leases are per session
        with pytest.raises(SessionBusy):
            b.remove_session(sid)  # never under a turn running elsewhere
        held.release()
        held.release()  # twice is harmless
        b.lease(sid).release()

        # a process that dies holding the lease releases it with its connection
        code = (
            "import os, signal, sys; from infai.store.pg import PgStore; "
            f"s = PgStore({pg_url!r}); s.lease({sid!r}); print('held', flush=True); "
            "os.kill(os.getpid(), signal.SIGKILL)"
        )
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert child.returncode == -signal.SIGKILL and "held" in child.stdout
        deadline = time.monotonic() + 10
        while True:
            try:
                b.lease(sid).release()
                break
            except SessionBusy:
                assert time.monotonic() < deadline, "the dead process's lease was kept"
                time.sleep(0.05)


def test_a_busy_lease_is_waited_for_up_to_lock_timeout(pg_url: str) -> None:
    """``lock_timeout`` was silently ignored by the database store: with it set, a
    busy session is waited for (and still refused once the time is up); unset, a
    busy session answers SessionBusy at once, as before."""
    with PgStore(pg_url) as a, PgStore(pg_url, StoreOptions(lock_timeout=10)) as b:
        sid = a.create_session().id
        held = a.lease(sid)
        started = time.monotonic()  # before the timer: released no sooner than 0.3 s on
        threading.Timer(0.3, held.release).start()
        b.lease(sid).release()  # waited for the holder instead of failing at once
        assert 0.2 < time.monotonic() - started < 5

        held = a.lease(sid)
        with PgStore(pg_url, StoreOptions(lock_timeout=0.3)) as c:
            started = time.monotonic()
            with pytest.raises(SessionBusy):
                c.lease(sid)
            assert time.monotonic() - started >= 0.3
        started = time.monotonic()
        with PgStore(pg_url) as d, pytest.raises(SessionBusy):
            d.lease(sid)  # the default: no wait
        assert time.monotonic() - started < 0.3 + 2  # (the store's own connect included)
        held.release()


def test_the_home_is_where_the_caller_says(pg_url: str, tmp_path: Path) -> None:
    """PgStore set ``home`` to the default directory whatever it was given, so ``serve
    --home X --store postgresql://...`` kept its token in the wrong place."""
    with PgStore(pg_url, home=tmp_path / "mine") as store:
        assert store.home == tmp_path / "mine"
    with open_store(pg_url, home=tmp_path / "yours") as store:
        assert store.home == tmp_path / "yours"
    with open_store(None, home=tmp_path / "dir") as store:  # a directory store lives there
        assert store.home == tmp_path / "dir"
        assert isinstance(store, Store)


def test_a_failing_migration_leaves_the_earlier_ones_applied(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schema's docstring promised one transaction per migration, but they all ran in
    one: a failing later migration rolled the earlier, good ones back with it."""
    from infai.store.pg import schema

    broken = (LATEST + 1, "broken", "ALTER TABLE infai_no_such_table ADD COLUMN x int")
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, broken])
    monkeypatch.setattr(schema, "LATEST", LATEST + 1)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable):
            migrate(conn)
        assert schema.applied(conn) == LATEST  # the good ones stayed, and are recorded
        tables = conn.execute("SELECT to_regclass('infai_sessions') IS NOT NULL").fetchone()
        assert tables == (True,)
        monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:-1])
        monkeypatch.setattr(schema, "LATEST", LATEST)
        assert migrate(conn) == []  # nothing left to apply
    PgStore(pg_url, auto_migrate=False).close()  # and the store opens on it


def test_agent_turns_take_the_lease(pg_url: str, tmp_path: Any) -> None:
    import asyncio

    from infai.agent import AgentSession
    from infai.llm import ScriptedModel
    from infai.tools import AllowAll, Toolbox

    with PgStore(pg_url) as a, PgStore(pg_url) as b:
        sid = a.create_session(working_dir=str(tmp_path)).id
        first = AgentSession(
            a, sid, model=ScriptedModel(["one"]), toolbox=Toolbox(), permissions=AllowAll()
        )
        second = AgentSession(
            b, sid, model=ScriptedModel(["two"]), toolbox=Toolbox(), permissions=AllowAll()
        )
        try:
            with first.slot(), pytest.raises(SessionBusy):
                asyncio.run(drain(second.prompt("meanwhile")))
            with b.open_reader(sid) as reader:
                assert reader.count == 0  # refused before anything was stored
            asyncio.run(drain(first.prompt("hello")))
            asyncio.run(drain(second.prompt("and you")))  # sees first's events: no conflict
            with b.open_reader(sid) as reader:
                assert [e.preview for e in reader.context().events] == [
                    "hello",
                    "one",
                    "and you",
                    "two",
                ]
        finally:
            first.close()
            second.close()


async def drain(events: Any) -> None:
    async for _ in events:
        pass

"""Garbage collection of objects, on both backends: what is reachable stays.

Roots are snapshot and restore trees on every branch of every session and
objects named under ``metadata["tool_manifest"]``; objects put within the
grace period stay too; a session or tree that cannot be read stops gc.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from infai.store import (
    GcRefused,
    MessageRecord,
    RestoreRecord,
    SessionStore,
    SnapshotRecord,
    Store,
    collect_garbage,
    open_store,
)
from infai.store.codec import digest_of
from infai.store.pg import PgStore
from objtrees import put_tree


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    location = str(tmp_path / "home") if request.param == "file" else None
    with open_store(location or request.getfixturevalue("pg_url")) as opened:
        yield opened


def age_all(store: SessionStore) -> None:
    """Make every put two hours old, as if written long ago."""
    if isinstance(store, Store):
        conn = sqlite3.connect(store.home / "objects" / "objects.sqlite")
        conn.execute("UPDATE puts SET at = at - 7200")
        conn.commit()
        conn.close()
    else:
        assert isinstance(store, PgStore)
        with psycopg.connect(store.url, autocommit=True) as pg:
            pg.execute("UPDATE infai_object_puts SET at = at - interval '2 hours'")


def test_gc_keeps_every_root_on_every_branch_and_removes_the_rest(store: SessionStore) -> None:
    objects = store.objects
    old, old_reach = put_tree(objects, {"a.txt": b"one", "src/m.py": b"print(1)"})
    new, new_reach = put_tree(objects, {"a.txt": b"two", "src/m.py": b"print(1)"})
    back, back_reach = put_tree(objects, {"b.txt": b"restored"})
    manifest = objects.put(b'{"tools": ["bash"]}')
    _, orphan_reach = put_tree(objects, {"gone/x": b"abandoned snapshot"})
    stray = objects.put(b"never named")
    sid = store.create_session().id
    with store.open_writer(sid) as writer:
        first = writer.append(MessageRecord(content="hi"), "user")
        writer.append(SnapshotRecord(tree=old, reason="turn start"), "system")
        # a branch from the first event holds the other snapshot
        writer.append(SnapshotRecord(tree=new), "system", parent=first.id)
        writer.append(RestoreRecord(tree=back, source=first.id), "system")
        writer.append(
            MessageRecord(content="ok", metadata={"tool_manifest": manifest}), "assistant"
        )
        junk = MessageRecord(content="x", metadata={"tool_manifest": "not a digest"})
        writer.append(junk, "user")
    age_all(store)
    live = old_reach | new_reach | back_reach | {manifest}
    dead = (orphan_reach - live) | {stray}
    assert dead and live.isdisjoint(dead)

    dry = collect_garbage(store, dry_run=True, grace=0)
    assert set(dry.digests) == dead and dry.removed == len(dead)
    assert dry.freed == sum(objects.size(d) for d in dead)
    assert objects.missing(live | dead) == set()  # a dry run removes nothing

    report = collect_garbage(store, grace=0)
    assert set(report.digests) == dead and report.removed == len(dead)
    assert report.freed == dry.freed and report.reachable == len(live)
    assert report.sessions == 1
    assert objects.missing(live) == set() and objects.missing(dead) == dead
    assert collect_garbage(store, grace=0).removed == 0  # nothing left to take


def test_gc_spares_what_was_put_within_the_grace_period(store: SessionStore) -> None:
    old = store.objects.put(b"old and unnamed")
    age_all(store)
    fresh = store.objects.put(b"a snapshot in progress: its event comes next")
    report = collect_garbage(store, grace=600)
    assert report.digests == [old] and report.recent == 1
    assert store.objects.has(fresh) and not store.objects.has(old)


def test_removing_a_session_frees_only_what_no_other_session_reaches(
    store: SessionStore,
) -> None:
    shared = {"lib.py": b"shared by both sessions"}
    tree_a, reach_a = put_tree(store.objects, {**shared, "a": b"only a"})
    tree_b, reach_b = put_tree(store.objects, {**shared, "b": b"only b"})
    sessions = []
    for tree in (tree_a, tree_b):
        sid = store.create_session().id
        with store.open_writer(sid) as writer:
            writer.append(SnapshotRecord(tree=tree), "system")
        sessions.append(sid)
    age_all(store)
    assert collect_garbage(store, grace=0).removed == 0
    store.remove_session(sessions[0])
    report = collect_garbage(store, grace=0)
    assert set(report.digests) == reach_a - reach_b
    assert store.objects.missing(reach_b) == set()
    assert store.objects.has(digest_of(b"shared by both sessions"))


def test_a_missing_tree_stops_gc_naming_the_event(store: SessionStore) -> None:
    stray = store.objects.put(b"would be collected")
    lost_tree = digest_of(b"a tree that was never stored")
    sid = store.create_session().id
    with store.open_writer(sid) as writer:
        event = writer.append(SnapshotRecord(tree=lost_tree), "system")
    age_all(store)
    with pytest.raises(GcRefused, match=f"session {sid} event {event.id}"):
        collect_garbage(store, grace=0)
    assert store.objects.has(stray)  # nothing removed


def test_a_damaged_tree_stops_gc(store: SessionStore) -> None:
    not_a_tree = store.objects.put(b"this is file content, not a tree")
    stray = store.objects.put(b"would be collected")
    sid = store.create_session().id
    with store.open_writer(sid) as writer:
        writer.append(SnapshotRecord(tree=not_a_tree), "system")
    age_all(store)
    with pytest.raises(GcRefused, match="not a tree object"):
        collect_garbage(store, grace=0)
    assert store.objects.has(stray)


def test_search_finds_workspace_events_by_path_never_by_digest(store: SessionStore) -> None:
    tree, _ = put_tree(store.objects, {"a.txt": b"x"})
    sid = store.create_session().id
    with store.open_writer(sid) as writer:
        first = writer.append(
            SnapshotRecord(tree=tree, reason="after bash", skipped={"huge.bin": "over the cap"}),
            "system",
        )
        back = RestoreRecord(tree=tree, source=first.id, touched=["src/parser.py"])
        writer.append(back, "system")
    assert [h.kind for h in store.search("huge.bin")] == ["snapshot"]
    assert [h.kind for h in store.search("parser.py")] == ["restore"]
    assert store.search(tree.removeprefix("sha256:")) == []


def test_gc_says_what_it_did_with_the_space(store: SessionStore) -> None:
    with store.objects.batch() as batch:
        for i in range(50):
            batch.put(i.to_bytes(4, "big") * 2000)
    age_all(store)
    dry = collect_garbage(store, dry_run=True)
    assert dry.removed == 50 and dry.disk_before > 0 and dry.disk_after is None
    report = collect_garbage(store)
    assert report.removed == 50 and report.disk_after is not None
    assert report.space_note is not None
    if isinstance(store, PgStore):  # the files keep their size: said, not pretended
        assert dry.reclaimed == 0 and "VACUUM FULL" in report.space_note
        with psycopg.connect(store.url, autocommit=True) as pg:
            row = pg.execute(
                "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'infai_objects'"
            ).fetchone()
        assert row is not None and row[0] >= 1  # gc's VACUUM ran
    else:
        assert dry.reclaimed >= dry.freed and report.reclaimed >= 0.95 * report.freed

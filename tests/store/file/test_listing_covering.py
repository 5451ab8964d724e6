"""A newly opened store lists thousands of sessions from one covering index scan, and the
rows become the same SessionInfo objects a session.json gives (built without the keyword
call, so every field must still land in its place)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from infai.store import Store
from infai.store.file import listing


def test_the_listing_query_reads_only_the_covering_index(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    store.create_session(name="a")
    assert len(store.list_sessions()) == 1
    store.close()
    with sqlite3.connect(tmp_path / "home" / "index" / "sessions.sqlite") as conn:
        plan = conn.execute(
            f"EXPLAIN QUERY PLAN SELECT {listing._SHOWN} FROM listing ORDER BY active DESC, id DESC"
        ).fetchall()
    assert [row[3] for row in plan] == ["SCAN listing USING COVERING INDEX listing_shown"]


def test_listed_infos_equal_what_session_json_says(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    parent = store.create_session(name="parent", working_dir="/w", model="m1")
    store.create_session(name="child", working_dir="/w/sub", model="m2", parent_session=parent.id)
    store.create_session()  # every optional field left out
    store.update_info(parent.id, extra={"tags": ["x"], "n": 1})
    store.close()
    fresh = Store(tmp_path / "home")  # rows read back from the index file
    listed = fresh.list_sessions()
    assert {i.id: i for i in listed} == {i.id: fresh.info(i.id) for i in listed}
    by_name = {i.name: i for i in listed}
    assert by_name["parent"].extra == {"tags": ["x"], "n": 1}
    assert by_name["child"].parent_session == parent.id
    assert by_name[None].extra == {}

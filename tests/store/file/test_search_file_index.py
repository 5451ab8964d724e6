"""The directory store's search index is derived: rebuilt when deleted or damaged, kept
current by the writer's process, and caught up with appends made by other processes."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from infai.store import MessageRecord, Store
from infai.store.file import search_index


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


def index_file(store: Store) -> Path:
    return store.home / "index" / "search.sqlite"


def indexed(store: Store, session_id: str) -> int:
    """How many of the session's events the index file says it holds (read directly)."""
    with sqlite3.connect(index_file(store)) as conn:
        row = conn.execute("SELECT indexed FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return 0 if row is None else int(row[0])


def child(home: Path, body: str) -> None:
    """Run ``body`` in another process with ``store`` open on ``home``."""
    code = f"from infai.store import *\nstore = Store({str(home)!r})\n" + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_deleted_index_is_built_again(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        event = w.append(msg("a gecko on the wall"), "user")
    assert [h.event_id for h in store.search("gecko")] == [event.id]
    store.close()
    for path in index_file(store).parent.glob("search.sqlite*"):
        path.unlink()
    again = Store(tmp_path / "home")
    assert [h.event_id for h in again.search("gecko")] == [event.id]
    assert again.index_notes == []  # a missing file is simply built


@pytest.mark.parametrize("damage", ["garbage", "foreign schema"])
def test_a_damaged_index_is_rebuilt_with_a_note(tmp_path: Path, damage: str) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        event = w.append(msg("an axolotl smiles"), "user")
    store.search("axolotl")
    store.close()
    path = index_file(store)
    if damage == "garbage":
        for extra in path.parent.glob("search.sqlite-*"):
            extra.unlink()
        path.write_bytes(b"this is not a database at all" * 200)
    else:
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA user_version = 999")
    again = Store(tmp_path / "home")
    assert [h.event_id for h in again.search("axolotl")] == [event.id]
    assert len(again.index_notes) == 1 and "search.sqlite" in again.index_notes[0]


def test_damage_found_mid_search_rebuilds(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        event = w.append(msg("a tapir naps"), "user")
    store.search("tapir")
    index = store.search_index()
    real = index._search
    calls: list[int] = []

    def damaged_once(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            exc = sqlite3.DatabaseError("database disk image is malformed")
            exc.sqlite_errorcode = 11
            raise exc
        return real(*args)

    index._search = damaged_once  # type: ignore[method-assign,assignment]
    assert [h.event_id for h in store.search("tapir")] == [event.id]
    assert "malformed" in store.index_notes[0] and len(calls) == 2


@pytest.fixture
def small_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer's queue is indexed after 8 events (fewer appends to make)."""
    monkeypatch.setattr(search_index, "FLUSH_EVENTS", 8)


def test_the_writers_process_indexes_its_appends(tmp_path: Path, small_queue: None) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    store.search("anything")  # the index is in use from now on
    with store.open_writer(sid) as w:
        for i in range(search_index.FLUSH_EVENTS):
            w.append(msg(f"note {i}"), "user")
        assert indexed(store, sid) == search_index.FLUSH_EVENTS  # a full queue is indexed
        w.append(msg("one more"), "user")
        assert indexed(store, sid) == search_index.FLUSH_EVENTS  # queued
    assert indexed(store, sid) == search_index.FLUSH_EVENTS + 1  # closing indexes the rest


def test_appends_by_other_processes_are_caught_up(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = Store(home)
    sid = store.create_session().id
    assert store.search("ocelot") == []
    # another infai process: its writer indexes what it appends
    child(
        home,
        f"""
        with store.open_writer({sid!r}) as w:
            w.append(MessageRecord(content='ocelot one'), 'user')
        """,
    )
    # a process that does not keep the index (an older infai): the search catches up
    child(
        home,
        f"""
        store._in_use = lambda *a: False
        with store.open_writer({sid!r}) as w:
            big = 'ocelot two ' + 'x' * 20000
            w.append(ToolResultRecord(call_id='c', name='t', content=big), 'tool')
        """,
    )
    hits = store.search("ocelot")
    found = sorted(("ocelot one" in h.snippet, "ocelot two" in h.snippet) for h in hits)
    assert found == [(False, True), (True, False)]
    assert all(h.on_head_path for h in hits)


def test_a_session_replaced_under_the_same_id_is_indexed_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = Store(home)
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(msg("old lemur"), "user")
        w.append(msg("old lemur again"), "user")
    assert len(store.search("lemur")) == 2
    # removed and made again by a process that does not keep the index
    child(
        home,
        f"""
        store._in_use = lambda *a: False
        store.remove_session({sid!r})
        store.create_session(session_id={sid!r})
        with store.open_writer({sid!r}) as w:
            for word in ('new', 'fresh', 'third'):
                w.append(MessageRecord(content=word + ' lemur'), 'user')
        """,
    )
    assert sorted(h.snippet for h in store.search("lemur")) == [
        "fresh lemur",
        "new lemur",
        "third lemur",
    ]


def test_a_busy_index_never_fails_an_append(tmp_path: Path, small_queue: None) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    store.search("anything")
    holder = sqlite3.connect(index_file(store), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the index
    try:
        with store.open_writer(sid) as w:
            for i in range(search_index.FLUSH_EVENTS + 1):
                w.append(msg(f"okapi {i}"), "user")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert indexed(store, sid) == 0  # nothing could be written: left to the catch-up
    assert len(store.search("okapi", limit=100)) == search_index.FLUSH_EVENTS + 1


def test_an_unreadable_session_does_not_hide_the_others(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    good, bad = store.create_session().id, store.create_session().id
    for sid in (good, bad):
        with store.open_writer(sid) as w:
            w.append(msg("a quagga"), "user")
    (store.sessions_dir / bad / "session.json").write_text("{broken")
    assert [h.session_id for h in store.search("quagga")] == [good]

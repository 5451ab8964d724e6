"""The listing index answers ``list_sessions`` without reading every session, and stays
right: changes by other processes, by ones that do not keep it, deletion and damage."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infai.store import MessageRecord, Store
from infai.store.file import listing


def child(home: Path, body: str) -> str:
    """Run ``body`` in another process with ``store`` open on ``home``; its stdout."""
    code = f"from infai.store import *\nstore = Store({str(home)!r})\n" + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def names(store: Store) -> list[str | None]:
    return [i.name for i in store.list_sessions()]


def test_sessions_changed_by_another_infai_process_show_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = Store(home)
    first = store.create_session(name="first").id
    assert names(store) == ["first"]
    made = child(home, "print(store.create_session(name='second').id)")
    assert names(store) == ["second", "first"]
    child(home, f"store.update_info({first!r}, name='renamed')")
    assert names(store) == ["renamed", "second"]
    child(
        home,
        f"""
        with store.open_writer({made!r}) as w:
            w.append(MessageRecord(content='hi'), 'user')
        """,
    )
    listed = store.list_sessions()
    assert [i.id for i in listed] == [made, first]  # the append moved it up
    assert listed[0].updated_at > listed[0].created_at
    child(home, f"store.remove_session({made!r})")
    assert names(store) == ["renamed"]


def test_changes_by_a_process_that_does_not_keep_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    store = Store(home)
    sid = store.create_session(name="original").id
    assert names(store) == ["original"]
    # a session directory copied in by hand is seen at once (sessions/ changed)
    copy = "0190a000-0000-7000-8000-000000000001"
    shutil.copytree(store.sessions_dir / sid, store.sessions_dir / copy)
    meta = json.loads((store.sessions_dir / copy / "session.json").read_text())
    (store.sessions_dir / copy / "session.json").write_text(
        json.dumps(meta | {"id": copy, "name": "copied"})
    )
    assert sorted(map(str, names(store))) == ["copied", "original"]
    # session.json edited in place: seen by the next full check
    (store.sessions_dir / sid / "session.json").write_text(
        json.dumps(meta | {"name": "edited by hand"})
    )
    monkeypatch.setattr(listing, "FULL_EVERY", 0.0)
    assert sorted(map(str, names(store))) == ["copied", "edited by hand"]
    # removed by hand
    shutil.rmtree(store.sessions_dir / copy)
    assert names(store) == ["edited by hand"]


def test_an_edit_within_the_same_clock_tick_is_not_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same size, same mtime (a coarse clock): a signature that recent is not trusted."""
    monkeypatch.setattr(listing, "FULL_EVERY", 0.0)
    store = Store(tmp_path / "home")
    sid = store.create_session(name="aaaa").id
    meta = store.sessions_dir / sid / "session.json"
    stat = meta.stat()
    assert names(store) == ["aaaa"]
    meta.write_text(meta.read_text().replace('"aaaa"', '"bbbb"'))
    os.utime(meta, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert names(store) == ["bbbb"]


@pytest.mark.parametrize("damage", ["deleted", "garbage"])
def test_a_deleted_or_damaged_listing_index_is_rebuilt(tmp_path: Path, damage: str) -> None:
    home = tmp_path / "home"
    store = Store(home)
    made = [store.create_session(name=f"s{i}").id for i in range(3)]
    before = store.list_sessions()
    store.close()
    path = home / "index" / "sessions.sqlite"
    for extra in path.parent.glob("sessions.sqlite-*"):
        extra.unlink()
    if damage == "deleted":
        path.unlink()
    else:
        path.write_bytes(b"not sqlite " * 500)
    again = Store(home)
    assert again.list_sessions() == before and len(made) == 3
    assert len(again.index_notes) == (1 if damage == "garbage" else 0)


def test_unreadable_sessions_are_named_by_every_listing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = Store(home)
    good = store.create_session(name="good").id
    bad = store.create_session(name="bad").id
    meta = store.sessions_dir / bad / "session.json"
    saved = meta.read_bytes()
    meta.write_text("{not json")
    for opened in (store, store, Store(home)):  # and again from a new store (process)
        assert [i.id for i in opened.list_sessions()] == [good]
        assert len(opened.unreadable) == 1 and bad in str(opened.unreadable[0])
    meta.write_bytes(saved)  # repaired: it comes back
    assert {i.id for i in Store(home).list_sessions()} == {good, bad}


def test_this_stores_writer_keeps_the_order_current(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    old = store.create_session(name="old").id
    store.create_session(name="new")
    assert names(store) == ["new", "old"]
    with store.open_writer(old) as w:
        w.append(MessageRecord(content="back to this one"), "user")
    assert names(store) == ["old", "new"]
    with sqlite3.connect(store.home / "index" / "sessions.sqlite") as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM listing ORDER BY active DESC")]
    assert ids[0] == old

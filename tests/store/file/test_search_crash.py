"""The search index survives what a derived file may meet: a process killed in the
middle of indexing (the transaction is rolled back, the next search catches up, every
event found once), and a file cut short or overwritten in the middle (SQLite reports
it damaged, it is deleted and built again with a note, never read as if it were
right). The index is read through a memory map, which must not hide either."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from infai.store import MessageRecord, Store


def index_file(home: Path) -> Path:
    return home / "index" / "search.sqlite"


def test_a_process_killed_while_indexing_leaves_nothing_half_done(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = Store(home)
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        first = w.append(MessageRecord(content="a marmot before"), "user").id
    assert [h.event_id for h in store.search("marmot")] == [first]
    store.close()
    # Another process appends with the index in use and is killed (SIGKILL) inside
    # the index's transaction, after its rows went in and before the commit.
    code = textwrap.dedent(
        f"""
        import os, signal
        from infai.store import MessageRecord, Store
        from infai.store.file import search_index
        real = search_index.SearchIndex._add
        def add_then_die(self, conn, *args):
            real(self, conn, *args)
            assert conn.in_transaction
            os.kill(os.getpid(), signal.SIGKILL)
        search_index.SearchIndex._add = add_then_die
        store = Store({str(home)!r})
        with store.open_writer({sid!r}) as w:
            for i in range(5):
                w.append(MessageRecord(content=f"marmot {{i}} after"), "user")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert done.returncode == -9, done.stderr  # it really died there
    again = Store(home)
    hits = again.search("marmot", limit=50)
    assert len(hits) == 6 and len({h.event_id for h in hits}) == 6  # each once
    assert sum("after" in h.snippet for h in hits) == 5
    assert again.index_notes == []  # a rolled-back transaction is not damage


def write_sessions(home: Path, count: int) -> Store:
    store = Store(home)
    for s in range(count):
        sid = store.create_session().id
        with store.open_writer(sid) as w:
            for i in range(40):
                w.append(MessageRecord(content=f"capybara {s} {i} " + "filler " * 60), "user")
    return store


def checkpointed(store: Store) -> Path:
    """The index file alone (its WAL folded in and removed), the store closed."""
    store.close()
    path = index_file(store.home)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    assert not Path(f"{path}-wal").exists()
    return path


def test_an_index_cut_short_is_rebuilt(tmp_path: Path) -> None:
    store = write_sessions(tmp_path / "home", 4)
    assert len(store.search("capybara", limit=1000)) == 160
    path = checkpointed(store)
    size = path.stat().st_size
    assert size > 16 * 4096  # many pages: the cut takes real data with it
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    again = Store(tmp_path / "home")
    assert len(again.search("capybara", limit=1000)) == 160
    assert len(again.index_notes) == 1 and "search.sqlite" in again.index_notes[0]


def test_an_index_overwritten_in_the_middle_is_rebuilt(tmp_path: Path) -> None:
    store = write_sessions(tmp_path / "home", 4)
    store.search("capybara")
    path = checkpointed(store)
    size = path.stat().st_size
    with open(path, "r+b") as f:  # pages past the schema: the tables' own pages
        f.seek(size // 3)
        f.write(b"\xa5" * (size // 3))
    again = Store(tmp_path / "home")
    assert len(again.search("capybara", limit=1000)) == 160
    assert len(again.index_notes) == 1 and "search.sqlite" in again.index_notes[0]

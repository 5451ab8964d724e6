"""The search index's tuning reaches files made before it: FTS5's merge setting is
brought to the current one by the next connection; stored texts are compressed only
when large, and both forms read back exactly."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from infai.store import MessageRecord, Store
from infai.store.file import search_index
from infai.store.file.search_index import _pack, _unpack


def merge_setting(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT v FROM fts_config WHERE k = 'automerge'").fetchone()
    return int(row[0])


def test_an_older_files_merge_setting_is_brought_up_to_date(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(MessageRecord(content="a dormouse sleeps"), "user")
    assert len(store.search("dormouse")) == 1
    store.close()
    path = tmp_path / "home" / "index" / "search.sqlite"
    assert merge_setting(path) == search_index.AUTOMERGE
    with sqlite3.connect(path) as conn:  # what an older infai left
        conn.execute("INSERT INTO fts (fts, rank) VALUES ('automerge', 8)")
    assert merge_setting(path) == 8
    again = Store(tmp_path / "home")
    assert len(again.search("dormouse")) == 1
    assert merge_setting(path) == search_index.AUTOMERGE
    assert again.index_notes == []  # tuned, not rebuilt


def test_texts_are_compressed_only_when_large() -> None:
    small = "a few words " * 20
    large = "many more words " * 200
    assert len(small.encode()) <= search_index.PACK_BYTES < len(large.encode())
    assert _pack(small)[:1] == b"r" and _pack(large)[:1] == b"z"
    assert _unpack(_pack(small)) == small and _unpack(_pack(large)) == large
    assert _unpack(_pack("")) == "" and _unpack(_pack("é" * 2000)) == "é" * 2000

"""Unit tests of infai.store.file.store: creating, listing, describing and removing sessions."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from infai.store import (
    FORMAT_VERSION,
    CorruptionError,
    InvalidInput,
    MessageRecord,
    SessionExists,
    SessionNotFound,
    Store,
    StoreError,
    StoreOptions,
    WriterLocked,
)

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
MISSING = "01a02f3f-a89d-7d25-b4ac-ac89a183258d"


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Each test of sessions and metadata runs on both backends (file-only ones take
    ``file_store``)."""
    if request.param == "file":
        yield Store(tmp_path / "home", StoreOptions(lock_timeout=0))
        return
    from infai.store.pg import PgStore

    with PgStore(request.getfixturevalue("pg_url")) as pg:
        yield pg


@pytest.fixture
def file_store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home", StoreOptions(lock_timeout=0))


def test_create_makes_the_layout(file_store: Store) -> None:
    store = file_store
    info = store.create_session(name="demo", working_dir="/src", model="m")
    root = store.home / "sessions" / info.id
    assert sorted(os.listdir(root)) == ["HEAD", "blobs", "chunks", "index.jsonl", "session.json"]
    assert (root / "HEAD").read_bytes() == b""
    assert (root / "index.jsonl").read_bytes() == b""
    assert os.listdir(root / "chunks") == [] and os.listdir(root / "blobs") == []
    # Nothing hidden is left behind.
    assert os.listdir(store.home / "sessions") == [info.id]


def test_session_json_has_format_and_timestamps(file_store: Store) -> None:
    store = file_store
    info = store.create_session(name="demo", working_dir="/src", model="m")
    raw = json.loads((store.home / "sessions" / info.id / "session.json").read_bytes())
    assert raw["id"] == info.id
    # a new session is format 1 until it holds a snapshot (format 2: see info.py)
    assert raw["format"] == 1 and FORMAT_VERSION == 4
    assert raw["name"] == "demo" and raw["working_dir"] == "/src" and raw["model"] == "m"
    assert RFC3339.match(raw["created_at"])
    assert raw["updated_at"] == raw["created_at"]
    assert store.info(info.id) == info


def test_session_id_is_uuid7(store: Store) -> None:
    info = store.create_session()
    assert re.match(
        r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", info.id
    )


def test_create_with_given_id_and_exists(store: Store) -> None:
    info = store.create_session(session_id=MISSING.upper())
    assert info.id == MISSING
    with pytest.raises(SessionExists):
        store.create_session(session_id=MISSING)
    with pytest.raises(InvalidInput):
        store.create_session(session_id="../escape")
    assert not (store.home / "escape").exists()


def test_parent_session_link(store: Store) -> None:
    parent = store.create_session(name="parent")
    with store.open_writer(parent.id) as w:
        ev = w.append(MessageRecord(content="spawn"), "user")
    child = store.create_session(name="sub", parent_session=parent.id, parent_event=ev.id.upper())
    got = store.info(child.id)
    assert got.parent_session == parent.id
    assert got.parent_event == ev.id
    with pytest.raises(SessionNotFound):
        store.create_session(parent_session=MISSING)
    with pytest.raises(InvalidInput):
        store.create_session(parent_session="nope")
    with pytest.raises(InvalidInput):
        store.create_session(parent_session=parent.id, parent_event="nope")
    assert len(store.list_sessions()) == 2  # the failed creations left nothing


def test_list_newest_first(store: Store) -> None:
    assert store.list_sessions() == []
    a = store.create_session(name="a")
    b = store.create_session(name="b")
    c = store.create_session(name="c")
    assert [i.id for i in store.list_sessions()] == [c.id, b.id, a.id]
    store.update_info(a.id, name="a2")
    assert [i.name for i in store.list_sessions()] == ["a2", "c", "b"]
    with store.open_writer(b.id) as w:
        w.append(MessageRecord(content="touch"), "user")  # the first append touches session.json
        assert [i.name for i in store.list_sessions()] == ["b", "a2", "c"]
        store.update_info(c.id, name="c2")
        assert store.list_sessions()[0].name == "c2"
        time.sleep(0.002)  # HEAD's time counts milliseconds
        later = w.append(MessageRecord(content="again"), "user")  # a long-open writer
        listed = store.list_sessions()
        assert [i.name for i in listed] == ["b", "c2", "a2"]  # its last append counts
        assert listed[0].updated_at >= later.timestamp[:23]  # to the millisecond


def test_list_ignores_hidden_and_stray_entries(file_store: Store) -> None:
    store = file_store
    info = store.create_session()
    (store.sessions_dir / f".new-{MISSING}").mkdir()
    (store.sessions_dir / ".trash-x").mkdir()
    (store.sessions_dir / "stray-file").write_text("x")
    (store.sessions_dir / "emptydir").mkdir()
    assert [i.id for i in store.list_sessions()] == [info.id]


def test_list_on_missing_home(tmp_path: Path) -> None:
    assert Store(tmp_path / "nowhere").list_sessions() == []


def test_update_info(store: Store) -> None:
    info = store.create_session(name="old", model="m1")
    new = store.update_info(info.id, name="new", model=None)
    assert new.name == "new" and new.model is None
    assert new.created_at == info.created_at
    assert new.updated_at >= info.updated_at
    assert store.info(info.id) == new
    with pytest.raises(InvalidInput, match="id"):
        store.update_info(info.id, id=MISSING)
    with pytest.raises(InvalidInput):
        store.update_info(info.id, created_at="yesterday")


def test_update_info_waits_for_another_stores_writer(file_store: Store) -> None:
    store = file_store
    info = store.create_session(name="old")
    elsewhere = Store(store.home, StoreOptions(lock_timeout=0))  # as another process would
    with store.open_writer(info.id), pytest.raises(WriterLocked):
        elsewhere.update_info(info.id, name="new")
    assert store.info(info.id).name == "old"
    with store.open_writer(info.id):  # the writer's own store uses the writer's lock
        store.update_info(info.id, name="new")
    assert store.info(info.id).name == "new"


@pytest.mark.parametrize("bad", ["", "../x", "x" * 36, MISSING + "/.."])
def test_bad_ids_are_invalid_input(store: Store, bad: str) -> None:
    store.create_session()
    for call in (
        store.info,
        store.open_reader,
        store.open_writer,
        store.remove_session,
        store.fsck,
        *([store.paths] if isinstance(store, Store) else []),
    ):
        with pytest.raises(InvalidInput):
            call(bad)
    with pytest.raises(InvalidInput):
        store.update_info(bad, name="x")


def test_unknown_ids_are_session_not_found(store: Store) -> None:
    store.create_session()
    for call in (
        store.info,
        store.open_reader,
        store.open_writer,
        store.remove_session,
        store.fsck,
    ):
        with pytest.raises(SessionNotFound) as info:
            call(MISSING)
        assert MISSING in str(info.value)
        assert isinstance(info.value, KeyError)
    with pytest.raises(SessionNotFound):
        store.update_info(MISSING, name="x")


def test_remove(file_store: Store) -> None:
    store = file_store
    keep = store.create_session(name="keep")
    gone = store.create_session(name="gone")
    with store.open_writer(gone.id) as w:
        w.append(MessageRecord(content="x" * 50_000), "user")  # a blob too
    store.remove_session(gone.id)
    assert [i.id for i in store.list_sessions()] == [keep.id]
    assert sorted(os.listdir(store.sessions_dir)) == [keep.id]
    with pytest.raises(SessionNotFound):
        store.info(gone.id)
    with pytest.raises(SessionNotFound):
        store.remove_session(gone.id)


def test_remove_refuses_under_a_live_writer(file_store: Store) -> None:
    store = file_store
    info = store.create_session()
    with store.open_writer(info.id), pytest.raises(WriterLocked):
        store.remove_session(info.id)
    assert store.info(info.id).id == info.id


def test_second_writer_is_locked_out(file_store: Store) -> None:
    store = file_store
    info = store.create_session()
    with store.open_writer(info.id):
        with pytest.raises(WriterLocked, match=f"pid {os.getpid()}"):
            store.open_writer(info.id)
        with store.open_reader(info.id) as r:  # readers take no lock
            assert r.head is None
    with store.open_writer(info.id, timeout=0):
        pass


def test_newer_format_is_refused(file_store: Store) -> None:
    store = file_store
    info = store.create_session()
    meta = store.home / "sessions" / info.id / "session.json"
    obj = json.loads(meta.read_bytes())
    obj["format"] = FORMAT_VERSION + 1
    meta.write_bytes(json.dumps(obj).encode())
    with pytest.raises(StoreError, match="format"):
        store.open_reader(info.id)
    with pytest.raises(StoreError, match="format"):
        store.open_writer(info.id)


def test_damaged_session_json_is_reported(file_store: Store) -> None:
    store = file_store
    info = store.create_session()
    meta = store.home / "sessions" / info.id / "session.json"
    meta.write_bytes(b"{not json")
    # Damage on disk is corruption (named by file), not bad input from the caller.
    with pytest.raises(CorruptionError, match=r"session\.json") as exc:
        store.info(info.id)
    assert exc.value.path == str(meta)
    with pytest.raises(CorruptionError, match=r"session\.json"):
        store.open_reader(info.id)
    # Listing still shows the others and keeps the error.
    other = store.create_session()
    assert [i.id for i in store.list_sessions()] == [other.id]
    assert [e.path for e in store.unreadable] == [str(meta)]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "kwargs",
    [{"durability": "sometimes"}, {"chunk_size": 0}, {"index_sync_interval": 0}],
)
def test_bad_options_are_invalid_input(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        StoreOptions(**kwargs)  # type: ignore[arg-type]


def test_store_home_accepts_str(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "h"))
    info = store.create_session()
    assert (tmp_path / "h" / "sessions" / info.id).is_dir()


def test_default_store_uses_infai_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFAI_HOME", str(tmp_path / "envhome"))
    store = Store()
    info = store.create_session()
    assert (tmp_path / "envhome" / "sessions" / info.id / "session.json").is_file()


def test_create_refuses_metadata_it_could_not_read_back(store: Store) -> None:
    """session.json is read strictly (every field's type is checked), so the write side
    must refuse what the read side would reject: otherwise the session is created but
    can never be opened, and ``list_sessions`` fails for every session in the home."""
    good = store.create_session(name="good")
    with pytest.raises(InvalidInput):
        store.create_session(name=123)  # type: ignore[arg-type]
    assert [i.id for i in store.list_sessions()] == [good.id]


def test_update_refuses_metadata_it_could_not_read_back(store: Store) -> None:
    info = store.create_session(name="keep")
    with store.open_writer(info.id) as w:
        w.append(MessageRecord(content="history"), "user")
    with pytest.raises(InvalidInput):
        store.update_info(info.id, model=5)  # type: ignore[arg-type]
    assert store.info(info.id).model is None
    with store.open_reader(info.id) as r:  # the session's history is still reachable
        assert r.count == 1
    assert [i.id for i in store.list_sessions()] == [info.id]


def test_remove_after_an_interrupted_removal_of_the_same_id(file_store: Store) -> None:
    store = file_store
    """A crash during removal leaves ``.trash-<id>`` behind (ignored by everything). A
    session later recreated with that id (``session import`` keeps ids) must still be
    removable; the leftover must not turn removal into a raw ``OSError``."""
    info = store.create_session(name="first life")
    with store.open_writer(info.id) as w:
        w.append(MessageRecord(content="x"), "user")
    root = store.sessions_dir / info.id
    trash = store.sessions_dir / f".trash-{info.id}"
    os.rename(root, trash)  # the removal's rename happened; its rmtree never finished
    again = store.create_session(name="second life", session_id=info.id)
    assert [i.name for i in store.list_sessions()] == ["second life"]
    store.remove_session(again.id)
    assert store.list_sessions() == []
    with pytest.raises(SessionNotFound):
        store.info(info.id)

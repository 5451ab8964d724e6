"""Each backend satisfies the contract, checked by mypy and then at run time.

The functions below assign every backend class to the protocol it must
implement (as litestream's ``var _ Client = (*FileClient)(nil)`` does): the
day a backend's method drifts from :mod:`infai.store.contract` (a parameter
renamed, a capability missing, a return type widened), ``mypy`` fails here.
The tests run the capabilities the layers above call without ``getattr``:
``lease``, ``watch``, ``refresh`` and ``with``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.store import (
    Lease,
    MessageRecord,
    SessionLog,
    SessionStore,
    SessionView,
    open_store,
)
from infai.store.file import NoLease, SessionReader, SessionWriter, Store
from infai.store.file.objects import FileObjects
from infai.store.objects import ObjectStore
from infai.store.pg import Lease as PgLease
from infai.store.pg import PgObjects, PgSessionReader, PgSessionWriter, PgStore

# -- static conformance: mypy checks these assignments -------------------------------


def file_store_conforms(store: Store) -> SessionStore:
    return store


def file_reader_conforms(reader: SessionReader) -> SessionView:
    return reader


def file_writer_conforms(writer: SessionWriter) -> SessionLog:
    return writer


def file_lease_conforms(lease: NoLease) -> Lease:
    return lease


def file_objects_conform(objects: FileObjects) -> ObjectStore:
    return objects


def pg_objects_conform(objects: PgObjects) -> ObjectStore:
    return objects


def pg_store_conforms(store: PgStore) -> SessionStore:
    return store


def pg_reader_conforms(reader: PgSessionReader) -> SessionView:
    return reader


def pg_writer_conforms(writer: PgSessionWriter) -> SessionLog:
    return writer


def pg_lease_conforms(lease: PgLease) -> Lease:
    return lease


# -- the capabilities, at run time, on both backends -----------------------------------


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    location = str(tmp_path / "home") if request.param == "file" else None
    with open_store(location or request.getfixturevalue("pg_url")) as opened:
        yield opened


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


def test_the_classes_returned_are_the_ones_checked(store: SessionStore) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as writer, store.open_reader(sid) as reader:
        if isinstance(store, Store):
            assert isinstance(writer, SessionWriter) and isinstance(reader, SessionReader)
        else:
            assert isinstance(store, PgStore)
            assert isinstance(writer, PgSessionWriter)
            assert isinstance(reader, PgSessionReader)


def test_a_lease_is_taken_and_released(store: SessionStore) -> None:
    sid = store.create_session().id
    lease = store.lease(sid)
    lease.release()
    store.lease(sid).release()  # released: it can be taken again


def test_a_refreshed_reader_sees_later_appends(store: SessionStore) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as writer, store.open_reader(sid) as reader:
        first = writer.append(msg("one"), "user")
        assert reader.count == 0
        reader.refresh()
        assert reader.count == 1 and reader.head == first.id
        assert [e.id for e in reader.entries()] == [first.id]
        second = writer.append(msg("two"), "assistant")
        reader.refresh()
        assert reader.head == second.id
        assert [e.id for e in reader.context().events] == [first.id, second.id]
        writer.refresh()  # the writer's own appends are what it holds
        assert writer.head == second.id and writer.count == 2


def test_watch_returns_once_stopped(store: SessionStore) -> None:
    stop = threading.Event()
    heard: list[tuple[str | None, int]] = []
    thread = threading.Thread(
        target=store.watch, args=(lambda s, n: heard.append((s, n)), stop), daemon=True
    )
    thread.start()
    time.sleep(0.1)
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()

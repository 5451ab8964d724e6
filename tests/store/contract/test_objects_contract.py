"""The store-wide objects, run against both backends (directory store and PostgreSQL).

What the snapshot engine and gc rely on: puts are idempotent and verified on
read, a batch is all or nothing, a removal frees bytes and bumps the
generation, and an object put within the grace period is never removed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from infai.store import InvalidInput, ObjectNotFound, SessionStore, Store, open_store
from infai.store.codec import digest_of
from infai.store.errors import BlobDigestError
from infai.store.pg import PgStore


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    location = str(tmp_path / "home") if request.param == "file" else None
    with open_store(location or request.getfixturevalue("pg_url")) as opened:
        yield opened


def test_put_get_dedup_missing_and_stats(store: SessionStore) -> None:
    objects = store.objects
    assert objects.stats() == (0, 0) and list(objects.digests()) == []
    first = objects.put(b"hello")
    assert first == digest_of(b"hello") and objects.put(b"hello") == first
    assert objects.get(first) == b"hello" and objects.size(first) == 5
    assert objects.has(first) and objects.stats() == (1, 5)
    other = digest_of(b"nope")
    assert objects.missing([first, other]) == {other} and not objects.has(other)
    with pytest.raises(ObjectNotFound):
        objects.get(other)
    with pytest.raises(ObjectNotFound):
        objects.size(other)
    with pytest.raises(InvalidInput):
        objects.get("sha256:XYZ")
    with pytest.raises(InvalidInput):
        objects.missing(["../etc/passwd"])
    assert objects.put(b"") == digest_of(b"") and objects.get(digest_of(b"")) == b""


def test_a_batch_is_all_or_nothing(store: SessionStore) -> None:
    with pytest.raises(RuntimeError), store.objects.batch() as batch:
        lost = batch.put(b"a")
        raise RuntimeError("the snapshot failed")
    assert not store.objects.has(lost) and store.objects.stats() == (0, 0)
    with store.objects.batch() as batch:
        names = [batch.put(bytes([n]) * n) for n in range(1, 40)]
        assert batch.put(b"\x05" * 5) == names[4]  # twice in one batch: once
    assert store.objects.missing(names) == set()
    assert store.objects.stats() == (39, sum(range(1, 40)))
    assert store.objects.get(names[9]) == b"\x0a" * 10


def test_removal_frees_bytes_bumps_the_generation_and_spares_the_grace(
    store: SessionStore,
) -> None:
    objects = store.objects
    a, b = objects.put(b"aaaa"), objects.put(b"bb")
    assert objects.generation() == 0
    assert objects.recent(3600) == {a, b}
    # both were put just now: an hour's grace keeps them
    assert objects.remove([a, b], grace=3600) == 0 and objects.missing([a, b]) == set()
    assert objects.generation() == 1
    assert objects.remove([a, digest_of(b"absent")]) == 4
    assert objects.generation() == 2 and sorted(objects.digests()) == [b]
    assert objects.recent(3600) == {b}  # a removed object's put time goes with it
    assert objects.put(b"aaaa") == a and objects.get(a) == b"aaaa"  # can come back


def test_putting_again_refreshes_the_grace(store: SessionStore) -> None:
    objects = store.objects
    a = objects.put(b"old content")
    _age(store, a)
    assert a not in objects.recent(3600)
    objects.put(b"old content")  # a new snapshot names it again: its grace starts over
    assert a in objects.recent(3600)
    assert objects.remove([a], grace=3600) == 0 and objects.has(a)


def test_touching_refreshes_the_grace_of_stored_objects_only(store: SessionStore) -> None:
    """A warm snapshot names objects it does not put again (stat-cache hits): it
    touches them instead, and learns which are gone."""
    objects = store.objects
    a, b = objects.put(b"cached content"), objects.put(b"other content")
    _age(store, a)
    _age(store, b)
    absent = digest_of(b"never stored")
    assert objects.touch([a, absent, a]) == {absent}
    assert objects.recent(3600) == {a}
    assert objects.remove([a, b], grace=3600) == len(b"other content")
    assert objects.has(a) and not objects.has(b)
    assert objects.touch([b]) == {b}  # a removed object is not brought back
    assert objects.touch([]) == set()


def test_a_touch_is_never_undone_by_a_removal_that_had_begun(store: SessionStore) -> None:
    """A removal in flight when a touch commits either ran first (the touch then
    reports the object missing) or sees the fresh put time: never both lost."""
    import threading

    objects = store.objects
    digests = [objects.put(f"object {i}".encode()) for i in range(200)]
    for digest in digests:
        _age(store, digest)
    missing: list[set[str]] = []
    toucher = threading.Thread(target=lambda: missing.append(objects.touch(digests)))
    toucher.start()
    objects.remove(digests, grace=3600)
    toucher.join(timeout=60)
    assert not objects.missing(set(digests) - missing[0])


def _age(store: SessionStore, digest: str) -> None:
    """Make ``digest``'s last put two hours old (as if written long ago)."""
    if isinstance(store, Store):
        conn = sqlite3.connect(store.home / "objects" / "objects.sqlite")
        conn.execute("UPDATE puts SET at = at - 7200 WHERE digest = ?", (digest,))
        conn.commit()
        conn.close()
    else:
        assert isinstance(store, PgStore)
        with psycopg.connect(store.url, autocommit=True) as pg:
            pg.execute(
                "UPDATE infai_object_puts SET at = at - interval '2 hours' WHERE digest = %s",
                (digest,),
            )


def test_a_damaged_object_is_reported_not_returned(store: SessionStore) -> None:
    name = store.objects.put(b"precious content")
    if isinstance(store, Store):
        conn = sqlite3.connect(store.home / "objects" / "objects.sqlite")
        conn.execute("UPDATE objects SET data = ? WHERE digest = ?", (b"precious cOntent", name))
        conn.commit()
        conn.close()
    else:
        assert isinstance(store, PgStore)
        with psycopg.connect(store.url, autocommit=True) as pg:
            pg.execute(
                "UPDATE infai_objects SET data = %s WHERE digest = %s", (b"precious cOntent", name)
            )
    with pytest.raises(BlobDigestError, match="does not match"):
        store.objects.get(name)


def test_a_put_in_a_batch_still_open_is_never_removed_under_it(store: SessionStore) -> None:
    """gc's removal waits for batches in flight, then sees their puts as recent:
    an old object a snapshot is putting again survives, though unreferenced."""
    import threading

    objects = store.objects
    old = objects.put(b"content an abandoned snapshot had")
    _age(store, old)
    freed: list[int] = []
    with objects.batch() as batch:
        assert batch.put(b"content an abandoned snapshot had") == old  # put again
        remover = threading.Thread(target=lambda: freed.append(objects.remove([old], grace=600)))
        remover.start()
        remover.join(timeout=0.5)
        assert remover.is_alive()  # held back until this batch commits
    remover.join(timeout=30)
    assert freed == [0] and objects.has(old)

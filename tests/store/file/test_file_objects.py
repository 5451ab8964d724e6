"""The directory store's content-addressed objects: put, get, batches, removal."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from infai.store import InvalidInput, ObjectNotFound
from infai.store.codec import digest_of
from infai.store.errors import BlobDigestError
from infai.store.file import Store


def test_put_get_dedup_and_stats(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        objects = store.objects
        assert objects.stats() == (0, 0) and not (tmp_path / "objects").exists()
        first = objects.put(b"hello")
        assert first == digest_of(b"hello") and objects.put(b"hello") == first
        assert objects.get(first) == b"hello" and objects.size(first) == 5
        assert objects.stats() == (1, 5)
        other = digest_of(b"nope")
        assert objects.missing([first, other]) == {other}
        with pytest.raises(ObjectNotFound):
            objects.get(other)
        with pytest.raises(InvalidInput):
            objects.get("sha256:XYZ")


def test_a_batch_is_all_or_nothing_and_seen_by_another_process_handle(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        with pytest.raises(RuntimeError), store.objects.batch() as batch:
            kept = batch.put(b"a")
            raise RuntimeError("the snapshot failed")
        assert not store.objects.has(kept)
        with store.objects.batch() as batch:
            names = [batch.put(bytes([n]) * n) for n in range(1, 50)]
    with Store(tmp_path) as again:  # a fresh connection: committed means on disk
        assert again.objects.missing(names) == set()
        assert again.objects.get(names[9]) == b"\x0a" * 10


def test_removal_frees_bytes_and_bumps_the_generation(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        a, b = store.objects.put(b"aaaa"), store.objects.put(b"bb")
        assert store.objects.generation() == 0
        assert store.objects.remove([a, digest_of(b"absent")]) == 4
        assert store.objects.generation() == 1
        assert sorted(store.objects.digests()) == [b]


def test_a_flipped_byte_is_reported_not_returned(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        name = store.objects.put(b"precious content")
    conn = sqlite3.connect(tmp_path / "objects" / "objects.sqlite")
    conn.execute("UPDATE objects SET data = ? WHERE digest = ?", (b"precious cOntent", name))
    conn.commit()
    conn.close()
    with Store(tmp_path) as store, pytest.raises(BlobDigestError, match="does not match"):
        store.objects.get(name)

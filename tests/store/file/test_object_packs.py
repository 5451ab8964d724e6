"""The directory store's pack files: large objects outside SQLite, one pack per
batch, synced before the commit; damage reported with the pack and offset; a
failed or killed batch leaves nothing a row names, and gc removes its file;
gc drops empty packs and rewrites sparse ones; schema 2 databases migrate."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infai.store import Store
from infai.store.codec import digest_of
from infai.store.errors import BlobDigestError, ObjectNotFound
from infai.store.file import objects as objects_module
from infai.store.file.objects import FileObjects
from infai.store.file.objschema import SCHEMA_VERSION
from infai.store.file.packs import MAGIC, PACK_MIN

SRC = Path(__file__).resolve().parents[3] / "src"


def _big(tag: int, size: int = PACK_MIN * 3) -> bytes:
    return (f"{tag:08d}".encode() * (size // 8 + 1))[:size]


def _packs(home: Path) -> list[Path]:
    return sorted((home / "objects" / "packs").glob("*.pack"))


def _rows(home: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(home / "objects" / "objects.sqlite")
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture(autouse=True)
def _no_inline_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every large object to a pack (a batch's first MiB stays inline otherwise)."""
    monkeypatch.setattr(objects_module, "BATCH_INLINE", 0)


def test_a_small_batch_stays_inline_a_big_one_spills_into_a_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(objects_module, "BATCH_INLINE", 2 * len(_big(0)))
    objects = FileObjects(tmp_path)
    with objects.batch() as batch:
        small = [batch.put(_big(i)) for i in range(2)]
    assert _packs(tmp_path) == []
    with objects.batch() as batch:
        names = [batch.put(_big(10 + i)) for i in range(3)]
    assert len(_packs(tmp_path)) == 1
    assert _rows(tmp_path, "SELECT COUNT(*) FROM objects WHERE pack IS NOT NULL") == [(1,)]
    for i, name in enumerate(small):
        assert objects.get(name) == _big(i)
    for i, name in enumerate(names):
        assert objects.get(name) == _big(10 + i)
    objects.close()


def test_a_stored_large_object_put_again_in_an_inline_batch_keeps_its_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An inline batch skips the lookup of its large objects: one already in a
    pack stays there (and its put time is refreshed, for gc's grace)."""
    objects = FileObjects(tmp_path)
    with objects.batch() as batch:
        name = batch.put(_big(1))
    where = "SELECT pack IS NOT NULL, data IS NULL FROM objects"
    assert _rows(tmp_path, where) == [(1, 1)]
    (before,) = _rows(tmp_path, "SELECT at FROM puts")
    monkeypatch.setattr(objects_module, "BATCH_INLINE", 1 << 20)
    time.sleep(0.01)
    with objects.batch() as batch:
        assert batch.put(_big(1)) == name
        fresh = batch.put(_big(2))
    assert _rows(tmp_path, where + " ORDER BY pack IS NULL") == [(1, 1), (0, 0)]
    assert len(_packs(tmp_path)) == 1
    assert objects.get(name) == _big(1) and objects.get(fresh) == _big(2)
    assert _rows(tmp_path, f"SELECT at > {before[0]!r} FROM puts WHERE digest = '{name}'") == [(1,)]
    objects.close()


def test_large_objects_go_to_one_pack_per_batch_small_ones_inline(tmp_path: Path) -> None:
    objects = FileObjects(tmp_path)
    with objects.batch() as batch:
        names = [batch.put(_big(i)) for i in range(5)]
        small = batch.put(b"small")
    assert len(_packs(tmp_path)) == 1
    assert _packs(tmp_path)[0].read_bytes().startswith(MAGIC)
    inline = _rows(tmp_path, "SELECT digest FROM objects WHERE data IS NOT NULL")
    assert inline == [(small,)]
    for i, name in enumerate(names):
        assert objects.get(name) == _big(i) and objects.size(name) == len(_big(i))
    objects.put(_big(0))  # already stored: no new pack, its put time refreshed
    assert len(_packs(tmp_path)) == 1 and names[0] in objects.recent(60)
    objects.close()


def test_a_flipped_byte_in_a_pack_is_reported_with_the_pack_and_offset(tmp_path: Path) -> None:
    objects = FileObjects(tmp_path)
    name = objects.put(_big(7))
    objects.close()
    pack = _packs(tmp_path)[0]
    raw = bytearray(pack.read_bytes())
    raw[len(MAGIC) + 100] ^= 1
    pack.write_bytes(bytes(raw))
    with pytest.raises(BlobDigestError, match="does not match") as err:
        FileObjects(tmp_path).get(name)
    assert str(pack) in str(err.value) and str(len(MAGIC)) in str(err.value)
    with open(pack, "r+b") as f:  # truncated: the same
        f.truncate(len(MAGIC) + 10)
    with pytest.raises(BlobDigestError):
        FileObjects(tmp_path).get(name)
    pack.unlink()
    with pytest.raises(BlobDigestError, match="pack is missing"):
        FileObjects(tmp_path).get(name)


def test_a_failed_batch_leaves_no_pack_and_no_rows(tmp_path: Path) -> None:
    objects = FileObjects(tmp_path)
    with pytest.raises(RuntimeError), objects.batch() as batch:
        name = batch.put(_big(1))
        raise RuntimeError("the snapshot failed")
    assert _packs(tmp_path) == [] and not objects.has(name)
    assert _rows(tmp_path, "SELECT COUNT(*) FROM packs") == [(0,)]
    objects.close()


_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from infai.store.file import objects as objects_module
from infai.store.file.objects import FileObjects
objects_module.BATCH_INLINE = 0
objects_module.GROUP_BYTES = 0  # each large put goes to the pack at once
objects = FileObjects(Path(sys.argv[1]))
with objects.batch() as batch:
    for i in range(20):
        batch.put(str(i).encode() * 5000)
    print("written", flush=True)
    time.sleep(60)
"""


def test_a_batch_killed_midway_leaves_only_an_orphan_gc_removes(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path), str(SRC)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "written"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    assert len(_packs(tmp_path)) == 1  # its bytes, named by no row
    objects = FileObjects(tmp_path)
    name = digest_of(b"0" * 5000)
    with pytest.raises(ObjectNotFound):
        objects.get(name)
    kept = objects.put(_big(3))  # a batch since: its pack is not an orphan
    assert len(_packs(tmp_path)) == 2
    objects.remove([])
    assert _packs(tmp_path) != [] and len(_packs(tmp_path)) == 1
    assert objects.get(kept) == _big(3)
    objects.close()


def test_gc_drops_empty_packs_and_rewrites_sparse_ones(tmp_path: Path) -> None:
    objects = FileObjects(tmp_path)
    with objects.batch() as batch:
        gone = [batch.put(_big(i)) for i in range(3)]
    with objects.batch() as batch:
        sparse = [batch.put(_big(10 + i)) for i in range(4)]
    first, _second = _packs(tmp_path)
    assert objects.remove(gone) == 3 * len(_big(0))
    assert first not in _packs(tmp_path)  # nothing left in it: deleted
    objects.remove(sparse[:3])  # three quarters garbage: rewritten
    (left,) = _packs(tmp_path)
    assert left.stat().st_size == len(MAGIC) + len(_big(13))
    assert objects.get(sparse[3]) == _big(13)
    assert objects.stats() == (1, len(_big(13)))
    objects.close()
    assert FileObjects(tmp_path).get(sparse[3]) == _big(13)


def test_gc_grace_keeps_packed_objects(tmp_path: Path) -> None:
    objects = FileObjects(tmp_path)
    name = objects.put(_big(5))
    assert objects.remove([name], grace=3600) == 0
    assert objects.get(name) == _big(5) and len(_packs(tmp_path)) == 1
    objects.close()


_V2 = """
CREATE TABLE objects (digest TEXT PRIMARY KEY, size INTEGER NOT NULL, data BLOB NOT NULL)
    WITHOUT ROWID;
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO meta (key, value) VALUES ('generation', 4);
CREATE TABLE puts (digest TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID;
PRAGMA user_version = 2;
"""


def test_a_schema_2_database_is_migrated_in_place(tmp_path: Path) -> None:
    (tmp_path / "objects").mkdir()
    conn = sqlite3.connect(tmp_path / "objects" / "objects.sqlite")
    conn.executescript(_V2)
    old_big, old_small = _big(1), b"old small"
    for data in (old_big, old_small):
        name = digest_of(data)
        conn.execute("INSERT INTO objects VALUES (?, ?, ?)", (name, len(data), data))
        conn.execute("INSERT INTO puts VALUES (?, ?)", (name, time.time()))
    conn.commit()
    conn.close()
    with Store(tmp_path) as store:
        objects = store.objects
        assert objects.get(digest_of(old_big)) == old_big  # still inline
        assert objects.get(digest_of(old_small)) == old_small
        assert objects.generation() == 4
        new = objects.put(_big(2))
        assert objects.get(new) == _big(2) and len(_packs(tmp_path)) == 1
        assert objects.remove([digest_of(old_big)]) == len(old_big)
    assert _rows(tmp_path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    sql = _rows(tmp_path, "SELECT sql FROM sqlite_master WHERE name = 'objects'")
    assert "WITHOUT ROWID" not in str(sql[0][0])

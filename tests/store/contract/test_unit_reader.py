"""Unit tests of infai.store.file.reader: path walks, the tree, events and records."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from infai.store import (
    BlobDigestError,
    CompactionRecord,
    CorruptionError,
    Entry,
    Event,
    EventNotFound,
    InvalidInput,
    MessageRecord,
    Store,
    StoreError,
    StoreOptions,
    ToolResultRecord,
)
from infai.store.file.format import INDEX_WIDTH, IndexEntry, encode_index_entry


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Each reading test runs on both backends (file-only ones take ``file_store``)."""
    options = StoreOptions(blob_threshold=200, lock_timeout=0)
    if request.param == "file":
        yield Store(tmp_path / "home", options)
        return
    from infai.store.pg import PgStore

    with PgStore(request.getfixturevalue("pg_url"), options) as pg:
        yield pg


@pytest.fixture
def file_store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home", StoreOptions(blob_threshold=200, lock_timeout=0))


class Tree:
    """a - b - c(compaction) - d - e      (main line, HEAD = e after the branch below)
         \\ f - g                           (f branches from a)
    then HEAD: h after e.
    """

    def __init__(self, store: Store) -> None:
        self.sid = store.create_session().id
        with store.open_writer(self.sid) as w:
            self.a = w.append(msg("a"), "user").id
            self.b = w.append(msg("b"), "assistant").id
            self.c = w.append(CompactionRecord(summary="summary of a, b"), "assistant").id
            self.d = w.append(msg("d"), "user").id
            self.e = w.append(
                ToolResultRecord(call_id="1", name="read", content="E" * 500), "tool"
            ).id
            self.f = w.append(msg("f"), "user", parent=self.a).id
            self.g = w.append(msg("g"), "assistant").id
            self.h = w.append(msg("h"), "user", parent=self.e).id
        self.root = getattr(store, "sessions_dir", Path("/nonexistent")) / self.sid


@pytest.fixture
def tree(store: Store) -> Tree:
    return Tree(store)


@pytest.fixture
def file_tree(file_store: Store) -> Tree:
    return Tree(file_store)


def ids(items: Iterable[Event | Entry]) -> list[str]:
    return [x.id for x in items]


def test_empty_session(store: Store) -> None:
    sid = store.create_session().id
    with store.open_reader(sid) as r:
        assert r.head is None and r.count == 0
        assert r.path() == [] and r.context().events == [] and r.context().boundary is None
        assert list(r.entries()) == [] and r.leaves() == [] and r.roots() == []
        with pytest.raises(EventNotFound):
            r.event(str(uuid.uuid4()))


def test_path_stops_at_compaction(store: Store, tree: Tree) -> None:
    with store.open_reader(tree.sid) as r:
        assert r.head == tree.h
        assert ids(r.path()) == [tree.c, tree.d, tree.e, tree.h]
        assert ids(r.path(to_boundary=False)) == [tree.a, tree.b, tree.c, tree.d, tree.e, tree.h]
        assert ids(r.path(tree.c)) == [tree.c]  # a compaction is its own boundary
        assert ids(r.path(tree.b)) == [tree.a, tree.b]
        assert ids(r.path(tree.g)) == [tree.a, tree.f, tree.g]
        ctx = r.context()
        assert ids(ctx.events) == [tree.c, tree.d, tree.e, tree.h]
        assert ctx.boundary is not None and ctx.boundary.id == tree.c
        assert ctx.events[0].record == CompactionRecord(summary="summary of a, b")
        assert r.context(tree.g).boundary is None


def test_nearest_compaction_wins(store: Store) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(msg("a"), "user")
        w.append(CompactionRecord(summary="one"), "assistant")
        w.append(msg("b"), "user")
        second = w.append(CompactionRecord(summary="two"), "assistant")
        last = w.append(msg("c"), "user")
    with store.open_reader(sid) as r:
        assert ids(r.path()) == [second.id, last.id]


def test_context_resolves_blobs(store: Store, tree: Tree) -> None:
    with store.open_reader(tree.sid) as r:
        events = {e.id: e for e in r.context().events}
        assert events[tree.e].digest is not None
        assert events[tree.e].record == ToolResultRecord(
            call_id="1", name="read", content="E" * 500
        )


def test_context_can_leave_blobs_unread(file_store: Store, file_tree: Tree, tmp_path: Path) -> None:
    store = file_store
    tree = file_tree
    with store.open_reader(tree.sid) as r:
        away = tmp_path / "blobs-away"
        r.paths.blobs.rename(away)  # reading any blob would now fail
        try:
            events = {e.id: e for e in r.context(resolve=False).events}
            assert events[tree.e].record is None and events[tree.e].digest is not None
            assert events[tree.e].preview.startswith("read: EEE")
            with pytest.raises(StoreError):
                r.context()
        finally:
            away.rename(r.paths.blobs)


def test_event_leaves_blob_unresolved(store: Store, tree: Tree) -> None:
    with store.open_reader(tree.sid) as r:
        ev = r.event(tree.e)
        assert ev.record is None and ev.digest is not None and ev.digest.startswith("sha256:")
        assert ev.preview.startswith("read: EEE")
        record = r.resolve(ev)
        assert record == ToolResultRecord(call_id="1", name="read", content="E" * 500)
        assert r.event(tree.e, resolve=True).record == record
        plain = r.event(tree.d)
        assert plain.record == msg("d") and plain.digest is None
        assert r.resolve(plain) == msg("d")


def test_resolve_event_without_record(store: Store, tree: Tree) -> None:
    with store.open_reader(tree.sid) as r:
        ev = r.event(tree.d)
        hollow = Event(**{**{f: getattr(ev, f) for f in Event.__slots__}, "record": None})
        with pytest.raises(InvalidInput):
            r.resolve(hollow)


def test_tree_views(store: Store, tree: Tree) -> None:
    with store.open_reader(tree.sid) as r:
        entries = list(r.entries())
        assert [e.seq for e in entries] == list(range(8))
        assert ids(entries) == [tree.a, tree.b, tree.c, tree.d, tree.e, tree.f, tree.g, tree.h]
        assert ids(r.children(tree.a)) == [tree.b, tree.f]
        assert ids(r.children(tree.e)) == [tree.h]
        assert r.children(tree.h) == []
        assert ids(r.leaves()) == [tree.g, tree.h]
        assert ids(r.roots()) == [tree.a]
        f = r.entry(tree.f)
        assert f.branch_from == tree.a and f.parent_id == tree.a and f.parent_seq == 0
        h = r.entry(tree.h)
        assert h.branch_from == tree.e
        assert r.entry(tree.e).blob is True and r.entry(tree.d).blob is False
        assert r.entry(tree.c).kind == "compaction"


def test_lookups_accept_any_case(store: Store, tree: Tree) -> None:
    with store.open_reader(tree.sid) as r:
        assert r.entry(tree.f.upper()).id == tree.f
        assert r.event(f" {tree.g} ").id == tree.g


def test_unknown_and_bad_ids(store: Store, tree: Tree) -> None:
    unknown = str(uuid.uuid4())
    with store.open_reader(tree.sid) as r:
        for call in (r.event, r.entry, r.seq_of, r.children, r.path, r.context):
            with pytest.raises(EventNotFound) as info:
                call(unknown)
            assert unknown in str(info.value) and tree.sid in str(info.value)
            with pytest.raises(InvalidInput):
                call("../" + tree.a)


def test_reader_is_a_snapshot(store: Store, tree: Tree) -> None:
    with store.open_reader(tree.sid) as r:
        with store.open_writer(tree.sid) as w:
            later = w.append(msg("later"), "user")
        assert r.head == tree.h and r.count == 8
        with pytest.raises(EventNotFound):
            r.event(later.id)
    with store.open_reader(tree.sid) as r2:
        assert r2.head == later.id


def test_reader_changes_nothing_and_sees_committed_prefix(
    file_store: Store, file_tree: Tree
) -> None:
    store = file_store
    tree = file_tree
    chunk = tree.root / "chunks" / "000000.jsonl"
    with chunk.open("ab") as f:
        f.write(b'{"seq":8,"id":"torn')  # a crash's leftover
    (tree.root / "HEAD").write_bytes(b"garbage")
    before = {p.name: p.read_bytes() for p in tree.root.rglob("*") if p.is_file()}
    with store.open_reader(tree.sid) as r:
        assert r.head == tree.h and r.count == 8
        assert ids(r.context().events) == [tree.c, tree.d, tree.e, tree.h]
    after = {p.name: p.read_bytes() for p in tree.root.rglob("*") if p.is_file()}
    assert after == before


def test_reader_fills_unsynced_index_in_memory(file_store: Store, file_tree: Tree) -> None:
    store = file_store
    tree = file_tree
    index = tree.root / "index.jsonl"
    data = index.read_bytes()
    # The last two entries never reached the disk; another one is zeroed.
    index.write_bytes(data[: 5 * INDEX_WIDTH] + b"\x00" * INDEX_WIDTH)
    with store.open_reader(tree.sid) as r:
        assert ids(r.path()) == [tree.c, tree.d, tree.e, tree.h]
        assert [e.seq for e in r.entries()] == list(range(8))
        assert ids(r.leaves()) == [tree.g, tree.h]
        assert r.entry(tree.g).id == tree.g
    assert len(index.read_bytes()) == 6 * INDEX_WIDTH  # still untouched


def test_reader_without_index_file(file_store: Store, file_tree: Tree) -> None:
    store = file_store
    tree = file_tree
    os.unlink(tree.root / "index.jsonl")
    with store.open_reader(tree.sid) as r:
        assert ids(r.path()) == [tree.c, tree.d, tree.e, tree.h]
        assert len(list(r.entries())) == 8
        assert ids(r.children(tree.a)) == [tree.b, tree.f]
        with pytest.raises(EventNotFound):
            r.event(str(uuid.uuid4()))
    assert not (tree.root / "index.jsonl").exists()


def test_damaged_blob_is_refused(file_store: Store, file_tree: Tree) -> None:
    store = file_store
    tree = file_tree
    blob = next((tree.root / "blobs").iterdir())
    blob.write_bytes(blob.read_bytes().replace(b"EEE", b"EEF", 1))
    with store.open_reader(tree.sid) as r:
        ev = r.event(tree.e)  # unresolved: the blob is not read
        with pytest.raises(BlobDigestError):
            r.resolve(ev)
        with pytest.raises(BlobDigestError):
            r.context()
        assert ids(r.context(tree.d).events) == [tree.c, tree.d]


def test_missing_blob_is_corruption(file_store: Store, file_tree: Tree) -> None:
    store = file_store
    tree = file_tree
    blob = next((tree.root / "blobs").iterdir())
    blob.unlink()
    with store.open_reader(tree.sid) as r, pytest.raises(CorruptionError, match="missing"):
        r.context()


def test_damaged_chunk_line_names_file_and_offset(file_store: Store, file_tree: Tree) -> None:
    store = file_store
    tree = file_tree
    with store.open_reader(tree.sid) as r:
        loc = r.entry(tree.d).location
    chunk = tree.root / "chunks" / f"{loc.chunk:06d}.jsonl"
    data = bytearray(chunk.read_bytes())
    data[loc.offset + 30] ^= 0x20
    chunk.write_bytes(bytes(data))
    with store.open_reader(tree.sid) as r:
        with pytest.raises(CorruptionError) as info:
            r.event(tree.d)
        assert info.value.path == str(chunk) and info.value.offset == loc.offset
        with pytest.raises(CorruptionError):
            r.context()
        assert r.event(tree.b).record == msg("b")  # other events still readable


def test_damaged_index_entry_is_detected(file_store: Store, file_tree: Tree) -> None:
    store = file_store
    tree = file_tree
    index = tree.root / "index.jsonl"
    data = bytearray(index.read_bytes())
    data[1 * INDEX_WIDTH + 20] ^= 0x01  # entry #1 (b), long durable
    index.write_bytes(bytes(data))
    with store.open_reader(tree.sid) as r:
        assert ids(r.path()) == [tree.c, tree.d, tree.e, tree.h]  # does not cross #1
        with pytest.raises(CorruptionError) as info:
            r.path(tree.b)
        assert info.value.offset == INDEX_WIDTH


def test_entry_at_out_of_range(file_store: Store, file_tree: Tree) -> None:
    store = file_store
    tree = file_tree
    with store.open_reader(tree.sid) as r:
        for seq in (-1, 8, 100):
            with pytest.raises(EventNotFound):  # no such event: not damage (the contract)
                r.entry_at(seq)
        assert r.entry_at(0).id == tree.a


def test_index_naming_the_wrong_event_is_detected(file_store: Store, file_tree: Tree) -> None:
    store = file_store
    tree = file_tree
    # A well-formed entry whose id disagrees with the chunk line it points at.
    index = tree.root / "index.jsonl"
    data = bytearray(index.read_bytes())
    with store.open_reader(tree.sid) as r:
        entry = r.entry(tree.b)
    stranger = str(uuid.uuid4())
    forged = encode_index_entry(
        IndexEntry(**{**entry.to_obj(), "id": stranger, "location": entry.location})  # type: ignore[arg-type]
    )
    data[entry.seq * INDEX_WIDTH : (entry.seq + 1) * INDEX_WIDTH] = forged
    index.write_bytes(bytes(data))
    with store.open_reader(tree.sid) as r:
        with pytest.raises(CorruptionError, match="chunk says") as info:
            r.event(stranger)
        assert info.value.offset == entry.location.offset

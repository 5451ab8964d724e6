"""Unit tests of infai.store.file.fsck: verification and safe repair."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from infai.store import (
    CompactionRecord,
    MessageRecord,
    Store,
    StoreOptions,
    ToolResultRecord,
)
from infai.store.file.blobs import digest_of
from infai.store.file.format import (
    INDEX_WIDTH,
    ChunkLine,
    decode_chunk_line,
    encode_chunk_line,
)
from infai.store.file.layout import SessionPaths


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(
        tmp_path / "home", StoreOptions(lock_timeout=0, blob_threshold=200, chunk_size=900)
    )


def make_session(store: Store) -> tuple[str, SessionPaths]:
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        a = w.append(msg("a"), "user")
        w.append(ToolResultRecord(call_id="1", name="read", content="R" * 400), "tool")
        w.append(msg("b"), "assistant")
        w.append(msg("c"), "user", parent=a.id)
        w.append_batch([(msg("d"), "assistant"), (CompactionRecord(summary="s"), "assistant")])
        w.append(ToolResultRecord(call_id="1", name="read", content="R" * 400), "tool")  # same blob
        w.append(msg("e"), "user")
    return sid, store.paths(sid)


def test_clean_session(store: Store) -> None:
    sid, paths = make_session(store)
    assert len(paths.chunk_numbers()) > 1
    report = store.fsck(sid)
    assert report.ok
    assert report.session_id == sid
    assert report.events == 8 and report.blobs == 1
    assert report.problems == [] and report.pending_recovery == []
    assert report.orphans == [] and report.repaired == []


def test_empty_session(store: Store) -> None:
    sid = store.create_session().id
    report = store.fsck(sid)
    assert report.ok and report.events == 0


def test_fsck_changes_nothing(store: Store) -> None:
    sid, paths = make_session(store)
    paths.index.unlink()
    (paths.blobs / ("ab" * 32)).write_bytes(b"orphan")
    before = sorted(p.name for p in paths.root.rglob("*"))
    store.fsck(sid)
    assert sorted(p.name for p in paths.root.rglob("*")) == before


def test_orphan_blob_listed_and_removed_by_repair(store: Store) -> None:
    sid, paths = make_session(store)
    data = b'{"content":"never referenced"}'
    orphan = digest_of(data).removeprefix("sha256:")
    (paths.blobs / orphan).write_bytes(data)
    report = store.fsck(sid)
    assert report.orphans == [orphan]
    assert report.problems == []  # harmless
    repaired = store.fsck(sid, repair=True)
    assert repaired.orphans == []
    assert any(orphan in r for r in repaired.repaired)
    assert not (paths.blobs / orphan).exists()
    assert len(os.listdir(paths.blobs)) == 1  # the referenced blob stays
    assert repaired.ok


def test_deleted_index_reported_and_rebuilt(store: Store) -> None:
    sid, paths = make_session(store)
    full = paths.index.read_bytes()
    paths.index.unlink()
    report = store.fsck(sid)
    assert not report.ok
    assert report.pending_recovery or report.problems
    assert all(p.path == str(paths.index) for p in report.problems)
    repaired = store.fsck(sid, repair=True)
    assert repaired.ok, repaired
    assert repaired.repaired
    assert paths.index.read_bytes() == full
    with store.open_reader(sid) as r:
        assert r.count == 8


def test_stale_durable_index_entry_reported_and_rebuilt(store: Store) -> None:
    sid, paths = make_session(store)
    full = paths.index.read_bytes()
    data = bytearray(full)
    data[2 * INDEX_WIDTH + 15] ^= 0x01  # entry #2, long synced: recovery does not look at it
    paths.index.write_bytes(bytes(data))
    report = store.fsck(sid)
    assert [(p.path, p.offset) for p in report.problems] == [(str(paths.index), 2 * INDEX_WIDTH)]
    repaired = store.fsck(sid, repair=True)
    assert repaired.ok
    assert paths.index.read_bytes() == full


def test_damaged_chunk_line_reported_not_altered(store: Store) -> None:
    sid, paths = make_session(store)
    chunk = paths.chunk(0)
    data = bytearray(chunk.read_bytes())
    first_end = data.index(b"\n") + 1
    data[first_end + 25] ^= 0x02  # the second line of the first chunk
    chunk.write_bytes(bytes(data))
    report = store.fsck(sid)
    assert not report.ok
    assert any(p.path == str(chunk) and p.offset == first_end for p in report.problems)
    assert str(chunk) in str(report.problems[0]) or any(
        str(chunk) in str(p) for p in report.problems
    )
    # repair refuses to rewrite damaged chunks: it says so, and the report names the damage
    repaired = store.fsck(sid, repair=True)
    assert repaired.repaired[0].startswith("nothing repaired") and not repaired.ok
    assert any(p.path == str(chunk) and p.offset == first_end for p in repaired.problems)
    assert chunk.read_bytes() == bytes(data)


def test_damaged_blob_reported(store: Store) -> None:
    sid, paths = make_session(store)
    blob = next(paths.blobs.iterdir())
    blob.write_bytes(b"R" + blob.read_bytes()[1:])
    report = store.fsck(sid)
    assert [p.path for p in report.problems] == [str(blob)]
    assert "hashes to" in report.problems[0].detail


def test_missing_blob_reported(store: Store) -> None:
    sid, paths = make_session(store)
    blob = next(paths.blobs.iterdir())
    blob.unlink()
    report = store.fsck(sid)
    assert [p.path for p in report.problems] == [str(blob)]
    assert "missing" in report.problems[0].detail


def test_torn_tail_is_pending_recovery_then_repaired(store: Store) -> None:
    sid, paths = make_session(store)
    last = paths.chunk(paths.chunk_numbers()[-1])
    with last.open("ab") as f:
        f.write(b'{"seq":8,"id":"tor')
    report = store.fsck(sid)
    assert report.problems == []
    assert report.pending_recovery and not report.ok
    repaired = store.fsck(sid, repair=True)
    assert repaired.ok, repaired
    assert any("truncated" in r for r in repaired.repaired)


def test_stale_head_reported_and_repaired(store: Store) -> None:
    sid, paths = make_session(store)
    paths.head.write_bytes(b"")
    report = store.fsck(sid)
    assert not report.ok
    repaired = store.fsck(sid, repair=True)
    assert repaired.ok, repaired


def rewrite_line(paths: SessionPaths, number: int, k: int, **changes: object) -> int:
    """Re-frame the k-th line of a chunk with ``changes`` (a valid checksum); its offset."""
    chunk = paths.chunk(number)
    lines = chunk.read_bytes().splitlines(keepends=True)
    old = decode_chunk_line(lines[k])
    assert old is not None
    fields = {
        name: getattr(old, name)
        for name in (
            "seq",
            "id",
            "parent_id",
            "parent_seq",
            "branch_from",
            "kind",
            "role",
            "timestamp",
            "preview",
            "digest",
            "ixd",
            "batch",
        )
    }
    fields["record"] = None if old.digest else json.dumps(old.record_obj).encode()
    fields.update(changes)
    new = ChunkLine(**fields)
    new.members = old.members
    lines[k] = encode_chunk_line(new)
    chunk.write_bytes(b"".join(lines))
    return sum(len(x) for x in lines[:k])


@pytest.mark.parametrize(
    ("k", "change", "detail"),
    [
        (3, "branch_from", "branch_from differs from parent_id"),
        (2, "duplicate", "duplicate event id"),
        (0, "root_parent_seq", "root event names a parent sequence number"),
        (2, "parent_seq", "is not event #0"),
        (2, "batch", "batch framing"),
        (2, "seq", "follows"),
    ],
)
def test_structural_damage_with_valid_checksums(
    tmp_path: Path, k: int, change: str, detail: str
) -> None:
    store = Store(tmp_path, StoreOptions(lock_timeout=0))
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        ids = [w.append(msg(str(i)), "user").id for i in range(5)]
    paths = store.paths(sid)
    changes: dict[str, object] = {
        "branch_from": {"branch_from": ids[0]},
        "duplicate": {"id": ids[1]},
        "root_parent_seq": {"parent_seq": 3},
        "parent_seq": {"parent_seq": 0},
        "batch": {"batch": (1, 3)},
        "seq": {"seq": 9},
    }[change]  # type: ignore[assignment]
    offset = rewrite_line(paths, 0, k, **changes)
    report = store.fsck(sid)
    assert not report.ok
    hits = [p for p in report.problems if p.path == str(paths.chunk(0)) and p.offset == offset]
    assert any(detail in p.detail for p in hits), report.problems

"""Torn writes, damaged bytes and leftovers: what recovery keeps, cuts and refuses.

Every test builds a real session (single events, blob-sized records, batches,
branches), damages its files the way a crash or a bad disk would, and checks:

* a crash's leftovers (a torn last line, zero-filled bytes, an uncommitted batch,
  a short or missing index, a stale HEAD, temp files) are recovered on open to
  exactly the files as they were before the interrupted append, fsck is clean,
  and a second recovery changes nothing;
* damage a crash cannot produce (a complete line that fails its checksum, a blob
  whose bytes do not match its digest) is reported by file and byte offset and
  never "repaired" away, and a failing open changes nothing on disk.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from infai.store import (
    BlobDigestError,
    CorruptionError,
    Event,
    EventNotFound,
    FileIO,
    MessageRecord,
    Problem,
    Record,
    SessionReader,
    Store,
    StoreIOError,
    StoreOptions,
    ToolCallRecord,
    ToolResultRecord,
)
from infai.store.file.layout import SessionPaths

INDEX_WIDTH = 512
Files = dict[str, bytes]


# -- helpers ---------------------------------------------------------------------


def files(root: Path) -> Files:
    """Every file under ``root`` by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def restore(root: Path, snap: Files) -> None:
    """Make the files under ``root`` exactly ``snap``."""
    for p in list(root.rglob("*")):
        if p.is_file() and str(p.relative_to(root)) not in snap:
            p.unlink()
    for rel, data in snap.items():
        (root / rel).write_bytes(data)


def durable(snap: Files) -> Files:
    """The files that hold the session's state (not the lock, metadata, empty chunks)."""
    return {
        rel: data
        for rel, data in snap.items()
        if rel not in ("LOCK", "session.json") and not (rel.startswith("chunks/") and not data)
    }


def lines_of(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each line, newline included."""
    out, pos = [], 0
    while pos < len(data):
        end = data.index(b"\n", pos) + 1
        out.append((pos, end))
        pos = end
    return out


def key(event: Event) -> tuple[object, ...]:
    """Everything about an event but its (possibly unresolved) record."""
    return (
        event.id,
        event.seq,
        event.parent_id,
        event.branch_from,
        event.kind,
        event.role,
        event.timestamp,
        event.digest,
        event.preview,
    )


def check_event(r: SessionReader, event: Event, record: Record) -> None:
    """``r`` holds ``event`` unchanged; a blob record loads only when resolved."""
    lazy = r.event(event.id)
    assert key(lazy) == key(event)
    if event.digest is None:
        assert lazy.record == record
    else:
        assert lazy.record is None
        assert r.event(event.id, resolve=True).record == record


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01  # never makes a newline or a zero byte out of JSON text
    path.write_bytes(bytes(data))


@dataclass
class Built:
    store: Store
    sid: str
    paths: SessionPaths
    events: list[Event]  # every committed event, in sequence order
    records: list[Record]  # ... and the record each was appended with
    prefix: int  # how many came before the last transaction
    before_last: Files  # the session's files before the last transaction
    after: Files  # ... and after it (writer closed)

    @property
    def root(self) -> Path:
        return self.paths.root

    def last_chunk(self) -> Path:
        return self.paths.chunk(self.paths.chunk_numbers()[-1])

    def reopen(self) -> list[str]:
        """Open a writer (recovery) and close it; return the recovery notes."""
        self.store.open_writer(self.sid, timeout=0).close()
        return self.store.recovery_notes[self.sid]

    def check_events(self, count: int) -> None:
        """Exactly the first ``count`` events are there, unchanged; HEAD is the newest."""
        with self.store.open_reader(self.sid) as r:
            assert r.count == count
            assert r.head == (self.events[count - 1].id if count else None)
            for event, record in zip(self.events[:count], self.records, strict=False):
                check_event(r, event, record)
            for event in self.events[count:]:
                with pytest.raises(EventNotFound):
                    r.event(event.id)
            assert [e.id for e in r.entries()] == [e.id for e in self.events[:count]]
            r.context()  # the active path resolves, blobs verified

    def check_clean(self) -> None:
        report = self.store.fsck(self.sid)
        assert report.problems == [], report.problems
        assert report.ok, report.pending_recovery

    def check_idempotent(self) -> None:
        """A second recovery finds nothing to do and changes no byte."""
        snap = files(self.root)
        assert self.reopen() == []
        assert files(self.root) == snap


def build(
    home: Path,
    *,
    last: Literal["single", "batch", "none"] = "single",
    durability: Literal["fast", "strict"] = "fast",
    chunk_size: int = 4 * 1024 * 1024,
    index_sync_interval: int = 64,
) -> Built:
    """A session with messages, blobs (> 16 KiB), batches and branches.

    The active path is root, #1 (a plain message), #2 (a blob), the first batch,
    then a branch; ``last`` is appended by a second writer after a close.
    """
    options = StoreOptions(
        durability=durability, chunk_size=chunk_size, index_sync_interval=index_sync_interval
    )
    store = Store(home, options)
    sid = store.create_session(name="torn").id
    paths = store.paths(sid)
    events: list[Event] = []
    records: list[Record] = []

    def add(items: list[tuple[Record, str]], parent: int | None = None) -> None:
        records.extend(record for record, _ in items)
        events.extend(w.append_batch(items, parent=None if parent is None else events[parent].id))

    with store.open_writer(sid) as w:
        add([(MessageRecord(content="please read the config file"), "user")])
        add([(MessageRecord(content="reading it now", model="m1"), "assistant")])
        add([(ToolResultRecord(call_id="c1", name="read_file", content="A" * 20_000), "tool")])
        add(
            [
                (ToolCallRecord(call_id="c2", name="grep", arguments={"q": "x"}), "assistant"),
                (ToolResultRecord(call_id="c2", name="grep", content="B" * 18_000), "tool"),
                (MessageRecord(content="found it"), "assistant"),
            ]
        )
        add([(MessageRecord(content="try another way"), "user")], parent=0)
        add([(MessageRecord(content="back to the batch"), "user")], parent=5)
        add([(MessageRecord(content="m1"), "assistant"), (MessageRecord(content="m2"), "user")])
    assert [e.seq for e in events] == list(range(len(events)))
    assert events[6].branch_from == events[0].id and events[7].branch_from == events[5].id
    prefix = len(events)
    before_last = files(paths.root)
    if last != "none":
        with store.open_writer(sid) as w:
            if last == "single":
                add([(MessageRecord(content="the last word " * 8), "user")])
            else:
                add([(MessageRecord(content=f"last batch {i}"), "assistant") for i in range(3)])
    else:
        prefix = len(events) - 2  # the last transaction is the 2-event batch
    return Built(store, sid, paths, events, records, prefix, before_last, files(paths.root))


def assert_corruption_at(exc: CorruptionError, path: Path, offset: int) -> None:
    assert (exc.path, exc.offset) == (str(path), offset), str(exc)
    assert f"{path}: offset {offset}:" in str(exc)


def first_problem(b: Built) -> Problem:
    report = b.store.fsck(b.sid)
    assert not report.ok and report.problems
    return report.problems[0]


# -- (a) the last record torn at every byte -------------------------------------


@pytest.mark.parametrize(
    ("last", "chunk_size", "durability"),
    [
        ("single", 4 * 1024 * 1024, "fast"),
        ("single", 4 * 1024 * 1024, "strict"),
        ("batch", 4 * 1024 * 1024, "fast"),  # the whole batch goes with its last line
        ("single", 1, "fast"),  # every append rotates: the last chunk holds only this record
    ],
    ids=["single", "single-strict", "batch", "alone-in-last-chunk"],
)
@pytest.mark.crash
def test_last_record_torn_at_every_byte(
    tmp_path: Path,
    last: Literal["single", "batch"],
    chunk_size: int,
    durability: Literal["fast", "strict"],
) -> None:
    b = build(tmp_path, last=last, chunk_size=chunk_size, durability=durability)
    chunk = b.last_chunk()
    data = chunk.read_bytes()
    start, end = lines_of(data)[-1]
    assert end == len(data)
    for k in range(start, end):  # keep k bytes: the last line loses end - k of its bytes
        restore(b.root, b.after)
        with open(chunk, "r+b") as f:
            f.truncate(k)
        notes = b.reopen()
        assert notes, f"k={k}: recovery reported nothing"
        # exactly the files as they were before the torn append
        assert durable(files(b.root)) == durable(b.before_last), f"k={k}"
        b.check_events(b.prefix)
        b.check_clean()
        b.check_idempotent()
        if k % 64 == start % 64 or k == end - 1:
            # the writer continues where the committed prefix ends
            with b.store.open_writer(b.sid) as w:
                new = w.append(MessageRecord(content="after recovery"), role="user")
                assert new.seq == b.prefix
                assert new.parent_id == b.events[b.prefix - 1].id
            b.check_clean()


@pytest.mark.parametrize("chunk_size", [4 * 1024 * 1024, 1], ids=["one-chunk", "rotating"])
def test_empty_new_chunk_left_by_a_rotation_is_harmless(tmp_path: Path, chunk_size: int) -> None:
    """A crash right after a rotation created the next chunk, before writing to it."""
    b = build(tmp_path, chunk_size=chunk_size)
    numbers = b.paths.chunk_numbers()
    empty = b.paths.chunk(numbers[-1] + 1)
    empty.write_bytes(b"")
    b.check_events(len(b.events))
    b.reopen()
    b.check_events(len(b.events))
    b.check_clean()
    b.check_idempotent()
    with b.store.open_writer(b.sid) as w:
        new = w.append(MessageRecord(content="into the empty chunk"), role="user")
        assert w.entry(new.id).location.chunk == numbers[-1] + 1
    assert new.parent_id == b.events[-1].id
    b.check_clean()


def test_missing_middle_chunk_is_corruption(tmp_path: Path) -> None:
    b = build(tmp_path, chunk_size=1)
    missing = b.paths.chunk(1)
    missing.unlink()
    damaged = files(b.root)
    with pytest.raises(CorruptionError) as info:
        b.reopen()
    assert_corruption_at(info.value, missing, 0)
    assert files(b.root) == damaged
    with pytest.raises(CorruptionError) as info:
        b.store.open_reader(b.sid)
    assert_corruption_at(info.value, missing, 0)
    assert (str(missing), 0) in [(p.path, p.offset) for p in b.store.fsck(b.sid).problems]
    assert files(b.root) == damaged


# -- (b) the index torn or lost -------------------------------------------------------


def index_cases(size: int) -> Iterator[tuple[str, int | None]]:
    for k in range(size - INDEX_WIDTH, size):
        yield f"last entry cut at byte {k % INDEX_WIDTH}", k
    yield "three entries missing", size - 3 * INDEX_WIDTH
    yield "empty", 0
    yield "deleted", None


@pytest.mark.parametrize(
    ("durability", "interval"),
    [("fast", 64), ("fast", 2), ("strict", 64)],
    ids=["fast", "fast-sync-every-2", "strict"],
)
@pytest.mark.crash
def test_index_torn_or_lost_is_rebuilt(
    tmp_path: Path, durability: Literal["fast", "strict"], interval: int
) -> None:
    b = build(tmp_path, durability=durability, index_sync_interval=interval)
    index = b.paths.index
    size = len(b.after["index.jsonl"])
    assert size == len(b.events) * INDEX_WIDTH
    for what, k in index_cases(size):
        restore(b.root, b.after)
        if k is None:
            index.unlink()
        else:
            with open(index, "r+b") as f:
                f.truncate(k)
        b.check_events(len(b.events))  # a reader needs no recovery to see every event
        assert b.reopen(), what
        assert files(b.root) == b.after, f"{what}: rebuilt index differs"
        b.check_events(len(b.events))
        b.check_clean()
        b.check_idempotent()


# -- (c) a flipped byte in a middle record --------------------------------------------


@pytest.mark.crash
@pytest.mark.parametrize("case", ["index-durable", "index-deleted"])
def test_flipped_byte_in_middle_record_is_reported_by_file_and_offset(
    tmp_path: Path, case: str
) -> None:
    # strict: every line records that the index before it is durable, so recovery
    # need not re-read the middle of the chunk; with the index gone it must.
    b = build(tmp_path, durability="strict")
    chunk = b.paths.chunk(0)
    victim = b.events[1]  # a plain message on the active path, in the middle of chunk 0
    with b.store.open_reader(b.sid) as r:
        loc = r.entry(victim.id).location
    start, end = loc.offset, loc.end
    assert (start, end) in lines_of(b.after["chunks/000000.jsonl"])
    assert start > 0 and end < len(b.after["chunks/000000.jsonl"])
    for pos in range(start, end - 1):  # every byte but the newline
        restore(b.root, b.after)
        if case == "index-deleted":
            b.paths.index.unlink()
        flip(chunk, pos)
        damaged = files(b.root)

        problem = first_problem(b)
        assert (problem.path, problem.offset) == (str(chunk), start), (pos, problem)
        assert files(b.root) == damaged

        try:
            b.reopen()
        except CorruptionError as exc:
            assert_corruption_at(exc, chunk, start)
            opened = False
        else:
            opened = True
        assert files(b.root) == damaged, f"pos {pos}: open changed files"
        if case == "index-deleted":
            assert not opened, "the index was rebuilt past a corrupt line"
            with pytest.raises(CorruptionError) as info:
                b.store.open_reader(b.sid)
            assert_corruption_at(info.value, chunk, start)
            continue
        with b.store.open_reader(b.sid) as r:
            with pytest.raises(CorruptionError) as info:
                r.event(victim.id)
            assert_corruption_at(info.value, chunk, start)
            with pytest.raises(CorruptionError) as info:
                r.context()
            assert_corruption_at(info.value, chunk, start)
            check_event(r, b.events[0], b.records[0])  # the rest still reads
            check_event(r, b.events[-1], b.records[-1])
        # repair does only what is provably safe: the damaged line stays, and is reported
        try:
            report = b.store.fsck(b.sid, repair=True)
        except CorruptionError as exc:
            assert_corruption_at(exc, chunk, start)
        else:
            assert (report.problems[0].path, report.problems[0].offset) == (str(chunk), start)
        assert files(b.root)["chunks/000000.jsonl"] == damaged["chunks/000000.jsonl"]


# -- (d) a blob that does not match its digest -----------------------------------------


@pytest.mark.parametrize("which", [2, 4], ids=["single-blob", "blob-in-batch"])
@pytest.mark.parametrize("damage", ["flip-first", "flip-middle", "flip-last", "cut", "extra"])
def test_tampered_blob_fails_its_digest(tmp_path: Path, which: int, damage: str) -> None:
    b = build(tmp_path)
    event = b.events[which]
    assert event.digest is not None
    blob = b.paths.blob(event.digest)
    data = blob.read_bytes()
    if damage.startswith("flip"):
        pos = {"flip-first": 0, "flip-middle": len(data) // 2, "flip-last": len(data) - 1}[damage]
        flip(blob, pos)
    elif damage == "cut":
        blob.write_bytes(data[:-100])
    else:
        blob.write_bytes(data + b" ")
    damaged = files(b.root)

    b.reopen()  # recovery does not read blobs: opening is fine and changes nothing
    assert durable(files(b.root)) == durable(damaged)
    with b.store.open_reader(b.sid) as r:
        lazy = r.event(event.id)  # unresolved: the blob is not read
        assert key(lazy) == key(event) and lazy.record is None
        with pytest.raises(BlobDigestError) as info:
            r.event(event.id, resolve=True)
        assert_corruption_at(info.value, blob, 0)
        with pytest.raises(BlobDigestError):
            r.resolve(lazy)
        with pytest.raises(BlobDigestError) as info:
            r.context()  # the blob is on the active path
        assert info.value.path == str(blob)
    report = b.store.fsck(b.sid)
    assert [(p.path, p.offset) for p in report.problems] == [(str(blob), 0)], report.problems
    assert not report.ok
    report = b.store.fsck(b.sid, repair=True)
    assert [p.path for p in report.problems] == [str(blob)]
    assert blob.read_bytes() == damaged[str(blob.relative_to(b.root))], "repair touched a blob"


def test_missing_blob_is_reported(tmp_path: Path) -> None:
    b = build(tmp_path)
    event = b.events[2]
    assert event.digest is not None
    blob = b.paths.blob(event.digest)
    blob.unlink()
    with b.store.open_reader(b.sid) as r:
        assert key(r.event(event.id)) == key(event)
        with pytest.raises(CorruptionError) as info:
            r.event(event.id, resolve=True)
        assert info.value.path == str(blob) and "missing" in info.value.detail
    report = b.store.fsck(b.sid)
    assert [p.path for p in report.problems] == [str(blob)]


# -- (e) the last line: invalid, zero-filled, or without its newline ------------------


@pytest.mark.crash
@pytest.mark.parametrize("member", [-1, -2, -3], ids=["last-line", "batch-member", "batch-first"])
def test_complete_invalid_last_line_is_corruption(tmp_path: Path, member: int) -> None:
    b = build(tmp_path, last="batch")
    chunk = b.last_chunk()
    lines = lines_of(b.after["chunks/000000.jsonl"])
    start, end = lines[member]
    # a damaged member of the last batch may be reported at its own line or at the
    # start of its transaction; the closing line is reported at its own line
    allowed = {start} if member == -1 else {start, lines[-3][0]}
    for pos in range(start, end - 1):
        restore(b.root, b.after)
        flip(chunk, pos)
        damaged = files(b.root)
        with pytest.raises(CorruptionError) as info:
            b.reopen()
        assert info.value.path == str(chunk) and info.value.offset in allowed, (pos, info.value)
        assert f"{chunk}: offset {info.value.offset}:" in str(info.value)
        assert files(b.root) == damaged, f"pos {pos}: a failing open changed files"
        with pytest.raises(CorruptionError) as info:
            b.store.open_reader(b.sid)
        assert info.value.path == str(chunk) and info.value.offset in allowed
        report = b.store.fsck(b.sid)
        assert not report.ok
        assert report.problems[0].offset in allowed and report.problems[0].path == str(chunk)
        assert (str(chunk), start) in [(p.path, p.offset) for p in report.problems]
        assert files(b.root) == damaged


def torn_tails(data: bytes, start: int) -> Iterator[tuple[str, bytes, bool]]:
    """(name, chunk bytes, whether the last line survives) for crash-shaped tails."""
    for n in (1, 17, 511, 4096):
        yield f"{n} zero bytes appended", data + b"\x00" * n, True
    yield "a torn line then zeros", data + data[start : start + 40] + b"\x00" * 300, True
    yield "no trailing newline", data[:-1], False
    for cut in (start, start + 1, (start + len(data)) // 2, len(data) - 2):
        zeros = b"\x00" * (len(data) - cut)
        yield f"last line zero-filled from byte {cut - start}", data[:cut] + zeros, False


@pytest.mark.parametrize("last", ["single", "batch"])
def test_zero_filled_or_unterminated_tail_is_torn(tmp_path: Path, last: str) -> None:
    b = build(tmp_path, last="single" if last == "single" else "batch")
    chunk = b.last_chunk()
    rel = str(chunk.relative_to(b.root))
    data = b.after[rel]
    start, _ = lines_of(data)[-1]
    for name, damaged, survives in torn_tails(data, start):
        restore(b.root, b.after)
        chunk.write_bytes(damaged)
        assert b.reopen(), name
        if survives:
            assert files(b.root) == b.after, name
            b.check_events(len(b.events))
        else:
            assert durable(files(b.root)) == durable(b.before_last), name
            b.check_events(b.prefix)
        b.check_clean()
        b.check_idempotent()


# -- (f) recovery is idempotent; HEAD and leftovers ------------------------------------


class DieBeforeRename(FileIO):
    """Fails the first rename onto a matching path, as if the process died right there."""

    def __init__(self, onto: Callable[[str], bool]) -> None:
        super().__init__()
        self.onto = onto
        self.fired = False

    def rename(self, src: str, dst: str) -> None:
        if not self.fired and self.onto(dst):
            self.fired = True
            raise OSError(errno.EIO, f"injected: died before renaming {src} onto {dst}")
        super().rename(src, dst)


def is_head(path: str) -> bool:
    return os.path.basename(path) == "HEAD"


def is_blob(path: str) -> bool:
    return os.path.basename(os.path.dirname(path)) == "blobs"


def damage(b: Built, kinds: list[str]) -> int:
    """Leave what a crash leaves; return how many events it committed but never acked."""
    committed = 0
    for kind in kinds:
        chunk = b.last_chunk()
        if kind == "torn-tail":
            data = chunk.read_bytes()
            chunk.write_bytes(data + data[:150] + b"\x00" * 64)
        elif kind == "index":
            with open(b.paths.index, "r+b") as f:
                f.truncate(len(b.events) * INDEX_WIDTH - INDEX_WIDTH - 100)
        elif kind == "stale-head":
            b.paths.head.write_bytes(b.before_last["HEAD"])
        elif kind == "garbage-head":
            b.paths.head.write_bytes(b"\x00" * 40)
        elif kind == "no-head":
            b.paths.head.unlink()
        elif kind in ("blob-temp", "strict-append-head-rename"):
            # a writer dies after writing a blob's temp file, or (strict) after the
            # chunk, the temp HEAD and the index, before HEAD is renamed into place
            blob = kind == "blob-temp"
            io = DieBeforeRename(is_blob if blob else is_head)
            options = StoreOptions(durability="fast" if blob else "strict")
            w = Store(b.store.home, options, io).open_writer(b.sid)
            record = ToolResultRecord(call_id="c7", name="run", content="D" * 30_000)
            with pytest.raises(StoreIOError):
                w.append(
                    record if blob else MessageRecord(content="committed, never acked"), "tool"
                )
            w.close()
            assert io.fired
            committed += 0 if blob else 1
        elif kind == "recovery-head-rename":
            # recovery itself dies while replacing a stale HEAD
            b.paths.head.write_bytes(b.before_last["HEAD"])
            io = DieBeforeRename(is_head)
            with pytest.raises(OSError):
                Store(b.store.home, io=io).open_writer(b.sid)
            assert io.fired
        else:
            raise AssertionError(kind)
    return committed


DAMAGE = {
    "torn-tail": ["torn-tail"],
    "index": ["index"],
    "stale-head": ["stale-head"],
    "garbage-head": ["garbage-head"],
    "no-head": ["no-head"],
    "blob-temp-leftover": ["blob-temp"],
    # what a kill inside the strict sequence leaves: a temp HEAD, the old HEAD
    "strict-append-died-before-head-rename": ["strict-append-head-rename"],
    # ... and a kill inside recovery's own HEAD replacement (any durability)
    "recovery-died-before-head-rename": ["recovery-head-rename"],
    "torn-tail+index+stale-head+blob-temp": ["torn-tail", "index", "stale-head", "blob-temp"],
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_recovery_twice_changes_nothing_the_second_time(tmp_path: Path, name: str) -> None:
    b = build(tmp_path, durability="strict")
    extra = damage(b, DAMAGE[name])
    b.reopen()
    after_first = files(b.root)
    # no leftover of any kind remains, and nothing else was created
    assert sorted(durable(after_first)) == sorted(durable(b.after)), "leftovers remain"
    if extra:
        with b.store.open_reader(b.sid) as r:
            assert r.count == len(b.events) + extra
            event = r.event(r.entry_at(r.count - 1).id, resolve=True)
            assert event.record == MessageRecord(content="committed, never acked")
            assert event.parent_id == b.events[-1].id and r.head == event.id
            b.events.append(event)
            b.records.append(event.record)
    else:
        assert durable(after_first) == durable(b.after), "recovery did not restore the files"
    b.check_events(len(b.events))
    b.check_clean()
    assert b.reopen() == []
    assert files(b.root) == after_first
    b.check_idempotent()


# -- (g) an uncommitted batch tail is discarded whole -----------------------------------


@pytest.mark.crash
@pytest.mark.parametrize("chunk_size", [4 * 1024 * 1024, 1], ids=["same-chunk", "new-chunk"])
def test_uncommitted_batch_tail_is_discarded_whole(tmp_path: Path, chunk_size: int) -> None:
    b = build(tmp_path / "real", last="single", chunk_size=chunk_size)
    # append a batch in a scratch copy, and take the bytes it wrote
    scratch_home = tmp_path / "scratch"
    shutil.copytree(tmp_path / "real", scratch_home)
    scratch = Store(scratch_home, StoreOptions(chunk_size=chunk_size))
    with scratch.open_writer(b.sid) as w:
        batch = w.append_batch(
            [
                (MessageRecord(content="step one of four"), "assistant"),
                (ToolResultRecord(call_id="c9", name="run", content="C" * 30_000), "tool"),
                (MessageRecord(content="step three of four"), "assistant"),
                (MessageRecord(content="step four of four"), "assistant"),
            ]
        )
    scratch_files = files(scratch.paths(b.sid).root)
    real_chunks = b.paths.chunk_numbers()
    last_rel = f"chunks/{real_chunks[-1]:06d}.jsonl"
    if chunk_size == 1:  # the batch went to a chunk of its own
        target_rel = f"chunks/{real_chunks[-1] + 1:06d}.jsonl"
        tail = scratch_files[target_rel]
        base = b""
    else:
        target_rel = last_rel
        base = b.after[last_rel]
        assert scratch_files[target_rel].startswith(base)
        tail = scratch_files[target_rel][len(base) :]
    assert len(lines_of(tail)) == 4
    assert batch[1].digest is not None
    blob_rel = str(b.paths.blob(batch[1].digest).relative_to(b.root))
    boundaries = {end for _, end in lines_of(tail)}
    offsets = sorted({0, *boundaries, *range(0, len(tail), 7)} - {len(tail)})

    target = b.root / target_rel
    for k in [*offsets, len(tail)]:
        restore(b.root, b.after)
        # the blob is made durable before any line that names it
        (b.root / blob_rel).write_bytes(scratch_files[blob_rel])
        target.write_bytes(base + tail[:k])
        b.reopen()
        report = b.store.fsck(b.sid)
        assert report.problems == [] and report.ok, (k, report)
        if k < len(tail):
            b.check_events(len(b.events))
            want = durable(b.after)
            assert durable(files(b.root)) == {**want, blob_rel: scratch_files[blob_rel]}, k
            assert report.orphans == [blob_rel.removeprefix("blobs/")]
        else:
            with b.store.open_reader(b.sid) as r:
                assert r.count == len(b.events) + 4
                assert [key(r.event(e.id)) for e in batch] == [key(e) for e in batch]
                assert r.head == batch[-1].id
            assert durable(files(b.root)) == durable(scratch_files)
        b.check_idempotent()


def test_truncated_last_chunk_is_recovered_by_a_reader_without_changes(tmp_path: Path) -> None:
    """A reader sees the committed prefix of a torn session and never writes."""
    b = build(tmp_path, last="batch")
    chunk = b.last_chunk()
    data = chunk.read_bytes()
    chunk.write_bytes(data[:-10])
    damaged = files(b.root)
    b.check_events(b.prefix)
    assert files(b.root) == damaged
    report = b.store.fsck(b.sid)  # reports what recovery will do, and changes nothing
    assert report.pending_recovery and not report.ok
    assert files(b.root) == damaged
    assert b.reopen()
    b.check_events(b.prefix)
    b.check_clean()

"""Unit tests of infai.store.file.writer: the durable append path."""

from __future__ import annotations

import errno
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from infai.store import (
    NIL_ID,
    CompactionRecord,
    EventNotFound,
    FileIO,
    InvalidInput,
    MessageRecord,
    Record,
    SessionWriter,
    Store,
    StoreError,
    StoreIOError,
    StoreOptions,
    ToolCallRecord,
    ToolResultRecord,
    Usage,
)
from infai.store.records import encode_record

RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class RecordingIO(FileIO):
    """Records (operation, file name) for every write-path call."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, str]] = []
        self.names: dict[int, str] = {}

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        self.names[fd] = os.path.basename(path)
        self.ops.append(("open", os.path.basename(path)))
        return fd

    def fsync(self, fd: int) -> None:
        self.ops.append(("fsync", self.names.get(fd, "?")))
        super().fsync(fd)

    def fdatasync(self, fd: int) -> None:
        self.ops.append(("fdatasync", self.names.get(fd, "?")))
        super().fdatasync(fd)

    def rename(self, src: str, dst: str) -> None:
        self.ops.append(("rename", os.path.basename(dst)))
        super().rename(src, dst)

    def fsync_dir(self, path: str) -> None:
        self.ops.append(("fsync_dir", os.path.basename(path)))
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def syncs(self) -> list[tuple[str, str]]:
        return [op for op in self.ops if op[0] in ("fsync", "fdatasync", "fsync_dir", "rename")]


class FailingSyncIO(FileIO):
    """fdatasync fails with EIO while ``fail`` is set."""

    def __init__(self) -> None:
        self.fail = False

    def fdatasync(self, fd: int) -> None:
        if self.fail:
            raise OSError(errno.EIO, "Input/output error")
        super().fdatasync(fd)


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Each test of the append contract runs on both backends (file-only ones take
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


@pytest.fixture
def writer(store: Store) -> Any:
    sid = store.create_session().id
    w = store.open_writer(sid)
    yield w
    w.close()


def state(store: Any, sid: str) -> Any:
    """Everything stored for a session: its files, or its rows as read back."""
    if isinstance(store, Store):
        return snapshot(store.sessions_dir / sid)
    with store.open_reader(sid) as reader:
        return reader.head, [repr(e) for e in reader.entries()], store.info(sid).to_obj()


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under the session directory except the lock."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            if name != "LOCK":
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


# -- the event an append returns -------------------------------------------------------


def test_append_returns_durable_event(store: Store, writer: SessionWriter) -> None:
    ev = writer.append(msg("hi"), "user")
    assert uuid.UUID(ev.id).version == 7
    assert ev.id == str(uuid.UUID(ev.id))  # canonical lower-case form
    assert RFC3339_Z.match(ev.timestamp)
    assert ev.parent_id == NIL_ID and ev.branch_from is None
    assert ev.kind == "message" and ev.role == "user" and ev.seq == 0
    assert ev.record == msg("hi") and ev.digest is None and ev.preview == "hi"
    assert writer.head == ev.id and writer.count == 1
    # Durable: a reader opened now (no writer close) sees exactly this event.
    with store.open_reader(writer.session_id) as r:
        assert r.head == ev.id
        assert r.event(ev.id) == ev


def test_ids_are_unique_uuid7(writer: SessionWriter) -> None:
    events = [writer.append(msg(str(i)), "user") for i in range(30)]
    assert [e.seq for e in events] == list(range(30))
    assert len({e.id for e in events}) == 30
    for ev in events:
        assert uuid.UUID(ev.id).version == 7


def test_linear_appends_chain_to_head(writer: SessionWriter) -> None:
    a = writer.append(msg("a"), "user")
    b = writer.append(msg("b"), "assistant")
    c = writer.append(msg("c"), "user", parent=b.id)  # explicit parent == HEAD: no branch
    assert b.parent_id == a.id and c.parent_id == b.id
    assert b.branch_from is None and c.branch_from is None
    assert [e.id for e in writer.path()] == [a.id, b.id, c.id]


def test_append_after_older_event_branches_and_moves_head(writer: SessionWriter) -> None:
    a = writer.append(msg("try A"), "user")
    writer.append(msg("A fails"), "assistant")
    b = writer.append(msg("try B"), "user", parent=a.id)
    assert b.parent_id == a.id and b.branch_from == a.id
    assert writer.head == b.id
    assert [e.id for e in writer.path()] == [a.id, b.id]
    c = writer.append(msg("continue"), "assistant")
    assert c.parent_id == b.id and c.branch_from is None


def test_append_with_unknown_or_bad_parent(store: Store, writer: SessionWriter) -> None:
    writer.append(msg("a"), "user")
    before = state(store, writer.session_id)
    with pytest.raises(EventNotFound):
        writer.append(msg("x"), "user", parent=str(uuid.uuid4()))
    with pytest.raises(InvalidInput):
        writer.append(msg("x"), "user", parent="../../etc")
    assert state(store, writer.session_id) == before


def test_blob_record(tmp_path: Path) -> None:
    store = Store(tmp_path, StoreOptions(blob_threshold=100))
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        big = ToolResultRecord(call_id="c", name="read", content="z" * 500)
        ev = w.append(big, "tool")
        again = w.append(big, "tool")
        small = w.append(msg("small"), "user")
    digest = encode_record(big)
    assert ev.digest is not None and ev.digest == again.digest
    assert small.digest is None
    blobs = os.listdir(store.sessions_dir / sid / "blobs")
    assert blobs == [ev.digest.removeprefix("sha256:")]
    assert (store.sessions_dir / sid / "blobs" / blobs[0]).read_bytes() == digest
    chunk = (store.sessions_dir / sid / "chunks" / "000000.jsonl").read_bytes()
    assert b"z" * 100 not in chunk  # the payload lives only in the blob (and the preview)
    first = json.loads(chunk.splitlines()[0])
    assert first["record"] is None and first["digest"] == ev.digest


def test_blob_threshold_is_exclusive(tmp_path: Path) -> None:
    rec = msg("q" * 50)
    size = len(encode_record(rec))
    store = Store(tmp_path, StoreOptions(blob_threshold=size))
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        assert w.append(rec, "user").digest is None
        assert w.append(msg("q" * 51), "user").digest is not None


# -- two-phase selection ---------------------------------------------------------------------


def test_select_is_memory_only_until_append(store: Store, writer: SessionWriter) -> None:
    a = writer.append(msg("a"), "user")
    b = writer.append(msg("b"), "assistant")
    before = state(store, writer.session_id)
    writer.select(a.id)
    assert writer.pending_parent == a.id
    assert writer.head == b.id
    assert state(store, writer.session_id) == before  # nothing on disk changed
    with store.open_reader(writer.session_id) as r:
        assert r.head == b.id
    c = writer.append(msg("c"), "user")
    assert c.parent_id == a.id and c.branch_from == a.id
    assert writer.head == c.id
    assert writer.pending_parent is None  # the selection is consumed


def test_select_head_or_none_clears(writer: SessionWriter) -> None:
    a = writer.append(msg("a"), "user")
    b = writer.append(msg("b"), "user")
    writer.select(a.id)
    writer.select(None)
    assert writer.pending_parent is None
    writer.select(a.id)
    writer.select(b.id.upper())  # HEAD itself, in any case
    assert writer.pending_parent is None
    c = writer.append(msg("c"), "user")
    assert c.parent_id == b.id and c.branch_from is None


def test_select_unknown_keeps_selection(writer: SessionWriter) -> None:
    a = writer.append(msg("a"), "user")
    writer.append(msg("b"), "user")
    writer.select(a.id)
    with pytest.raises(EventNotFound):
        writer.select(str(uuid.uuid4()))
    with pytest.raises(InvalidInput):
        writer.select("not-an-id")
    assert writer.pending_parent == a.id


def test_explicit_parent_overrides_selection(writer: SessionWriter) -> None:
    a = writer.append(msg("a"), "user")
    b = writer.append(msg("b"), "user")
    writer.append(msg("c"), "user")
    writer.select(a.id)
    d = writer.append(msg("d"), "user", parent=b.id)
    assert d.parent_id == b.id and d.branch_from == b.id
    assert writer.pending_parent is None


def test_selection_does_not_survive_reopen(store: Store) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        a = w.append(msg("a"), "user")
        b = w.append(msg("b"), "user")
        w.select(a.id)
    with store.open_writer(sid) as w:
        assert w.pending_parent is None
        c = w.append(msg("c"), "user")
    assert c.parent_id == b.id


# -- batches ---------------------------------------------------------------------------------


def test_append_batch_chains_parents(store: Store, writer: SessionWriter) -> None:
    a = writer.append(msg("a"), "user")
    writer.append(msg("b"), "user")
    items: list[tuple[Record, str]] = [
        (ToolCallRecord(call_id="1", name="read", arguments={"p": "x"}), "assistant"),
        (ToolResultRecord(call_id="1", name="read", content="data"), "tool"),
        (msg("done"), "assistant"),
    ]
    got = writer.append_batch(items, parent=a.id)
    assert [e.seq for e in got] == [2, 3, 4]
    assert got[0].parent_id == a.id and got[0].branch_from == a.id
    assert got[1].parent_id == got[0].id and got[1].branch_from is None
    assert got[2].parent_id == got[1].id and got[2].branch_from is None
    assert [e.record for e in got] == [r for r, _ in items]
    assert writer.head == got[-1].id
    if isinstance(store, Store):  # on disk: the batch is marked as one
        lines = (store.sessions_dir / writer.session_id / "chunks" / "000000.jsonl").read_bytes()
        batch = [json.loads(x).get("batch") for x in lines.splitlines()]
        assert batch == [None, None, [0, 3], [1, 3], [2, 3]]


def test_empty_batch_writes_nothing(store: Store, writer: SessionWriter) -> None:
    a = writer.append(msg("a"), "user")
    writer.append(msg("b"), "user")
    writer.select(a.id)
    before = state(store, writer.session_id)
    assert writer.append_batch([]) == []
    assert state(store, writer.session_id) == before
    assert writer.pending_parent == a.id


def test_batch_is_one_sync(tmp_path: Path) -> None:
    io = RecordingIO()
    store = Store(tmp_path, io=io)
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(msg("first"), "user")
        io.ops.clear()
        w.append_batch([(msg(str(i)), "user") for i in range(10)])
        assert io.syncs() == [("fdatasync", "000000.jsonl")]


def test_batch_never_spans_chunks(tmp_path: Path) -> None:
    store = Store(tmp_path, StoreOptions(chunk_size=600))
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        for round_ in range(6):
            w.append_batch([(msg(f"{round_}-{i}"), "user") for i in range(4)])
    chunks = sorted(os.listdir(store.sessions_dir / sid / "chunks"))
    assert len(chunks) == 6
    for name in chunks:
        lines = (store.sessions_dir / sid / "chunks" / name).read_bytes().splitlines()
        assert [json.loads(x)["batch"] for x in lines] == [[i, 4] for i in range(4)]


# -- invalid input writes nothing ----------------------------------------------------------------


@pytest.mark.parametrize(
    "role", ["", "User", "1st", "_x", "-x", "a b", "ü", "a" * 33, "a/b", "a\n", "assistant!"]
)
def test_invalid_role_rejected(store: Store, writer: SessionWriter, role: str) -> None:
    writer.append(msg("a"), "user")
    before = state(store, writer.session_id)
    with pytest.raises(InvalidInput, match="role"):
        writer.append(msg("x"), role)
    with pytest.raises(InvalidInput, match="role"):
        writer.append_batch([(msg("ok"), "user"), (msg("x"), role)])
    assert state(store, writer.session_id) == before
    assert writer.count == 1


@pytest.mark.parametrize("role", ["a", "user", "tool_result", "sub-agent-2", "a" * 32])
def test_valid_roles(writer: SessionWriter, role: str) -> None:
    assert writer.append(msg("x"), role).role == role


def test_non_record_rejected(store: Store, writer: SessionWriter) -> None:
    before = state(store, writer.session_id)
    for bad in ({"content": "x"}, "text", None, b'{"content":"x"}', object()):
        with pytest.raises(InvalidInput):
            writer.append(bad, "user")  # type: ignore[arg-type]
    assert state(store, writer.session_id) == before
    assert writer.count == 0


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(MessageRecord(content=123), id="content-int"),  # type: ignore[arg-type]
        pytest.param(MessageRecord(content="x", reasoning=5), id="reasoning-int"),  # type: ignore[arg-type]
        pytest.param(MessageRecord(content="x", metadata={"k": object()}), id="metadata-object"),
        pytest.param(
            ToolCallRecord(call_id="c", name="n", arguments="x"),  # type: ignore[arg-type]
            id="arguments-str",
        ),
        pytest.param(CompactionRecord(summary="s", goals=[1]), id="goals-int"),  # type: ignore[list-item]
        pytest.param(
            MessageRecord(content="x", usage=Usage(input_tokens=1.5)),  # type: ignore[arg-type]
            id="usage-float",
        ),
        pytest.param(MessageRecord(content="bad \udcff byte"), id="lone-surrogate"),
        pytest.param(MessageRecord(content="x", metadata={"f": float("nan")}), id="nan-not-json"),
    ],
)
def test_record_not_matching_its_type_rejected(
    store: Store, writer: SessionWriter, bad: Record
) -> None:
    """A record that would not decode again must be refused, not made durable.

    Record classes do not validate their fields at construction, so a caller can build
    e.g. ``MessageRecord(content="x", reasoning=5)`` (a typo, or a value taken from a
    provider's response). Persisted, such an event fails strict decoding on every
    ``event()`` read (InvalidInput) while ``context()`` hands the wrong-typed record
    back unchecked; NaN is written as bare ``NaN``, which is not JSON; a lone surrogate
    escapes as ``UnicodeEncodeError``. The writer must reject all of these up front
    with InvalidInput, writing nothing.
    """
    writer.append(msg("ok"), "user")
    before = state(store, writer.session_id)
    with pytest.raises(InvalidInput):
        writer.append(bad, "user")
    with pytest.raises(InvalidInput):
        writer.append_batch([(msg("fine"), "user"), (bad, "user")])
    assert state(store, writer.session_id) == before
    assert writer.count == 1
    assert [e.record for e in writer.context().events] == [msg("ok")]


# -- I/O errors poison the writer --------------------------------------------------


def test_failed_sync_poisons_the_writer(tmp_path: Path) -> None:
    io = FailingSyncIO()
    store = Store(tmp_path, StoreOptions(lock_timeout=0), io=io)
    sid = store.create_session().id
    w = store.open_writer(sid)
    try:
        a = w.append(msg("a"), "user")
        io.fail = True
        with pytest.raises(StoreIOError) as info:
            w.append(msg("b"), "user")
        assert isinstance(info.value, OSError)
        assert info.value.errno == errno.EIO
        io.fail = False  # even once the device recovers, the fsync is not retried
        with pytest.raises(StoreIOError, match="earlier write failed"):
            w.append(msg("c"), "user")
        with pytest.raises(StoreIOError):
            w.append_batch([(msg("d"), "user")])
        assert w.head == a.id  # nothing unacknowledged is reported as HEAD
    finally:
        w.close()
    # Reopening runs recovery from what is on disk; the session is usable again.
    with store.open_writer(sid) as w2:
        e = w2.append(msg("e"), "user")
        assert w2.head == e.id
    report = store.fsck(sid)
    assert report.ok, report


def test_closed_writer_refuses_writes(store: Store) -> None:
    sid = store.create_session().id
    w = store.open_writer(sid)
    w.append(msg("a"), "user")
    w.close()
    w.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        w.append(msg("b"), "user")
    with store.open_writer(sid):  # the lock was released
        pass


# -- the write sequences ----------------------------------------------------------


def test_fast_sequence_is_one_fdatasync(tmp_path: Path) -> None:
    io = RecordingIO()
    store = Store(tmp_path, StoreOptions(index_sync_interval=1000), io=io)
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(msg("first"), "user")
        io.ops.clear()
        for i in range(5):
            w.append(msg(str(i)), "user")
        assert io.syncs() == [("fdatasync", "000000.jsonl")] * 5


def test_first_append_touches_session_json(file_store: Store) -> None:
    store = file_store
    sid = store.create_session().id
    created = store.info(sid).updated_at
    with store.open_writer(sid) as w:
        assert store.info(sid).updated_at == created  # opening alone changes nothing
        w.append(msg("a"), "user")
        touched = store.info(sid).updated_at
        assert touched > created
        w.append(msg("b"), "user")
        assert store.info(sid).updated_at == touched  # once per writer


def test_index_synced_every_interval(tmp_path: Path) -> None:
    io = RecordingIO()
    store = Store(tmp_path, StoreOptions(index_sync_interval=4), io=io)
    sid = store.create_session().id
    io.ops.clear()
    with store.open_writer(sid) as w:
        for i in range(13):
            w.append(msg(str(i)), "user")
        index_syncs = [op for op in io.ops if op == ("fsync", "index.jsonl")]
        assert len(index_syncs) == 3
    lines = (store.sessions_dir / sid / "chunks" / "000000.jsonl").read_bytes().splitlines()
    ixd = [json.loads(x)["ixd"] for x in lines]
    assert ixd == [0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12]


def test_strict_sequence_order(tmp_path: Path) -> None:
    io = RecordingIO()
    store = Store(tmp_path, StoreOptions(durability="strict"), io=io)
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(msg("first"), "user")
        io.ops.clear()
        w.append(msg("second"), "user")
        syncs = io.syncs()
    chunk_sync = next(i for i, op in enumerate(syncs) if op[1] == "000000.jsonl")
    head_tmp_sync = syncs.index(("fsync", "HEAD.tmp"))
    index_sync = syncs.index(("fsync", "index.jsonl"))
    rename = syncs.index(("rename", "HEAD"))
    dir_sync = syncs.index(("fsync_dir", sid))
    assert chunk_sync < head_tmp_sync < index_sync < rename < dir_sync
    assert not (store.sessions_dir / sid / "HEAD.tmp").exists()


def test_rotation_creates_contiguous_chunks(tmp_path: Path) -> None:
    io = RecordingIO()
    store = Store(tmp_path, StoreOptions(chunk_size=1000), io=io)
    sid = store.create_session().id
    io.ops.clear()
    with store.open_writer(sid) as w:
        for i in range(20):
            w.append(msg(f"message {i}"), "user")
    chunk_dir = store.sessions_dir / sid / "chunks"
    names = sorted(os.listdir(chunk_dir))
    assert names == [f"{n:06d}.jsonl" for n in range(len(names))]
    assert len(names) > 3
    for name in names[:-1]:
        size = (chunk_dir / name).stat().st_size
        assert 1000 <= size < 1000 + 400  # closed once full, after one more event at most
    # Each new chunk's directory entry was made durable before it was written to
    # (plus once when the writer opened, settling what an earlier writer left).
    assert io.ops.count(("fsync_dir", "chunks")) == len(names) + 1
    with store.open_reader(sid) as r:
        assert [e.location.chunk for e in r.entries()] == sorted(
            e.location.chunk for e in r.entries()
        )
        assert len(r.context().events) == 20


def test_rotation_continues_after_reopen(tmp_path: Path) -> None:
    store = Store(tmp_path, StoreOptions(chunk_size=700))
    sid = store.create_session().id
    for round_ in range(4):
        with store.open_writer(sid) as w:
            for i in range(3):
                w.append(msg(f"{round_}.{i}"), "user")
    with store.open_reader(sid) as r:
        assert [e.record for e in r.context().events] == [
            msg(f"{a}.{b}") for a in range(4) for b in range(3)
        ]
    assert store.fsck(sid).ok

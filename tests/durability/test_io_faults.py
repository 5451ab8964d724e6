"""Injected I/O errors on the write path: fail loudly, poison the writer, lose nothing.

A :class:`FaultIO` performs the real operations (syncs skipped: no power is lost
here) and raises ``OSError(EIO)`` or ``OSError(ENOSPC)`` on the Nth call of one
operation once armed. For every operation kind and every N over a small append
workload (single appends, a batch, a blob, a branch, chunk rotation, index
syncs), in both durability modes:

* the failing append raises :class:`StoreIOError` carrying the errno, and is not
  acknowledged;
* every later write on that writer raises :class:`StoreIOError` without touching
  the disk, and no fsync is ever retried (not even by ``close``);
* after reopening with a healthy io, every acknowledged event is intact (parent,
  record, blob), the failed transaction is either wholly present or wholly absent,
  fsck finds nothing, and the session accepts new appends.

Also: a write that fails after writing part of its bytes (ENOSPC mid-line), a
write that only ever writes half of what it is given (the store must loop), and
a failure in the middle of recovery itself (the next healthy open must finish it).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fsmodel import NoSyncIO
from infai.store import (
    NIL_ID,
    FileIO,
    MessageRecord,
    Record,
    Store,
    StoreIOError,
    StoreOptions,
    ToolCallRecord,
    ToolResultRecord,
)

OPS = ("write", "pwrite", "fsync", "fdatasync", "rename", "fsync_dir", "open")
SYNCS = ("fsync", "fdatasync", "fsync_dir")


class FaultIO(FileIO):
    """Real operations (without the syncs); once armed, fails the Nth call of ``op``.

    ``partial``: the failing call of ``write``/``pwrite`` first writes half its
    bytes and returns that count, and the next call (the store's retry of the
    rest) fails with ENOSPC, leaving a torn line on disk.
    ``half``: every write/pwrite writes at most half (rounded up) of its bytes.
    """

    def __init__(
        self, op: str = "", nth: int = 0, err: int = errno.EIO, *, partial: bool = False
    ) -> None:
        self.op, self.nth, self.err, self.partial = op, nth, err, partial
        self.half = False
        self.armed = False
        self.calls: Counter[str] = Counter()
        self.log: list[str] = []
        self.fired_at: int | None = None  # index in ``log`` of the failing call
        self._fail_next_write = False

    def _hit(self, name: str) -> bool:
        """Count the call; raise if it is the one to fail; True if it is to be partial."""
        if not self.armed:
            return False
        self.log.append(name)
        self.calls[name] += 1
        if self._fail_next_write and name in ("write", "pwrite"):
            self._fail_next_write = False
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if name == self.op and self.calls[name] == self.nth:
            self.fired_at = len(self.log) - 1
            if self.partial and name in ("write", "pwrite"):
                self._fail_next_write = True
                return True
            raise OSError(self.err, os.strerror(self.err))
        return False

    def _cut(self, data: bytes, partial: bool) -> bytes:
        if partial or (self.half and len(data) > 1):
            return data[: (len(data) + 1) // 2]
        return data

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        self._hit("open")
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        if self.armed:
            self.log.append("close")
        os.close(fd)

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, self._cut(data, self._hit("write")))

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return os.pwrite(fd, self._cut(data, self._hit("pwrite")), offset)

    def fsync(self, fd: int) -> None:
        self._hit("fsync")

    def fdatasync(self, fd: int) -> None:
        self._hit("fdatasync")

    def ftruncate(self, fd: int, length: int) -> None:
        self._hit("ftruncate")
        os.ftruncate(fd, length)

    def rename(self, src: str, dst: str) -> None:
        self._hit("rename")
        os.replace(src, dst)

    def unlink(self, path: str) -> None:
        self._hit("unlink")
        os.unlink(path)

    def mkdir(self, path: str) -> None:
        self._hit("mkdir")
        os.mkdir(path, 0o755)

    def fsync_dir(self, path: str) -> None:
        self._hit("fsync_dir")


def options(mode: str) -> StoreOptions:
    return StoreOptions(chunk_size=900, index_sync_interval=2, durability=mode)  # type: ignore[arg-type]


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


BIG = ToolResultRecord(call_id="t2", name="cat", content="x" * 20_000)


@dataclass(frozen=True)
class Step:
    name: str
    items: list[tuple[Record, str]]
    parent: str | None = None  # name of an earlier step whose first event to follow


STEPS = [
    Step("a", [(msg("one"), "user")]),
    Step("b", [(msg("two"), "assistant")]),
    Step(
        "batch",
        [
            (ToolCallRecord(call_id="t1", name="ls", arguments={"p": "."}), "assistant"),
            (ToolResultRecord(call_id="t1", name="ls", content="a b"), "tool"),
            (msg("two files"), "assistant"),
        ],
    ),
    Step("blob", [(BIG, "tool")]),
    Step("branch", [(msg("another way"), "user")], parent="a"),
    Step("c", [(msg("three"), "assistant")]),
    Step("blob-again", [(BIG, "tool"), (msg("same payload"), "assistant")]),
    Step("d", [(msg("four"), "user")]),
]


@dataclass
class Acked:
    id: str
    parent_id: str
    record: Record


@dataclass
class Outcome:
    sid: str
    acked: list[Acked] = field(default_factory=list)
    failed: Step | None = None
    error: StoreIOError | None = None
    log_at_failure: int = 0
    #: calls made by the appends (before ``close``, whose index fsync is best-effort)
    calls: Counter[str] = field(default_factory=Counter)


def run(home: Path, mode: str, io: FaultIO) -> Outcome:
    """Create a session (io disarmed), then arm ``io`` and append STEPS until one fails."""
    store = Store(home, options=options(mode), io=io)
    sid = store.create_session(name="faults").id
    w = store.open_writer(sid)
    out = Outcome(sid)
    first_of: dict[str, str] = {}
    io.armed = True
    try:
        for step in STEPS:
            parent = first_of[step.parent] if step.parent else None
            try:
                events = w.append_batch(step.items, parent=parent)
            except StoreIOError as exc:
                out.failed, out.error, out.log_at_failure = step, exc, len(io.log)
                break
            first_of[step.name] = events[0].id
            for event, (record, _role) in zip(events, step.items, strict=True):
                out.acked.append(Acked(event.id, event.parent_id, record))
        if out.failed is not None:
            # Poisoned: every later write is refused before it reaches the disk.
            attempts: list[Callable[[], object]] = [
                lambda: w.append(msg("retry"), "user"),
                lambda: w.append_batch([(msg("x"), "user"), (msg("y"), "assistant")]),
                lambda: w.append(BIG, "tool"),
                lambda: (
                    w.append(msg("on a branch"), "user", parent=out.acked[0].id)
                    if out.acked
                    else w.append(msg("z"), "user")
                ),
            ]
            for attempt in attempts:
                with pytest.raises(StoreIOError):
                    attempt()
            assert len(io.log) == out.log_at_failure, io.log[out.log_at_failure :]
    finally:
        out.calls = Counter(io.calls)
        w.close()
        io.armed = False
    return out


def check_after_reopen(home: Path, mode: str, out: Outcome) -> None:
    """Reopen with a healthy io: everything acknowledged is there, nothing half-done."""
    store = Store(home, options=options(mode), io=NoSyncIO())
    with store.open_writer(out.sid) as w:
        ids = [e.id for e in w.entries()]
        assert ids[: len(out.acked)] == [a.id for a in out.acked]
        for a in out.acked:
            event = w.event(a.id, resolve=True)
            assert event.parent_id == a.parent_id
            assert event.record == a.record
            if a.parent_id != NIL_ID:
                w.event(a.parent_id)
        extra = ids[len(out.acked) :]
        if out.failed is None:
            assert extra == []
        else:
            # The failed transaction may have committed before the error (it was
            # then not acknowledged), but only whole.
            assert len(extra) in (0, len(out.failed.items)), (out.failed.name, len(extra))
            for eid, (record, _role) in zip(extra, out.failed.items, strict=False):
                assert w.event(eid, resolve=True).record == record
        assert w.head == (ids[-1] if ids else None)
        if ids:
            assert w.context().events[-1].id == ids[-1]
    report = store.fsck(out.sid)
    assert report.problems == [], [str(p) for p in report.problems]
    assert report.pending_recovery == [], report.pending_recovery
    with store.open_writer(out.sid) as w:
        new = w.append(msg("after the fault"), "user")
    with store.open_reader(out.sid) as r:
        assert r.head == new.id and r.count == len(ids) + 1
    assert store.fsck(out.sid).problems == []


def call_counts(tmp_path: Path, mode: str) -> Counter[str]:
    io = FaultIO()
    out = run(tmp_path / "count", mode, io)
    assert out.failed is None and len(out.acked) == sum(len(s.items) for s in STEPS)
    check_after_reopen(tmp_path / "count", mode, out)
    return out.calls


class Findings:
    """Failures collected over a loop, reported together (grouped) at the end."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self.tried = 0

    def check(self, where: str, body: Callable[[], None]) -> None:
        self.tried += 1
        try:
            body()
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            self.items.append((where, f"{type(exc).__name__}: {first}"))

    def report(self, label: str) -> None:
        if not self.items:
            return
        kinds: dict[str, list[str]] = {}
        for where, problem in self.items:
            kind = re.sub(r"/\S*/sessions/[0-9a-f-]{36}/", "", problem)
            kinds.setdefault(kind, []).append(where)
        lines = [
            f"  {len(v):3d} x {k}\n        at: {'; '.join(v[:6])}{' ...' if len(v) > 6 else ''}"
            for k, v in sorted(kinds.items(), key=lambda kv: -len(kv[1]))
        ]
        pytest.fail(
            f"{len(self.items)} of {self.tried} injected faults break the store ({label}):\n"
            + "\n".join(lines),
            pytrace=False,
        )


@pytest.mark.parametrize("mode", ["fast", "strict"])
@pytest.mark.parametrize("op", OPS)
def test_every_failing_call_is_contained(tmp_path: Path, mode: str, op: str) -> None:
    counts = call_counts(tmp_path, mode)
    assert counts[op] > 0, f"the workload never calls {op}"
    findings = Findings()
    for nth in range(1, counts[op] + 1):
        for err in (errno.EIO, errno.ENOSPC):
            home = tmp_path / f"{op}-{nth}-{err}"
            where = f"{op} #{nth} {errno.errorcode[err]}"

            def one(home: Path = home, nth: int = nth, err: int = err, where: str = where) -> None:
                io = FaultIO(op, nth, err)
                out = run(home, mode, io)
                assert out.failed is not None, f"{where}: no append failed"
                assert out.error is not None and out.error.errno == err, out.error
                assert isinstance(out.error.__cause__, OSError)
                assert io.fired_at is not None
                # The failing fsync is never retried, before or at close.
                later = io.log[io.fired_at + 1 :]
                assert not [c for c in later if c in SYNCS], f"synced after the failure: {later}"
                check_after_reopen(home, mode, out)

            findings.check(where, one)
    findings.report(f"{mode}, {op}")


@pytest.mark.parametrize("mode", ["fast", "strict"])
@pytest.mark.parametrize("op", ["write", "pwrite"])
def test_write_failing_after_part_of_its_bytes(tmp_path: Path, mode: str, op: str) -> None:
    """ENOSPC after half a line reached the file: the torn bytes never become an event."""
    counts = call_counts(tmp_path, mode)
    findings = Findings()
    for nth in range(1, counts[op] + 1):
        home = tmp_path / f"{op}-{nth}"

        def one(home: Path = home, nth: int = nth) -> None:
            out = run(home, mode, FaultIO(op, nth, partial=True))
            assert out.failed is not None, "no append failed"
            assert out.error is not None and out.error.errno == errno.ENOSPC, out.error
            check_after_reopen(home, mode, out)

        findings.check(f"{op} #{nth} half then ENOSPC", one)
    findings.report(f"{mode}, partial {op}")


@pytest.mark.parametrize("mode", ["fast", "strict"])
def test_short_writes_are_completed(tmp_path: Path, mode: str) -> None:
    """A write that stores only half of what it is given: the store loops until done."""
    io = FaultIO()
    io.half = True
    out = run(tmp_path / "half", mode, io)
    assert out.failed is None
    assert len(out.acked) == sum(len(s.items) for s in STEPS)
    # Every write really was split: at least twice as many write calls as a normal run.
    normal = call_counts(tmp_path, mode)
    assert io.calls["write"] >= 2 * normal["write"]
    assert io.calls["pwrite"] >= 2 * normal["pwrite"]
    check_after_reopen(tmp_path / "half", mode, out)


def damage(home: Path, sid: str) -> None:
    """Leave what a crash could: a torn line at the end of the last chunk, a stale
    HEAD, and index entries missing (truncated) and torn (zeroed)."""
    root = home / "sessions" / sid
    last = sorted((root / "chunks").iterdir())[-1]
    with open(last, "ab") as f:
        f.write(b'{"seq":99,"id":"torn')
    index = root / "index.jsonl"
    size = index.stat().st_size
    with open(index, "r+b") as f:
        f.truncate(size - 512)
        f.seek(size - 1024)
        f.write(b"\0" * 100)
    head = root / "HEAD"
    head.write_bytes(b"")


@pytest.mark.parametrize("mode", ["fast", "strict"])
def test_failure_during_recovery_is_finished_by_the_next_open(tmp_path: Path, mode: str) -> None:
    ref = tmp_path / "ref"
    out = run(ref, mode, FaultIO())
    damage(ref, out.sid)
    # What recovery does (with a healthy io) on this damage:
    probe = FaultIO()
    probe.armed = True
    shutil.copytree(ref, tmp_path / "probe")
    Store(tmp_path / "probe", options=options(mode), io=probe).open_writer(out.sid).close()
    assert probe.calls["ftruncate"] and probe.calls["pwrite"] and probe.calls["rename"]
    findings = Findings()
    for op in ("open", "write", "pwrite", "ftruncate", "fsync", "rename", "unlink", "fsync_dir"):
        for nth in range(1, probe.calls[op] + 1):
            home = tmp_path / f"rec-{op}-{nth}"
            shutil.copytree(ref, home)

            def one(home: Path = home, op: str = op, nth: int = nth) -> None:
                io = FaultIO(op, nth, errno.EIO)
                io.armed = True
                with pytest.raises(OSError):
                    Store(home, options=options(mode), io=io).open_writer(out.sid)
                assert io.fired_at is not None
                check_after_reopen(home, mode, out)

            findings.check(f"recovery {op} #{nth}", one)
    assert findings.tried >= 5
    findings.report(f"{mode}, failure during recovery")

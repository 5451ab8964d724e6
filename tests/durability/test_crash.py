"""Crash tests with real processes, and writers/readers in separate processes.

A child (``tests/support/crash_child.py``) opens a writer and appends in a loop, printing
``BEGIN`` before each append call and ``ACK`` lines only once the call returned.
The parent SIGKILLs it at a random moment (after a random number of acks plus a
random delay, or at a random time after the spawn, which can land in the child's
start-up or recovery), then checks what is provable:

* every acknowledged event is present, with the parent, seq, ``branch_from``,
  kind and payload the child intended;
* at most the one append call in flight when the kill landed is committed beyond
  the acks, and then *all* of its events (a batch is all-or-nothing);
* HEAD names the newest committed event: the last acknowledged one, or the last
  event of that in-flight call;
* a reader sees exactly that before any recovery; recovery (``open_writer``)
  leaves ``fsck`` clean, and a second recovery finds nothing to do.

The run is seeded (``INFAI_CRASH_SEED``) so the operation mix and kill plan
reproduce; ``INFAI_CRASH_SCALE`` multiplies the number of kills for a soak run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

import pytest

from infai.store import (
    NIL_ID,
    Entry,
    MessageRecord,
    SessionReader,
    Store,
    StoreOptions,
    ToolResultRecord,
    WriterLocked,
)

CHILD = Path(__file__).resolve().parents[1] / "support" / "crash_child.py"
BASE_SEED = int(os.environ.get("INFAI_CRASH_SEED", "20240611"))
SCALE = float(os.environ.get("INFAI_CRASH_SCALE", "1"))
SHARED_TAG = "shared"
SHARED_LENGTH = 20 * 1024


def content_for(tag: str, length: int) -> str:
    """Must match ``crash_child.content_for``."""
    head = tag + ":"
    filler = "x" if tag != SHARED_TAG else "s"
    return head + filler * (length - len(head))


# -- the child process ---------------------------------------------------------


class Child:
    """A running ``crash_child.py``; stdout is collected line by line by a thread."""

    def __init__(self, home: Path, session: str, mode: str, *args: str, stdin: bool = False):
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(home), session, mode, *args],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
        )
        self.lines: list[str] = []
        self.acks = 0
        self.eof = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode().rstrip("\n")
            with self._cond:
                self.lines.append(line)
                if line.startswith("ACK "):
                    self.acks += 1
                self._cond.notify_all()
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    def wait_until(self, pred: Callable[[Child], bool], timeout: float = 20.0) -> None:
        with self._cond:
            ok = self._cond.wait_for(lambda: pred(self) or self.eof, timeout)
        if not ok:
            self.kill()
            pytest.fail(f"child {self.pid} made no progress in {timeout}s\n{self.describe()}")

    def wait_line(self, prefix: str, timeout: float = 20.0) -> str:
        self.wait_until(lambda c: any(x.startswith(prefix) for x in c.lines), timeout)
        for line in self.snapshot():
            if line.startswith(prefix):
                return line
        self.finish()
        pytest.fail(f"child {self.pid} ended without printing {prefix!r}\n{self.describe()}")

    def snapshot(self) -> list[str]:
        with self._cond:
            return list(self.lines)

    def kill(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        return self.finish()

    def finish(self, timeout: float = 60.0) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait()
        self._thread.join(10)
        return code

    def describe(self) -> str:
        self.stderr.seek(0)
        err = self.stderr.read().decode(errors="replace")
        tail = "\n".join(self.snapshot()[-8:])
        return f"--- stdout (tail) ---\n{tail}\n--- stderr ---\n{err}"

    def close(self) -> None:
        self.kill()  # a no-op unless a failed check left the child running
        self.stderr.close()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


# -- what the child said -------------------------------------------------------


@dataclass(frozen=True)
class Ack:
    seq: int
    id: str
    parent_id: str
    branch_from: str | None


@dataclass
class Op:
    """One append call: ``BEGIN`` and the ``ACK`` lines that followed it (if any)."""

    number: int
    parent: str
    branch_from: str | None
    specs: list[tuple[str, str, int]]
    acks: list[Ack] = field(default_factory=list)


@dataclass(frozen=True)
class Ready:
    count: int
    head: str | None
    waited: float


def parse(lines: Iterable[str]) -> tuple[Ready | None, list[Op]]:
    ready: Ready | None = None
    ops: list[Op] = []
    for line in lines:
        word, *rest = line.split(" ")
        if word == "READY":
            ready = Ready(int(rest[0]), None if rest[1] == "-" else rest[1], float(rest[2]))
        elif word == "BEGIN":
            number, n, parent, branch = int(rest[0]), int(rest[1]), rest[2], rest[3]
            specs = []
            for spec in rest[4:]:
                kind, tag, length = spec.split(":")
                specs.append((kind, tag, int(length)))
            assert len(specs) == n, line
            ops.append(Op(number, parent, None if branch == "-" else branch, specs))
        elif word == "ACK":
            op = ops[-1]
            assert int(rest[0]) == op.number and int(rest[1]) == len(op.acks), line
            op.acks.append(Ack(int(rest[2]), rest[3], rest[4], None if rest[5] == "-" else rest[5]))
        elif word not in ("OPENING", "CLOSED", "LOCKED"):
            raise AssertionError(f"unexpected child output {line!r}")
    return ready, ops


# -- the model of what must be in the session ------------------------------------


@dataclass(frozen=True)
class Known:
    seq: int
    parent_id: str
    branch_from: str | None
    kind: str
    tag: str
    length: int


def check_payload(reader: SessionReader, event_id: str, known: Known, where: str) -> None:
    event = reader.event(event_id, resolve=True)
    record = event.record
    want = content_for(known.tag, known.length)
    if known.kind == "message":
        assert isinstance(record, MessageRecord), where
    else:
        assert isinstance(record, ToolResultRecord), where
    assert record.content == want, f"{where}: payload of {event_id} differs"
    assert (event.digest is not None) == (known.length > 16 * 1024), where


class Model:
    """Every event known to be committed, in sequence order."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.known: dict[str, Known] = {}

    def seq_of(self, event_id: str) -> int:
        return -1 if event_id == NIL_ID else self.known[event_id].seq

    def absorb(
        self,
        reader: SessionReader,
        ready: Ready | None,
        ops: list[Op],
        where: str,
        committed: int | None = None,
    ) -> int:
        """Check one child's output against ``reader`` and learn its events.

        ``committed`` is how many events the session holds after this child (default:
        what ``reader`` sees). Returns how many in-flight, unacknowledged events turned
        out to be committed.
        """
        base = len(self.ids)
        if ready is not None:
            assert ready.count == base, f"{where}: child recovered {ready.count} events, not {base}"
            assert ready.head == (self.ids[-1] if self.ids else None), where
        for op in ops[:-1]:
            assert op.acks, f"{where}: op {op.number} has no acks but a later op began"
        acked = base + sum(len(op.specs) for op in ops if op.acks)
        in_flight = ops[-1] if ops and not ops[-1].acks else None
        allowed = {acked}
        if in_flight is not None:
            allowed.add(acked + len(in_flight.specs))
        count = reader.count if committed is None else committed
        assert count in allowed, (
            f"{where}: {count} events committed; acknowledged {acked}, "
            f"in flight {len(in_flight.specs) if in_flight else 0} (all or nothing)"
        )
        included = [op for op in ops if op.acks]
        if in_flight is not None and count > acked:
            included.append(in_flight)
        seq = base
        for op in included:
            prev = op.parent
            assert prev == NIL_ID or prev in self.known, f"{where}: op {op.number} parent unknown"
            for i, (kind, tag, length) in enumerate(op.specs):
                entry = reader.entry_at(seq)
                what = f"{where}: op {op.number} event {i} (#{seq})"
                branch = op.branch_from if i == 0 else None
                if i < len(op.acks):
                    ack = op.acks[i]
                    assert ack == Ack(seq, entry.id, prev, branch), f"{what}: ack {ack} vs {entry}"
                assert entry.parent_id == prev, f"{what}: wrong parent"
                assert entry.parent_seq == self.seq_of(prev), f"{what}: wrong parent seq"
                assert entry.branch_from == branch, f"{what}: wrong branch_from"
                assert entry.kind == kind, what
                known = Known(seq, prev, branch, kind, tag, length)
                check_payload(reader, entry.id, known, what)
                self.known[entry.id] = known
                self.ids.append(entry.id)
                prev = entry.id
                seq += 1
        return count - acked

    def check_all(self, reader: SessionReader, where: str, deep: bool = False) -> None:
        """The session holds exactly the known events, and HEAD is the newest.

        Every entry is compared with the model; chunk lines are loaded for the newest
        events and a spread of older ones (``deep``: all of them, blobs resolved).
        """
        assert reader.count == len(self.ids), f"{where}: {reader.count} != {len(self.ids)}"
        entries = list(reader.entries())
        assert [e.id for e in entries] == self.ids, f"{where}: event ids differ from the model"
        for e in entries:
            k = self.known[e.id]
            assert (e.seq, e.parent_id, e.parent_seq, e.branch_from, e.kind) == (
                k.seq,
                k.parent_id,
                self.seq_of(k.parent_id),
                k.branch_from,
                k.kind,
            ), f"{where}: entry {e} differs from the model"
        assert reader.head == (self.ids[-1] if self.ids else None), f"{where}: HEAD"
        n = len(self.ids)
        for seq in range(n) if deep else sorted({*range(max(0, n - 100), n), *range(0, n, 13)}):
            event_id = self.ids[seq]
            event = reader.event(event_id)
            assert (event.seq, event.parent_id) == (seq, self.known[event_id].parent_id), where
            if deep:
                check_payload(reader, event_id, self.known[event_id], where)
        # the active path, walked from HEAD through the index, matches the parent links
        chain: list[str] = []
        at = self.ids[-1] if self.ids else NIL_ID
        while at != NIL_ID:
            chain.append(at)
            at = self.known[at].parent_id
        chain.reverse()
        assert [e.id for e in reader.path()] == chain, f"{where}: path from HEAD"
        if deep:
            assert [e.id for e in reader.context().events] == chain, f"{where}: context"


def recover_and_check(store: Store, sid: str, model: Model, where: str) -> None:
    """Recover (open_writer + close); then fsck is clean and recovery is idempotent."""
    try:
        w = store.open_writer(sid, timeout=5)
    except Exception as exc:
        raise AssertionError(f"{where}: open_writer (recovery) failed: {exc!r}") from exc
    with w:
        assert w.count == len(model.ids), f"{where}: writer sees {w.count} events"
        assert w.head == (model.ids[-1] if model.ids else None), f"{where}: writer HEAD"
    report = store.fsck(sid)
    assert report.problems == [], f"{where}: fsck problems {report.problems}"
    assert report.ok, f"{where}: fsck pending recovery {report.pending_recovery}"
    assert report.events == len(model.ids)
    store.open_writer(sid, timeout=5).close()
    assert store.recovery_notes[sid] == [], f"{where}: second recovery did something"
    with store.open_reader(sid) as r:
        model.check_all(r, where + " after recovery")


def acks_at_least(n: int) -> Callable[[Child], bool]:
    return lambda c: c.acks >= n


def failed(child: Child, code: int, want: int, where: str) -> str:
    return f"{where}: child exited with {code}, expected {want}\n{child.describe()}"


# -- SIGKILL loops -----------------------------------------------------------------


@dataclass(frozen=True)
class LoopConfig:
    name: str
    durability: Literal["fast", "strict"]
    chunk_size: int
    blob_share: float
    batch_share: float
    kills: int


LOOPS = [
    # small chunks: several rotations per child, so kills land around rotation too
    LoopConfig("fast-rotating", "fast", 2048, 0.12, 0.25, 36),
    LoopConfig("strict-rotating", "strict", 2048, 0.12, 0.25, 36),
    # blob-heavy: kills land between a blob's write and its event's write
    LoopConfig("fast-blobs", "fast", 64 * 1024, 0.5, 0.35, 26),
    LoopConfig("strict-blobs", "strict", 64 * 1024, 0.5, 0.35, 26),
]


@pytest.mark.crash
@pytest.mark.parametrize("cfg", LOOPS, ids=[c.name for c in LOOPS])
def test_sigkill_loop(tmp_path: Path, cfg: LoopConfig) -> None:
    seed = BASE_SEED + LOOPS.index(cfg)
    rng = random.Random(seed)
    options = StoreOptions(chunk_size=cfg.chunk_size, durability=cfg.durability)
    store = Store(tmp_path, options)
    sid = store.create_session(name=cfg.name).id
    model = Model()
    kills = landed_in_flight = 0
    rounds = max(1, round(cfg.kills * SCALE))
    for rnd in range(rounds):
        where = f"[seed {seed} round {rnd}]"
        child = Child(
            tmp_path,
            sid,
            "loop",
            f"--seed={seed * 1000 + rnd}",
            f"--label=r{rnd}",
            f"--durability={cfg.durability}",
            f"--chunk-size={cfg.chunk_size}",
            f"--blob-share={cfg.blob_share}",
            f"--batch-share={cfg.batch_share}",
        )
        try:
            if rng.random() < 0.7:
                target = rng.randrange(0, 25)
                child.wait_until(acks_at_least(target))
                delay = rng.choice([0.0, rng.uniform(0, 0.002), rng.uniform(0, 0.01)])
            else:
                delay = rng.uniform(0.0, 0.15)  # often before READY: start-up or recovery
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline:
                pass
            code = child.kill()
            assert code == -signal.SIGKILL, failed(child, code, -signal.SIGKILL, where)
            kills += 1
            ready, ops = parse(child.snapshot())
        finally:
            child.close()

        # a reader sees the committed state before anything is recovered
        with store.open_reader(sid) as r:
            landed_in_flight += model.absorb(r, ready, ops, where) > 0
            model.check_all(r, where + " before recovery")
        # most rounds recover here; otherwise the next child's open_writer recovers,
        # and the next kill may land inside that recovery
        if rnd == rounds - 1 or rng.random() < 0.75:
            recover_and_check(store, sid, model, where)

    with store.open_reader(sid) as r:
        model.check_all(r, f"[seed {seed}] final", deep=True)
    assert kills == rounds
    assert len(model.ids) > rounds, "the children appended almost nothing: kills came too early"
    if cfg.chunk_size < 4096:
        assert len(store.paths(sid).chunk_numbers()) > 5, "chunks never rotated"
    print(f"{cfg.name}: {kills} kills, {len(model.ids)} events, {landed_in_flight} in flight")


# -- two writer processes, one session ------------------------------------------


def chain_groups(
    entries: Sequence[Entry], children: dict[str, list[str]]
) -> dict[str, list[tuple[int, str]]]:
    """Acknowledged events as (seq, id), grouped per writer session (``label`` + round)."""
    seq_of = {e.id: e.seq for e in entries}
    groups: dict[str, list[tuple[int, str]]] = {}
    for label, lines in children.items():
        rnd = -1
        for line in lines:
            if line.startswith("READY"):
                rnd += 1
            elif line.startswith("ACK "):
                event_id = line.split(" ")[4]
                assert event_id in seq_of, f"acknowledged event {event_id} of {label} lost"
                groups.setdefault(f"{label}{rnd}", []).append((seq_of[event_id], event_id))
    return groups


def test_two_writers_wait_for_each_other(tmp_path: Path) -> None:
    store = Store(tmp_path)
    sid = store.create_session().id
    rounds, per_round = 4, 6
    common = [f"--rounds={rounds}", f"--per-round={per_round}", "--lock-timeout=30"]
    release = tmp_path / "release-A"
    a = Child(tmp_path, sid, "chain", "--label=A", "--seed=1", f"--hold-file={release}", *common)
    b: Child | None = None
    try:
        a.wait_line("READY")  # A holds the lock until `release` exists
        b = Child(tmp_path, sid, "chain", "--label=B", "--seed=2", *common)
        b.wait_line("OPENING")
        time.sleep(0.3)
        assert not any(x.startswith("READY") for x in b.snapshot()), "lock not exclusive"
        release.touch()
        code_a, code_b = a.finish(), b.finish()
        assert code_a == 0, failed(a, code_a, 0, "A")
        assert code_b == 0, failed(b, code_b, 0, "B")
        lines = {"A": a.snapshot(), "B": b.snapshot()}
    finally:
        a.close()
        if b is not None:
            b.close()

    # B really had to wait for A's lock
    b_ready = [parse([x])[0] for x in lines["B"] if x.startswith("READY")]
    assert b_ready[0] is not None and b_ready[0].waited > 0.25, b_ready
    with store.open_reader(sid) as r:
        entries = list(r.entries())
        assert len(entries) == 2 * rounds * per_round
        # one linear chain in sequence order: every writer appended after the HEAD it found
        for prev, e in zip([None, *entries], entries, strict=False):
            assert e.parent_id == (prev.id if prev else NIL_ID), e
            assert e.parent_seq == (prev.seq if prev else -1), e
            assert e.branch_from is None
        groups = chain_groups(entries, lines)
        assert sorted(groups) == [f"{c}{n}" for c in "AB" for n in range(rounds)]
        for name, group in groups.items():
            seqs = [s for s, _ in group]
            # each writer session's events are contiguous: nothing interleaved
            assert seqs == list(range(seqs[0], seqs[0] + per_round)), (name, seqs)
            for s, event_id in group:
                event = r.event(event_id, resolve=True)
                assert isinstance(event.record, MessageRecord)
                assert event.record.content.startswith(f"{name}."), (name, s)
        assert r.head == entries[-1].id
    report = store.fsck(sid)
    assert report.ok and report.problems == [], report


def test_second_writer_fails_fast_naming_the_holder(tmp_path: Path) -> None:
    store = Store(tmp_path, StoreOptions(lock_timeout=0))
    sid = store.create_session().id
    holder = Child(tmp_path, sid, "hold", stdin=True)
    try:
        holder.wait_line("READY")
        # another process, timeout 0: fails at once, naming the holder's pid
        t0 = time.monotonic()
        other = Child(tmp_path, sid, "try", "--lock-timeout=0")
        try:
            code = other.finish()
            assert code == 3, failed(other, code, 3, "try")
            locked = other.wait_line("LOCKED")
        finally:
            other.close()
        assert time.monotonic() - t0 < 5
        assert f"pid {holder.pid})" in locked, locked
        assert sid in locked, locked
        # in this process too, with timeout 0 and with a short timeout
        with pytest.raises(WriterLocked, match=rf"session {sid} .*\(pid {holder.pid}\)"):
            store.open_writer(sid)
        t0 = time.monotonic()
        with pytest.raises(WriterLocked, match=r"gave up after 0\.3s"):
            store.open_writer(sid, timeout=0.3)
        assert time.monotonic() - t0 >= 0.3
        # readers never take the lock
        with store.open_reader(sid) as r:
            assert r.count == 0
        # the holder lets go: now the lock is free
        assert holder.proc.stdin is not None
        holder.proc.stdin.close()
        code = holder.finish()
        assert code == 0, failed(holder, code, 0, "hold")
    finally:
        holder.close()
    store.open_writer(sid).close()


@pytest.mark.crash
def test_killed_holder_never_leaves_a_stale_lock(tmp_path: Path) -> None:
    store = Store(tmp_path, StoreOptions(lock_timeout=0))
    sid = store.create_session().id
    for i in range(3):
        holder = Child(tmp_path, sid, "hold", stdin=True)
        try:
            holder.wait_line("READY")
            with pytest.raises(WriterLocked):
                store.open_writer(sid)
            assert holder.kill() == -signal.SIGKILL
        finally:
            holder.close()
        w = store.open_writer(sid)  # timeout 0: the kernel released the dead holder's lock
        w.append(MessageRecord(content=f"after kill {i}"), role="user")
        w.close()
    assert store.fsck(sid).ok


@pytest.mark.crash
def test_waiting_writer_takes_over_from_a_killed_writer(tmp_path: Path) -> None:
    seed = BASE_SEED + 100
    store = Store(tmp_path, StoreOptions(chunk_size=4096))
    sid = store.create_session().id
    model = Model()
    looper = Child(tmp_path, sid, "loop", f"--seed={seed}", "--chunk-size=4096", "--label=L")
    waiter: Child | None = None
    try:
        looper.wait_until(lambda c: c.acks >= 15)
        waiter = Child(tmp_path, sid, "chain", "--label=W", "--per-round=7", "--lock-timeout=30")
        waiter.wait_line("OPENING")
        time.sleep(0.25)  # the waiter is polling the lock
        assert not any(x.startswith("READY") for x in waiter.snapshot()), "lock not exclusive"
        assert looper.kill() == -signal.SIGKILL
        code = waiter.finish()
        assert code == 0, failed(waiter, code, 0, "waiter")
        l_ready, l_ops = parse(looper.snapshot())
        w_ready, w_ops = parse(waiter.snapshot())
    finally:
        looper.close()
        if waiter is not None:
            waiter.close()
    assert w_ready is not None and w_ready.waited > 0.2
    with store.open_reader(sid) as r:
        # the waiter recovered the killed writer's session: all its acks survived
        model.absorb(r, l_ready, l_ops, f"[seed {seed}] killed writer", committed=w_ready.count)
        assert w_ready.head == model.ids[-1]
        model.absorb(r, w_ready, w_ops, "waiter")
        model.check_all(r, "both", deep=True)
    recover_and_check(store, sid, model, "after takeover")


# -- readers in one process while a writer appends in another ----------------------


def check_reader_view(r: SessionReader, acked: list[str], where: str) -> None:
    """A consistent committed prefix: contiguous, linked, loadable, HEAD newest."""
    assert r.count >= len(acked), f"{where}: reader misses acknowledged events"
    entries = list(r.entries())
    assert [e.seq for e in entries] == list(range(r.count)), where
    ids = {e.id: e.seq for e in entries}
    for e in entries:
        assert e.parent_id == NIL_ID or ids[e.parent_id] == e.parent_seq < e.seq, (where, e)
    assert r.head == (entries[-1].id if entries else None), where
    for event_id in acked:
        assert r.event(event_id).id == event_id, where
    for event in r.context().events:  # resolves every blob on the active path
        assert event.record is not None, where
    for step in r.path():
        r.event(step.id, resolve=True)


def test_readers_see_a_consistent_prefix_while_another_process_writes(tmp_path: Path) -> None:
    seed = BASE_SEED + 200
    store = Store(tmp_path)
    sid = store.create_session().id
    writer = Child(
        tmp_path,
        sid,
        "loop",
        f"--seed={seed}",
        "--chunk-size=4096",
        "--max-ops=300",
        "--blob-share=0.2",
        "--batch-share=0.3",
        "--label=W",
    )
    old_readers: list[tuple[SessionReader, list[str]]] = []
    views = during = 0
    last_count = 0
    try:
        while True:
            running = writer.proc.poll() is None
            lines = writer.snapshot()
            acked = [x.split(" ")[4] for x in lines if x.startswith("ACK ")]
            r = store.open_reader(sid)
            check_reader_view(r, acked, f"[seed {seed}] view {views}")
            assert r.count >= last_count, "a later reader saw fewer events"
            last_count = r.count
            views += 1
            during += running and not any(x == "CLOSED" for x in lines)
            if views % 10 == 1 and len(old_readers) < 5:
                old_readers.append((r, [e.id for e in r.entries()]))
            else:
                r.close()
            if not running:
                break
        code = writer.finish()
        assert code == 0, failed(writer, code, 0, "writer")
        ready, ops = parse(writer.snapshot())
    finally:
        writer.close()
    print(f"{views} reader views, {during} while the writer ran")
    assert during >= 10, f"only {during} reader views overlapped the writer"
    # readers opened early still see their own snapshot, after many rotations
    for r, ids in old_readers:
        check_reader_view(r, [], "old reader")
        assert [e.id for e in r.entries()] == ids
        r.close()
    model = Model()
    with store.open_reader(sid) as r:
        model.absorb(r, ready, ops, "writer output")
        model.check_all(r, "final", deep=True)
    assert len(store.paths(sid).chunk_numbers()) > 3
    recover_and_check(store, sid, model, "final")

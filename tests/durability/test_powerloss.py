"""Simulated power loss: every crash point of a workload, several ways each.

The workload runs against a real directory through :class:`fsmodel.RecordingIO`;
then, for every prefix of its operation log, :class:`fsmodel.Model` builds the
states a power cut at that point could leave (unsynced writes dropped, applied,
torn, zero-filled, scrambled; unsynced directory entries and renames lost), and
each state is checked: recovery succeeds, every acknowledged event is there
with its parent and record, nothing that was never written appears, a batch is
all-or-nothing, HEAD names the newest event, fsck is clean, a second recovery
changes nothing, and the session accepts a new append.

``test_process_crash_then_power_loss`` adds the case a single workload cannot
show: the process dies first (its unsynced writes stay in the page cache, where
the next process reads them back as if they were on disk), a new process
recovers and appends, and only then the power goes.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import fsmodel
from fsmodel import (
    DETERMINISTIC_VARIANTS,
    CrashPoint,
    Model,
    NoSyncIO,
    ProcessDied,
    RecordingIO,
    Variant,
    crash_points,
    fingerprint,
    materialise,
    random_variants,
    read_tree,
)
from infai.store import (
    NIL_ID,
    MessageRecord,
    Record,
    SessionNotFound,
    SessionWriter,
    Store,
    StoreOptions,
    ToolCallRecord,
    ToolResultRecord,
)

MODES = ("fast", "strict")


def options(mode: str) -> StoreOptions:
    # Small chunks so the workload rotates several times; a short index sync
    # interval so recovery's trusted-prefix path (the `ixd` mark) is exercised.
    return StoreOptions(chunk_size=1400, index_sync_interval=3, durability=mode)  # type: ignore[arg-type]


BIG_A = "".join(f"line {i:05d} of a large tool result\n" for i in range(700))  # ~25 KiB
BIG_B = "".join(f"another big payload, row {i:05d}\n" for i in range(700))
assert len(BIG_A) > 16 * 1024 and len(BIG_B) > 16 * 1024
#: re-sent verbatim later in the workload, so the same blob is named again
BLOB_A = ToolResultRecord(call_id="t2", name="cat", content=BIG_A)


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


# -- the workload ---------------------------------------------------------------


@dataclass
class Trace:
    """What the workload was told: marks are ``len(ops)`` when a call returned."""

    home: Path
    sid: str = ""
    session_mark: int | None = None
    acks: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    batches: list[tuple[str, ...]] = field(default_factory=list)
    died: str = ""
    restart_error: str = ""


@dataclass
class Ctx:
    store: Store
    rec: RecordingIO
    trace: Trace
    w: SessionWriter | None = None
    ev: dict[str, str] = field(default_factory=dict)

    @property
    def writer(self) -> SessionWriter:
        assert self.w is not None
        return self.w

    def append(self, name: str, record: Record, role: str, parent: str | None = None) -> None:
        self.rec.step = name
        event = self.writer.append(record, role, parent=None if parent is None else self.ev[parent])
        self.ev[name] = event.id
        self.trace.acks.append((len(self.rec.ops), (event.id,)))

    def batch(self, name: str, items: list[tuple[Record, str]]) -> None:
        self.rec.step = name
        events = self.writer.append_batch(items)
        ids = tuple(e.id for e in events)
        self.ev[name] = ids[-1]
        self.trace.acks.append((len(self.rec.ops), ids))
        self.trace.batches.append(ids)


def step_create(c: Ctx) -> None:
    c.rec.step = "create"
    info = c.store.create_session(name="powerloss", working_dir="/w")
    c.trace.sid = info.id
    c.trace.session_mark = len(c.rec.ops)


def step_open(c: Ctx) -> None:
    c.rec.step = "open"
    c.w = c.store.open_writer(c.trace.sid)


def step_close(c: Ctx) -> None:
    c.rec.step = "close"
    c.writer.close()
    c.w = None


def step_select(c: Ctx) -> None:
    c.writer.select(c.ev["b"])
    c.append("selected", msg("back on the first branch"), "user")


Step = tuple[str, Callable[[Ctx], None]]

STEPS: list[Step] = [
    ("create", step_create),
    ("open", step_open),
    ("a", lambda c: c.append("a", msg("hello"), "user")),
    ("b", lambda c: c.append("b", msg("hi, how can I help?"), "assistant")),
    (
        "batch",
        lambda c: c.batch(
            "batch",
            [
                (ToolCallRecord(call_id="t1", name="ls", arguments={"path": "."}), "assistant"),
                (ToolResultRecord(call_id="t1", name="ls", content="a b c"), "tool"),
                (msg("three files"), "assistant"),
            ],
        ),
    ),
    ("blob", lambda c: c.append("blob", BLOB_A, "tool")),
    ("branch", lambda c: c.append("branch", msg("try approach B"), "user", parent="a")),
    ("c", lambda c: c.append("c", msg("approach B works"), "assistant")),
    ("selected", step_select),
    (
        "batch-blob",
        lambda c: c.batch(
            "batch-blob",
            [
                (ToolCallRecord(call_id="t3", name="cat", arguments={"f": "b"}), "assistant"),
                (ToolResultRecord(call_id="t3", name="cat", content=BIG_B), "tool"),
                (msg("that was long"), "assistant"),
            ],
        ),
    ),
    ("same-blob", lambda c: c.append("same-blob", BLOB_A, "tool")),
    ("close", step_close),
    ("reopen", step_open),
    ("after-reopen", lambda c: c.append("after-reopen", msg("back again"), "user")),
    ("close2", step_close),
]

#: What a new process does after the previous one died: reopen, re-send the big
#: tool result (the same bytes, so the same blob), and append until it rotates.
RESTART_STEPS: list[Step] = [
    ("restart-open", step_open),
    ("retry-blob", lambda c: c.append("retry-blob", BLOB_A, "tool")),
    ("r1", lambda c: c.append("r1", msg("continuing after the crash"), "user")),
    ("r2", lambda c: c.append("r2", msg("still going"), "assistant")),
    ("r3", lambda c: c.append("r3", msg("one more"), "user")),
    ("restart-close", step_close),
]


def run_workload(
    home: Path, mode: str, die_before: int | None = None
) -> tuple[Model, RecordingIO, Trace]:
    """Run STEPS (and, if the process dies, RESTART_STEPS in a new process)."""
    (home / "sessions").mkdir(parents=True)  # the store creates it outside the FileIO seam
    model = Model.snapshot(home)
    rec = RecordingIO()
    trace = Trace(home)
    ctx = Ctx(Store(home, options=options(mode), io=rec), rec, trace)
    if die_before is not None:
        rec.die_before = lambda i, name, path: i == die_before
    for _name, step in STEPS:
        try:
            step(ctx)
        except ProcessDied:
            trace.died = rec.death.replace(str(home) + "/", "")
            with rec.dead_process():
                if ctx.w is not None:
                    ctx.w.close()
            ctx.w = None
            ctx.store = Store(home, options=options(mode), io=rec)
            try:
                for _, restart in RESTART_STEPS:
                    restart(ctx)
            except Exception as exc:  # a finding: the next process cannot carry on
                error = str(exc).replace(f"{home}/sessions/{trace.sid}/", "")
                trace.restart_error = f"{rec.step}: {type(exc).__name__}: {error}"
            break
    return model, rec, trace


# -- checking one state ---------------------------------------------------------


@dataclass(frozen=True)
class Truth:
    id: str
    parent_id: str
    branch_from: str | None
    kind: str
    role: str
    record: Record | None


def final_truth(home: Path, mode: str, sid: str) -> list[Truth]:
    """The events the workload left on the real disk (every state must show a prefix)."""
    store = Store(home, options=options(mode), io=NoSyncIO())
    report = store.fsck(sid)
    assert report.problems == [] and report.pending_recovery == [], report
    with store.open_reader(sid) as r:
        out = []
        for entry in r.entries():
            e = r.event(entry.id, resolve=True)
            out.append(Truth(e.id, e.parent_id, e.branch_from, e.kind, e.role, e.record))
    return out


@dataclass
class Checker:
    mode: str
    trace: Trace
    truth: list[Truth]
    scratch: Path
    checked: int = 0
    skipped: int = 0
    seen: set[tuple[str, int, bool]] = field(default_factory=set)

    def acked(self, k: int) -> set[str]:
        return {i for mark, ids in self.trace.acks if mark <= k for i in ids}

    def check(self, cp: CrashPoint) -> str | None:
        acked = self.acked(cp.k)
        session_acked = self.trace.session_mark is not None and self.trace.session_mark <= cp.k
        key = (fingerprint(cp.tree), len(acked), session_acked)
        if key in self.seen:
            self.skipped += 1
            return None
        self.seen.add(key)
        self.checked += 1
        home = self.scratch / f"state-{self.checked}"
        materialise(cp.tree, home)
        try:
            self.verify(home, acked, session_acked)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            shutil.rmtree(home)
        return None

    def verify(self, home: Path, acked: set[str], session_acked: bool) -> None:
        sid = self.trace.sid
        store = Store(home, options=options(self.mode), io=NoSyncIO())
        try:
            w = store.open_writer(sid)
        except SessionNotFound:
            assert not session_acked, "create_session returned but the session is gone"
            assert not acked, f"{len(acked)} acknowledged events but no session"
            return
        try:
            n = w.count
            present = self.truth[:n]
            ids = [t.id for t in present]
            assert len(present) == n, f"{n} events recovered, only {len(self.truth)} were written"
            missing = acked - set(ids)
            assert not missing, f"acknowledged events lost: {sorted(missing)} (recovered {n})"
            assert [e.id for e in w.entries()] == ids, "index disagrees with the log"
            for t in present:
                e = w.event(t.id, resolve=True)
                assert (e.parent_id, e.branch_from, e.kind, e.role) == (
                    t.parent_id,
                    t.branch_from,
                    t.kind,
                    t.role,
                ), f"event {t.id} changed"
                assert e.record == t.record, f"record of {t.id} changed"
                if t.parent_id != NIL_ID:
                    w.event(t.parent_id)
            id_set = set(ids)
            for batch in self.trace.batches:
                got = sum(i in id_set for i in batch)
                assert got in (0, len(batch)), f"batch {batch} is partly present ({got})"
            assert w.head == (ids[-1] if ids else None), f"HEAD {w.head} is not the newest event"
            if ids:
                assert w.context().events[-1].id == ids[-1]
        finally:
            w.close()
        root = home / "sessions" / sid
        after_first = read_tree(root)
        store.open_writer(sid).close()
        assert store.recovery_notes[sid] == [], f"second recovery: {store.recovery_notes[sid]}"
        assert read_tree(root) == after_first, "second recovery changed files"
        report = store.fsck(sid)
        assert report.problems == [], f"fsck: {[str(p) for p in report.problems]}"
        assert report.pending_recovery == [], f"fsck: {report.pending_recovery}"
        # The recovered session accepts new events.
        with store.open_writer(sid) as w2:
            new = w2.append(msg("after the power came back"), "user")
        with store.open_reader(sid) as r:
            assert r.head == new.id and r.count == n + 1
            assert r.event(new.id).parent_id == (ids[-1] if ids else NIL_ID)
        assert store.fsck(sid).problems == []


def scratch_dir(tmp_path: Path) -> Path:
    """Where crash states are materialised: tmpfs when there is one (thousands of
    small trees are written and removed), else under ``tmp_path``."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="infai-powerloss-", dir=shm))
    return tmp_path / "scratch"


@dataclass
class Failure:
    """One crash state that breaks the store, described so it can be replayed by hand."""

    mode: str
    text: str
    died: str = ""  # the operation the process died before, if it did
    problem: str = ""

    def kind(self) -> str:
        """What went wrong, without ids, paths and numbers: for grouping."""
        first = self.problem.splitlines()[0]
        return _norm(re.sub(r" \(recovered \d+\)|: \[.*\]", "", first))[:140]

    def death(self) -> str:
        return _norm(re.sub(r"^#\d+ | \[.*\]$", "", self.died)).replace("<session>/", "")


def _norm(text: str) -> str:
    text = re.sub(r"'?/\S*?/sessions/([0-9a-f-]{36}/)?", "", text)
    text = re.sub(r"sessions/[0-9a-f-]{36}", "<session>", text)
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", text)
    text = re.sub(r"[0-9a-f]{64}", "<hex>", text)
    return re.sub(r"\d+", "N", text).replace("'", "")


def explore(
    tmp_path: Path,
    mode: str,
    variants: Callable[[int], tuple[Variant, ...]],
    die_before: int | None = None,
    first: int = 0,
) -> tuple[Checker, list[Failure], list[fsmodel.Op]]:
    """Run the workload, then check every crash state from op ``first`` on."""
    home = tmp_path / "live"
    model, rec, trace = run_workload(home, mode, die_before)
    if trace.restart_error:
        died = trace.died.replace(f"sessions/{trace.sid}/", "")
        text = f"[{mode}] the process died before {died}; the next process failed: "
        text += trace.restart_error
        checker = Checker(mode, trace, [], tmp_path / "unused")
        return checker, [Failure(mode, text, trace.died, trace.restart_error)], rec.ops
    checker = Checker(mode, trace, [], scratch_dir(tmp_path))
    checker.truth = final_truth(home, mode, trace.sid)
    ops = rec.ops
    failures: list[Failure] = []
    last_tree = None
    try:
        for cp in crash_points(home, model, ops, variants, first=first):
            if cp.k == len(ops) and cp.variant.name == "all-applied":
                last_tree = cp.tree
            problem = checker.check(cp)
            if problem is not None:
                text = describe_failure(cp, ops, home, checker, problem)
                failures.append(Failure(mode, text, trace.died, problem))
    finally:
        shutil.rmtree(checker.scratch, ignore_errors=True)
    # The model must agree with the real disk about what the process sees.
    assert last_tree is not None
    assert fingerprint(last_tree) == fingerprint(nest(read_tree(home))), "model diverged from disk"
    return checker, failures, ops


def nest(flat: dict[str, bytes]) -> fsmodel.Tree:
    tree: fsmodel.Tree = {}
    for rel, data in flat.items():
        *dirs, name = rel.split("/")
        node = tree
        for d in dirs:
            sub = node.setdefault(d, {})
            assert isinstance(sub, dict)
            node = sub
        node[name] = data
    return tree


def describe_failure(
    cp: CrashPoint, ops: list[fsmodel.Op], home: Path, checker: Checker, problem: str
) -> str:
    root = str(home / "sessions" / checker.trace.sid) if checker.trace.sid else str(home)

    def short(text: str) -> str:
        text = text.replace(str(home) + "/", "").replace(f"sessions/{checker.trace.sid}/:", "./:")
        return text.replace(f"sessions/{checker.trace.sid}/", "").replace(
            checker.trace.sid, "<sid>"
        )

    before = ops[cp.k - 1].describe(root) if cp.k > 0 else "(nothing)"
    after = ops[cp.k].describe(root) if cp.k < len(ops) else "(end of workload)"
    died = (
        f"\n  the process died first, before {short(checker.trace.died)}"
        if checker.trace.died
        else ""
    )
    choices = "\n    ".join(short(c) for c in cp.choices) or "(nothing unsynced)"
    return (
        f"[{checker.mode}] power cut after op #{cp.k - 1}, variant {cp.variant.name}:{died}\n"
        f"  last op done:   {before}\n  next op (lost): {after}\n"
        f"  unsynced at the cut, and what the cut did to it:\n    {choices}\n"
        f"  => {short(problem)}"
    )


def report(failures: list[Failure], label: str) -> None:
    """Fail with one example of each kind of failure, most frequent first."""
    if not failures:
        return
    kinds: dict[str, list[Failure]] = {}
    for f in failures:
        kinds.setdefault(f.kind(), []).append(f)
    ordered = sorted(kinds.items(), key=lambda kv: -len(kv[1]))
    lines = []
    for kind, group in ordered:
        lines.append(f"  {len(group):4d} x {kind}")
        deaths = sorted({f.death() for f in group if f.died})
        if deaths:
            lines.append(f"         (process died first before: {'; '.join(deaths)})")
    examples = "\n\n".join(group[0].text for _, group in ordered)
    pytest.fail(
        f"{len(failures)} crash states break the store ({label}), {len(kinds)} kinds:\n"
        + "\n".join(lines)
        + f"\n\nOne example of each kind:\n\n{examples}",
        pytrace=False,
    )


# -- tests ---------------------------------------------------------------------


def full_variants(k: int) -> tuple[Variant, ...]:
    return DETERMINISTIC_VARIANTS + random_variants(12, base_seed=1)


@pytest.mark.crash
@pytest.mark.parametrize("mode", MODES)
def test_power_loss_at_every_operation(tmp_path: Path, mode: str) -> None:
    checker, failures, ops = explore(tmp_path, mode, full_variants)
    assert checker.checked > len(ops)  # the loop really ran
    print(f"{mode}: {len(ops)} ops, {checker.checked} distinct crash states checked")
    report(failures, f"{mode}, {len(ops)} ops, {checker.checked} states")


def test_model_replays_the_real_disk(tmp_path: Path) -> None:
    """Sanity: replaying the whole log with everything applied gives the real tree."""
    model, rec, trace = run_workload(tmp_path / "live", "fast")
    assert trace.sid and len(trace.acks) == 10
    names = {op.name for op in rec.ops}
    assert {"open", "write", "pwrite", "fdatasync", "fsync", "rename", "mkdir"} <= names
    assert {"fsync_dir", "close"} <= names
    for op in rec.ops:
        model.apply(op)
    tree, _ = model.crash_state(DETERMINISTIC_VARIANTS[1], len(rec.ops))
    assert fingerprint(tree) == fingerprint(nest(read_tree(tmp_path / "live")))
    # With everything dropped, what is left is what was synced: at least the
    # session, every chunk line and every blob (the index and HEAD are hints).
    durable, _ = model.crash_state(DETERMINISTIC_VARIANTS[0], len(rec.ops))
    live = read_tree(tmp_path / "live")
    flat = read_tree_of(durable)
    for rel, data in live.items():
        if "/chunks/" in rel or "/blobs/" in rel or rel.endswith("session.json"):
            assert flat.get(rel) == data, rel


def read_tree_of(tree: fsmodel.Tree, prefix: str = "") -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for name, value in tree.items():
        path = f"{prefix}{name}"
        if isinstance(value, bytes):
            out[path] = value
        else:
            out.update(read_tree_of(value, path + "/"))
    return out


#: steps a process can die in (after the session exists and a writer is open)
APPEND_STEPS = frozenset(
    ("a", "b", "batch", "blob", "branch", "c", "selected", "batch-blob", "same-blob")
)


def death_variants(k: int) -> tuple[Variant, ...]:
    return (
        DETERMINISTIC_VARIANTS[0],
        DETERMINISTIC_VARIANTS[1],
        DETERMINISTIC_VARIANTS[4],
        *random_variants(2, base_seed=100),
    )


@pytest.mark.crash
@pytest.mark.parametrize("mode", MODES)
def test_process_crash_then_power_loss(tmp_path: Path, mode: str) -> None:
    """The process dies before op d (for every op of every append); a new process
    recovers and appends (the same blob again, then enough to rotate); then the
    power fails at every later op. Acknowledged means acknowledged: what the
    second process was told is durable must survive, even though part of what it
    built on was only ever in the page cache of the first."""
    _, dry, _ = run_workload(tmp_path / "dry", mode)
    points = [op.index for op in dry.ops if op.step in APPEND_STEPS and op.name != "close"]
    failures: list[Failure] = []
    checked = 0
    for d in points:
        checker, fails, _ops = explore(tmp_path / f"die-{d}", mode, death_variants, d, first=d)
        assert checker.trace.died.startswith(f"#{d} "), (checker.trace.died, d)
        checked += checker.checked
        failures += fails
        shutil.rmtree(tmp_path / f"die-{d}")
    print(f"{mode}: {len(points)} death points, {checked} distinct crash states checked")
    report(failures, f"process crash then power loss, {mode}, {len(points)} death points")


# -- the model itself ------------------------------------------------------------


def _state(model: Model, ops: list[fsmodel.Op], variant: Variant) -> dict[str, bytes]:
    for op in ops[model.applied :]:
        model.apply(op)
    tree, _ = model.crash_state(variant, len(ops))
    return read_tree_of(tree)


def test_model_semantics(tmp_path: Path) -> None:
    """What the model lets a power cut do, on a hand-made sequence."""
    root = tmp_path / "m"
    (root / "d").mkdir(parents=True)
    (root / "e").mkdir()
    (root / "old").write_bytes(b"old")
    model = Model.snapshot(root)
    io = RecordingIO()
    drop, applied, torn_half, zero, no_entries, no_renames = DETERMINISTIC_VARIANTS

    fd = io.open(str(root / "d" / "f"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    io.write(fd, b"A" * 10)
    # New name, unsynced data: the name and the bytes may each be lost.
    assert _state(model, io.ops, drop) == {"old": b"old"}
    assert _state(model, io.ops, applied)["d/f"] == b"A" * 10
    assert _state(model, io.ops, torn_half)["d/f"] == b"A" * 5
    assert _state(model, io.ops, zero)["d/f"] == bytes(10)
    assert "d/f" not in _state(model, io.ops, no_entries)
    io.fdatasync(fd)
    assert "d/f" not in _state(model, io.ops, drop)  # data durable, name not yet
    io.fsync_dir(str(root / "d"))
    assert _state(model, io.ops, drop)["d/f"] == b"A" * 10
    io.write(fd, b"B" * 4)
    assert _state(model, io.ops, drop)["d/f"] == b"A" * 10
    assert _state(model, io.ops, zero)["d/f"] == b"A" * 10 + bytes(4)
    assert _state(model, io.ops, applied)["d/f"] == b"A" * 10 + b"B" * 4
    io.close(fd)

    # A rename within a directory: lost unless the directory is synced.
    fd = io.open(str(root / "new.tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    io.write(fd, b"new")
    io.fsync(fd)
    io.close(fd)
    io.rename(str(root / "new.tmp"), str(root / "old"))
    assert _state(model, io.ops, no_renames)["old"] == b"old"
    assert _state(model, io.ops, no_renames)["new.tmp"] == b"new"
    assert _state(model, io.ops, applied)["old"] == b"new"
    io.fsync_dir(str(root))
    assert _state(model, io.ops, drop)["old"] == b"new"

    # Across directories: durable once the target directory is synced, and atomic.
    fd = io.open(str(root / "x.tmp"), os.O_WRONLY | os.O_CREAT)
    io.write(fd, b"x")
    io.fsync(fd)
    io.close(fd)
    io.fsync_dir(str(root))
    io.rename(str(root / "x.tmp"), str(root / "e" / "x"))
    io.fsync_dir(str(root))  # the source's sync alone does not persist it
    state = _state(model, io.ops, drop)
    assert state.get("x.tmp") == b"x" and "e/x" not in state
    assert "x.tmp" not in _state(model, io.ops, applied)
    io.fsync_dir(str(root / "e"))
    state = _state(model, io.ops, drop)
    assert state.get("e/x") == b"x" and "x.tmp" not in state

    # Scrambled writeback: some sectors of an unsynced write persist, others not,
    # in any order (not only a prefix).
    fd = io.open(str(root / "s"), os.O_WRONLY | os.O_CREAT)
    io.write(fd, b"S" * (8 * fsmodel.SECTOR))
    io.close(fd)
    _state(model, io.ops, applied)
    node = model.top.current["s"]
    assert isinstance(node, fsmodel.FileNode)
    out_of_order = 0
    for seed in range(20):
        data = fsmodel.scrambled(node, random.Random(seed))
        kept = [data[i * 512 : (i + 1) * 512] == b"S" * 512 for i in range(len(data) // 512)]
        out_of_order += any(not a and b for a, b in itertools.pairwise(kept))
    assert out_of_order > 0

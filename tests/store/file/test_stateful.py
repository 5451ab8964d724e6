"""Model-based test of the session store: random appends, branches, selection,
compactions, blobs, chunk rotation and reopening, checked against an in-memory tree.

The model is a dict ``id -> ModelEvent`` plus HEAD (always the newest appended
event) and the pending parent chosen by the two-phase ``select``. After every step
the writer and a fresh reader must agree with it: HEAD, the active path (from HEAD
back to the nearest compaction, inclusive, or the root), the resolved context,
leaves and roots; ``branch_from`` must be set exactly when the parent was not HEAD at
append time. Teardown closes the writer and requires a clean fsck.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from infai.store import (
    NIL_ID,
    BranchSummaryRecord,
    CompactionRecord,
    Entry,
    Event,
    MessageRecord,
    Record,
    SessionReader,
    SessionWriter,
    Store,
    StoreOptions,
    ToolCallRecord,
    ToolResultRecord,
    Usage,
)
from infai.store.records import encode_record, preview

BLOB_THRESHOLD = 160
CHUNK_SIZE = 2048

# -- strategies ------------------------------------------------------------------

_text = st.text(max_size=40)
_small_json = st.dictionaries(
    st.text(max_size=8),
    st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=12)),
    max_size=3,
)
_roles = st.one_of(
    st.sampled_from(["user", "assistant", "tool", "system"]),
    st.from_regex(r"[a-z][a-z0-9_\-]{0,31}", fullmatch=True),
)

_message = st.builds(
    MessageRecord,
    content=_text,
    reasoning=st.none() | _text,
    model=st.none() | st.sampled_from(["m-1", "gpt-x"]),
    usage=st.none() | st.builds(Usage, input_tokens=st.integers(0, 10**6)),
    metadata=_small_json,
)
_tool_call = st.builds(
    ToolCallRecord, call_id=_text, name=st.sampled_from(["read", "bash"]), arguments=_small_json
)
_tool_result = st.builds(
    ToolResultRecord,
    call_id=_text,
    name=st.sampled_from(["read", "bash"]),
    content=_text,
    is_error=st.booleans(),
)
_branch_summary = st.builds(
    BranchSummaryRecord, summary=_text, abandoned_tip=st.none() | st.uuids().map(str)
)
_compaction = st.builds(
    CompactionRecord,
    summary=_text,
    goals=st.lists(_text, max_size=2),
    decisions=st.lists(_text, max_size=2),
    tokens_before=st.none() | st.integers(0, 10**6),
)
# Non-compaction records: the boundary is tested through its own rule.
_plain = st.one_of(_message, _message, _tool_call, _tool_result, _branch_summary)
# Records whose JSON exceeds the blob threshold.
_big = st.one_of(
    st.builds(
        MessageRecord,
        content=st.text(min_size=1, max_size=20).map(lambda s: (s * 400)[:600]),
    ),
    st.builds(
        ToolResultRecord,
        call_id=_text,
        name=st.just("read"),
        content=st.integers(BLOB_THRESHOLD, 900).map(lambda n: "y" * n),
    ),
    st.builds(CompactionRecord, summary=st.integers(BLOB_THRESHOLD, 400).map(lambda n: "c" * n)),
)
_big_compaction = st.builds(
    CompactionRecord,
    summary=st.integers(BLOB_THRESHOLD, 400).map(lambda n: "c" * n),
    facts=st.lists(_text, max_size=2),
)


@dataclass
class ModelEvent:
    id: str
    parent: str | None
    branch_from: str | None
    record: Record
    role: str
    blob: bool
    timestamp: str


def _is_blob(record: Record) -> bool:
    return len(encode_record(record)) > BLOB_THRESHOLD


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="infai-stateful-"))
        self.events: dict[str, ModelEvent] = {}
        self.order: list[str] = []
        self.head: str | None = None
        self.pending: str | None = None
        self.store: Store | None = None
        self.writer: SessionWriter | None = None
        self.sid = ""
        self.options = StoreOptions()
        # A reader opened earlier and the model state it must keep seeing.
        self.snapshot: tuple[SessionReader, str | None, list[str], list[str]] | None = None
        self.reopens = 0

    # -- helpers -------------------------------------------------------------

    @property
    def w(self) -> SessionWriter:
        assert self.writer is not None
        return self.writer

    @property
    def s(self) -> Store:
        assert self.store is not None
        return self.store

    def model_path(self, at: str | None) -> list[str]:
        out: list[str] = []
        cur = at
        while cur is not None:
            out.append(cur)
            if self.events[cur].record.kind == "compaction":
                break
            cur = self.events[cur].parent
        out.reverse()
        return out

    def model_children(self, of: str) -> list[str]:
        return [i for i in self.order if self.events[i].parent == of]

    def model_leaves(self) -> list[str]:
        parents = {e.parent for e in self.events.values()}
        return [i for i in self.order if i not in parents]

    def record_appended(
        self, items: list[tuple[Record, str]], parent: str | None, got: list[Event]
    ) -> None:
        """Update the model after a successful append of ``items`` after ``parent``."""
        effective = parent if parent is not None else self.pending
        if effective is None:
            effective = self.head
        branch_from = effective if effective != self.head else None
        assert len(got) == len(items)
        prev = effective
        for i, ((record, role), ev) in enumerate(zip(items, got, strict=True)):
            want_branch = branch_from if i == 0 else None
            assert ev.parent_id == (prev if prev is not None else NIL_ID)
            assert ev.branch_from == want_branch
            assert ev.kind == record.kind
            assert ev.role == role
            assert ev.seq == len(self.order)
            assert (ev.digest is not None) == _is_blob(record)
            assert ev.id not in self.events
            self.events[ev.id] = ModelEvent(
                ev.id, prev, want_branch, record, role, _is_blob(record), ev.timestamp
            )
            self.order.append(ev.id)
            prev = ev.id
        self.head = self.order[-1]
        self.pending = None

    def do_append(self, items: list[tuple[Record, str]], parent: str | None) -> None:
        if len(items) == 1 and parent is None:
            got = [self.w.append(items[0][0], items[0][1])]
        elif len(items) == 1:
            got = [self.w.append(items[0][0], items[0][1], parent=parent)]
        else:
            got = self.w.append_batch(items, parent=parent)
        self.record_appended(items, parent, got)

    def check_entry(self, entry: Entry, eid: str) -> None:
        m = self.events[eid]
        assert entry.id == eid
        assert entry.seq == self.order.index(eid)
        assert entry.parent_id == (m.parent if m.parent is not None else NIL_ID)
        assert entry.parent_seq == (self.order.index(m.parent) if m.parent is not None else -1)
        assert entry.branch_from == m.branch_from
        assert entry.kind == m.record.kind
        assert entry.role == m.role
        assert entry.blob == m.blob
        assert entry.timestamp == m.timestamp

    def check_event(self, ev: Event, eid: str, *, resolved: bool) -> None:
        m = self.events[eid]
        assert ev.id == eid
        assert ev.parent_id == (m.parent if m.parent is not None else NIL_ID)
        assert ev.branch_from == m.branch_from
        assert ev.kind == m.record.kind
        assert ev.role == m.role
        assert (ev.digest is not None) == m.blob
        assert ev.timestamp == m.timestamp
        assert ev.seq == self.order.index(eid)
        assert ev.preview == preview(m.record)
        if resolved or not m.blob:
            assert ev.record == m.record
        else:
            assert ev.record is None

    def check_reader(self, r: SessionReader) -> None:
        assert r.head == self.head
        assert r.count == len(self.order)
        want = self.model_path(self.head)
        path = r.path()
        assert [e.id for e in path] == want
        for entry in path:
            self.check_entry(entry, entry.id)
        ctx = r.context()
        assert [e.id for e in ctx.events] == want
        for ev in ctx.events:
            self.check_event(ev, ev.id, resolved=True)
        if want and self.events[want[0]].record.kind == "compaction":
            assert ctx.boundary is not None and ctx.boundary.id == want[0]
        else:
            assert ctx.boundary is None
        assert [e.id for e in r.leaves()] == self.model_leaves()
        assert [e.id for e in r.roots()] == [i for i in self.order if self.events[i].parent is None]

    # -- lifecycle -----------------------------------------------------------

    @initialize(
        durability=st.sampled_from(["fast", "strict"]),
        sync_interval=st.integers(1, 5),
    )
    def open_session(self, durability: str, sync_interval: int) -> None:
        self.options = StoreOptions(
            chunk_size=CHUNK_SIZE,
            blob_threshold=BLOB_THRESHOLD,
            durability="strict" if durability == "strict" else "fast",
            index_sync_interval=sync_interval,
            lock_timeout=0,
        )
        self.store = Store(self.tmp / "home", self.options)
        self.sid = self.s.create_session(name="stateful").id
        self.writer = self.s.open_writer(self.sid)

    def teardown(self) -> None:
        try:
            if self.snapshot is not None:
                self.snapshot[0].close()
            if self.store is not None and self.sid:
                chunks = len(list((self.s.sessions_dir / self.sid / "chunks").iterdir()))
                event(f"chunks: {min(chunks, 4)}{'+' if chunks >= 4 else ''}")
                event(f"events: {'>=40' if len(self.order) >= 40 else '<40'}")
                event(
                    f"blob events: {'yes' if any(e.blob for e in self.events.values()) else 'no'}"
                )
                event(f"reopened: {'yes' if self.reopens else 'no'}")
            if self.writer is not None:
                self.writer.close()
                self.writer = None
            if self.store is not None and self.sid:
                report = self.s.fsck(self.sid)
                assert report.problems == []
                assert report.pending_recovery == []
                assert report.orphans == []
                assert report.events == len(self.order)
                assert report.blobs == len(
                    {encode_record(e.record) for e in self.events.values() if e.blob}
                )
                assert report.ok
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- rules: appends ------------------------------------------------------

    @rule(record=_plain, role=_roles)
    def append_to_head(self, record: Record, role: str) -> None:
        self.do_append([(record, role)], None)

    @rule(items=st.lists(st.tuples(_plain | _big, _roles), min_size=1, max_size=4))
    def append_batch(self, items: list[tuple[Record, str]]) -> None:
        self.do_append(items, None)

    @precondition(lambda self: bool(self.order))
    @rule(data=st.data(), record=_plain | _big, role=_roles, batch=st.integers(1, 3))
    def append_with_parent(
        self, data: st.DataObject, record: Record, role: str, batch: int
    ) -> None:
        parent = data.draw(st.sampled_from(self.order), label="parent")
        items = [(record, role)] + [
            (MessageRecord(content=f"follow {k}"), "user") for k in range(1, batch)
        ]
        self.do_append(items, parent)

    @rule(record=_big, role=_roles)
    def append_blob(self, record: Record, role: str) -> None:
        self.do_append([(record, role)], None)

    @rule(record=_compaction | _big_compaction)
    def compact(self, record: Record) -> None:
        self.do_append([(record, "assistant")], None)

    @rule(record=_message | _big)
    def append_same_payload_again(self, record: Record) -> None:
        # Equal payloads share one blob file (fsck at teardown counts distinct digests).
        self.do_append([(record, "user"), (record, "assistant")], None)

    # -- rules: selection ----------------------------------------------------

    @precondition(lambda self: bool(self.order))
    @rule(data=st.data())
    def select(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(self.order), label="select")
        self.w.select(target)
        self.pending = None if target == self.head else target
        # HEAD has not moved: the persisted active branch is unchanged.
        assert self.w.head == self.head

    @rule()
    def select_none(self) -> None:
        self.w.select(None)
        self.pending = None

    # -- rules: reopening ----------------------------------------------------

    @rule(fresh_store=st.booleans())
    def reopen(self, fresh_store: bool) -> None:
        self.w.close()
        self.writer = None
        if fresh_store:
            self.store = Store(self.tmp / "home", self.options)
        self.writer = self.s.open_writer(self.sid)
        self.pending = None
        self.reopens += 1
        assert self.s.recovery_notes[self.sid] == []

    @rule(
        damage=st.sampled_from(
            ["torn_tail", "zeroed_tail", "index_cut", "index_gone", "head_junk", "leftovers"]
        ),
        data=st.data(),
    )
    def crash_leftovers_then_reopen(self, damage: str, data: st.DataObject) -> None:
        """Leave what a crash can leave (never touching acknowledged events), then reopen.

        Recovery must bring back exactly the acknowledged events, say what it did, and
        leave a session that fsck finds clean at teardown.
        """
        self.w.close()
        self.writer = None
        if self.snapshot is not None:  # the damage below is not something a live reader sees
            self.snapshot[0].close()
            self.snapshot = None
        paths = self.s.paths(self.sid)
        numbers = paths.chunk_numbers()
        expect_note = True
        if damage in ("torn_tail", "zeroed_tail"):
            if not numbers:
                paths.chunk(0).write_bytes(b"")
                numbers = [0]
            junk = (
                b'{"seq":%d,"id":"01' % len(self.order)
                if damage == "torn_tail"
                else b"\x00" * data.draw(st.integers(1, 600), label="zeroes")
            )
            with paths.chunk(numbers[-1]).open("ab") as f:
                f.write(junk)
        elif damage == "index_cut":
            size = paths.index.stat().st_size if paths.index.exists() else 0
            if not paths.index.exists():
                paths.index.write_bytes(b"")
            keep = data.draw(st.integers(0, max(0, size // 512)), label="keep") * 512
            os.truncate(paths.index, keep)
            expect_note = keep < size
        elif damage == "index_gone":
            paths.index.unlink(missing_ok=True)
            expect_note = bool(self.order)
        elif damage == "head_junk":
            paths.head.write_bytes(b"\x00" * 17)
        else:
            (paths.root / "HEAD.tmp").write_bytes(b"x")
            (paths.root / f".blob-{'ab' * 32}.tmp").write_bytes(b"partial blob")
            expect_note = False
        self.writer = self.s.open_writer(self.sid)
        self.pending = None
        self.reopens += 1
        notes = self.s.recovery_notes[self.sid]
        assert bool(notes) == expect_note, notes
        assert not (paths.root / "HEAD.tmp").exists()
        assert not any(p.name.endswith(".tmp") for p in paths.root.iterdir())

    # -- rules: random lookups ------------------------------------------------

    @precondition(lambda self: bool(self.order))
    @rule(data=st.data())
    def check_at(self, data: st.DataObject) -> None:
        at = data.draw(st.sampled_from(self.order), label="at")
        want = self.model_path(at)
        with self.s.open_reader(self.sid) as r:
            for reader in (self.w, r):
                assert [e.id for e in reader.path(at)] == want
                ctx = reader.context(at)
                assert [e.id for e in ctx.events] == want
                for ev in ctx.events:
                    self.check_event(ev, ev.id, resolved=True)
                assert [e.id for e in reader.children(at)] == self.model_children(at)
                self.check_entry(reader.entry(at), at)
                ev = reader.event(at)
                self.check_event(ev, at, resolved=False)
                assert reader.resolve(ev) == self.events[at].record
                full = reader.path(at, to_boundary=False)
                walk: list[str] = []
                cur: str | None = at
                while cur is not None:
                    walk.append(cur)
                    cur = self.events[cur].parent
                assert [e.id for e in full] == walk[::-1]

    @rule()
    def open_snapshot_reader(self) -> None:
        if self.snapshot is not None:
            self.snapshot[0].close()
        reader = self.s.open_reader(self.sid)
        self.snapshot = (reader, self.head, self.model_path(self.head), list(self.order))

    # -- invariants ----------------------------------------------------------

    @invariant()
    def writer_matches_model(self) -> None:
        if self.writer is None:
            return
        assert self.w.pending_parent == self.pending
        self.check_reader(self.w)

    @invariant()
    def fresh_reader_matches_model(self) -> None:
        if self.store is None:
            return
        with self.s.open_reader(self.sid) as r:
            self.check_reader(r)

    @invariant()
    def snapshot_reader_is_stable(self) -> None:
        # A reader opened earlier keeps describing the session as it was then.
        if self.snapshot is None:
            return
        reader, head, path, order = self.snapshot
        assert reader.head == head
        assert reader.count == len(order)
        assert [e.id for e in reader.path()] == path
        assert [e.id for e in reader.context().events] == path
        assert [e.id for e in reader.entries()] == order


SLOW_OK = [HealthCheck.too_slow]


@pytest.mark.timeout(300)
class TestSessionMachine(SessionMachine.TestCase):  # type: ignore[misc,valid-type]
    """A short run in ``make test`` (10 runs: the slowest test of the fast suite at
    25); the long one (150) is ``make crash``'s."""

    settings = settings(
        max_examples=10, stateful_step_count=40, deadline=None, suppress_health_check=SLOW_OK
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
class TestSessionMachineLong(SessionMachine.TestCase):  # type: ignore[misc,valid-type]
    settings = settings(
        max_examples=150, stateful_step_count=50, deadline=None, suppress_health_check=SLOW_OK
    )

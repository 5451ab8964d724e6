"""gc never removes anything reachable: a property test over random histories.

Random sessions get snapshots, restores and manifests on random branches
(events on abandoned branches stay roots), sessions are removed, trees are put
and never named, and gc runs in between; a model computes what every remaining
event reaches. After each gc everything reachable is there and everything else
(all aged past the grace period) is gone. Plus: a damaged session stops gc.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infai.store import (
    GcRefused,
    MessageRecord,
    RestoreRecord,
    SnapshotRecord,
    Store,
    StoreOptions,
    collect_garbage,
)
from objtrees import put_tree

names = st.sampled_from(["a", "b", "src/c", "src/d", "src/deep/e", "f"])
contents = st.sampled_from([b"1", b"2", b"33", b"shared", b"", b"\x00bin"])
trees = st.dictionaries(names, contents, max_size=4).filter(
    lambda files: not any(other.startswith(path + "/") for path in files for other in files)
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("session")),
        st.tuples(st.just("snapshot"), st.integers(0, 5), st.integers(0, 30), trees),
        st.tuples(st.just("restore"), st.integers(0, 5), st.integers(0, 30), trees),
        st.tuples(st.just("manifest"), st.integers(0, 5), contents),
        st.tuples(st.just("orphan"), trees),
        st.tuples(st.just("remove"), st.integers(0, 5)),
        st.tuples(st.just("gc")),
    ),
    max_size=25,
)


def _age(home: Path) -> None:
    path = home / "objects" / "objects.sqlite"
    if path.exists():
        conn = sqlite3.connect(path)
        conn.execute("UPDATE puts SET at = at - 7200")
        conn.commit()
        conn.close()


class _World:
    """The store and a model of what each session's events reach."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.store = Store(home, StoreOptions(lock_timeout=0))
        self.sessions: list[str] = []
        self.reach: dict[str, set[str]] = {}
        self.events: dict[str, list[str]] = {}

    def append(self, index: int, pick: int, record: object) -> None:
        if not self.sessions:
            return
        sid = self.sessions[index % len(self.sessions)]
        ids = self.events[sid]
        parent = ids[pick % len(ids)] if ids else None  # any event: branches abound
        with self.store.open_writer(sid) as writer:
            event = writer.append(record, "system", parent=parent)  # type: ignore[arg-type]
        ids.append(event.id)

    def step(self, step: tuple[object, ...]) -> None:
        kind = step[0]
        if kind == "session":
            sid = self.store.create_session().id
            self.sessions.append(sid)
            self.reach[sid], self.events[sid] = set(), []
        elif kind in ("snapshot", "restore"):
            _, index, pick, files = step
            if not self.sessions:
                return
            tree, reached = put_tree(self.store.objects, files)  # type: ignore[arg-type]
            sid = self.sessions[index % len(self.sessions)]  # type: ignore[operator]
            if kind == "snapshot":
                record: object = SnapshotRecord(tree=tree)
            else:
                source = self.events[sid][0] if self.events[sid] else "0" * 32
                record = RestoreRecord(tree=tree, source=source)
            self.append(index, pick, record)  # type: ignore[arg-type]
            self.reach[sid] |= reached
        elif kind == "manifest":
            _, index, data = step
            if not self.sessions:
                return
            digest = self.store.objects.put(data)  # type: ignore[arg-type]
            sid = self.sessions[index % len(self.sessions)]  # type: ignore[operator]
            self.append(index, 0, MessageRecord(content="m", metadata={"tool_manifest": digest}))  # type: ignore[arg-type]
            self.reach[sid].add(digest)
        elif kind == "orphan":
            put_tree(self.store.objects, step[1])  # type: ignore[arg-type]
        elif kind == "remove" and self.sessions:
            sid = self.sessions.pop(step[1] % len(self.sessions))  # type: ignore[operator]
            self.store.remove_session(sid)
            del self.reach[sid]
        elif kind == "gc":
            self.gc()

    def gc(self) -> None:
        live = set().union(*self.reach.values())
        _age(self.home)
        before = set(self.store.objects.digests())
        report = collect_garbage(self.store, grace=0)
        after = set(self.store.objects.digests())
        assert live <= after, "gc removed something reachable"
        assert after == before & live, "gc left something unreachable"
        assert set(report.digests) == before - live


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_gc_never_removes_anything_reachable(program: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = _World(Path(tmp) / "home")
        try:
            for step in program:
                world.step(step)
            world.gc()
        finally:
            world.store.close()


def test_a_session_that_cannot_be_read_stops_gc(tmp_path: Path) -> None:
    store = Store(tmp_path / "home", StoreOptions(lock_timeout=0))
    stray = store.objects.put(b"unnamed")
    good = store.create_session().id
    bad = store.create_session().id
    with store.open_writer(bad) as writer:
        writer.append(MessageRecord(content="hello there, a line to damage"), "user")
    _age(tmp_path / "home")
    chunk = store.paths(bad).chunk(0)
    data = bytearray(chunk.read_bytes())
    data[40] ^= 0x04
    chunk.write_bytes(bytes(data))
    with pytest.raises(GcRefused, match=f"session {bad} cannot be read"):
        collect_garbage(store, grace=0)
    (store.paths(bad).root / "session.json").write_bytes(b"{not json")
    with pytest.raises(GcRefused, match="cannot be read"):
        collect_garbage(store, grace=0)
    assert store.objects.has(stray) and store.exists(good)
    store.close()

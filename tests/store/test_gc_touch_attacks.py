"""Attacks on gc against the snapshot stat cache, on both backends, judged by
effect: a recorded snapshot event naming an object gc removed.

A stat-cache hit is not put again; a snapshot touches its hits only once their
last put is older than half the *default* grace. ``infai store gc --grace 10``
(minutes) keeps less than that: a hit put twenty minutes ago by an unrecorded
snapshot (``session diff``), named by no event yet, was removed by such a gc
running between the snapshot's walk and the append of its event, whether the
gc began after the walk (the session open all along) or the session's snapshot
ran while gc was reading the sessions. A gc with a short grace now moves the
objects' generation before it reads anything (a snapshot from then on drops its
cache and puts what it names again) and keeps the default grace while a session
is open (one may be about to record a snapshot of cache hits).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from infai.checkpoints import CheckpointSettings, Snapshotter
from infai.checkpoints import snapshot as snapshot_module
from infai.checkpoints.session import SessionCheckpoints, diff_at
from infai.store import SessionStore, SnapshotRecord, Store, collect_garbage, open_store
from infai.store.pg import PgStore
from infai.store.trees import reachable

#: ``--grace 10``: ten minutes, shorter than the stat cache's touch interval
SHORT = 600.0
#: how old the cached object's last put is: over the short grace, under the touch interval
AGE = 1200.0


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "file":
        location: str = str(tmp_path / "home")
    else:
        location = request.getfixturevalue("pg_url")
    with open_store(location, home=tmp_path / "machine") as opened:
        yield opened


def _age(store: SessionStore, seconds: float) -> None:
    """Make every put ``seconds`` older."""
    if isinstance(store, Store):
        conn = sqlite3.connect(store.home / "objects" / "objects.sqlite")
        with conn:
            conn.execute("UPDATE puts SET at = at - ?", (seconds,))
        conn.close()
    else:
        assert isinstance(store, PgStore)
        with psycopg.connect(store.url, autocommit=True) as pg:
            pg.execute(
                "UPDATE infai_object_puts SET at = at - make_interval(secs => %s)", (seconds,)
            )


def _later() -> int:
    return time.time_ns() + 10**12  # no file is racy: every one is cached


@pytest.mark.parametrize("when", ["gc after the walk", "walk during gc's reading"])
def test_a_short_grace_gc_never_removes_what_a_recorded_snapshot_names(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "f.txt").write_text("v0\n")
    made = Snapshotter.__init__

    def no_racy_files(self: Snapshotter, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self._clock = _later

    monkeypatch.setattr(Snapshotter, "__init__", no_racy_files)
    sid = store.create_session(working_dir=str(wd)).id
    files = SessionCheckpoints(store, wd, CheckpointSettings(), watch=False)
    with store.open_writer(sid) as writer:
        first = files.snapshot_record(writer, None, "turn start")
        assert first is not None
        event = writer.append(first, "system")
    (wd / "f.txt").write_text("v1, seen only by a diff\n")
    diff_at(store, sid, event.id)  # another process's unrecorded snapshot: v1 put
    files.close()
    _age(store, AGE)  # twenty minutes later, by the store's clock and the snapshot's
    later = time.time() + AGE
    monkeypatch.setattr(snapshot_module, "_wall", lambda: later)
    files = SessionCheckpoints(store, wd, CheckpointSettings(), watch=False)
    assert files.cp.snapshot().hashed == 0  # v1 is a cache hit (recorded nowhere)
    recorded: list[SnapshotRecord] = []

    def record() -> None:
        """A turn's snapshot, recorded, by a session open meanwhile (its open mark
        is the agent session's, on PostgreSQL)."""
        mark = store.open_mark(sid)
        try:
            with store.open_writer(sid) as writer:
                got = files.snapshot_record(writer, None, "turn start")
                assert isinstance(got, SnapshotRecord)
                writer.append(got, "system")
                recorded.append(got)
        finally:
            mark.release()

    if when == "gc after the walk":
        real = Snapshotter.snapshot

        def snapshot_then_gc(self: Snapshotter, *args: object, **kwargs: object) -> object:
            got = real(self, *args, **kwargs)  # type: ignore[arg-type]
            collect_garbage(store, grace=SHORT)  # before the event is appended
            return got

        monkeypatch.setattr(Snapshotter, "snapshot", snapshot_then_gc)
        record()
        monkeypatch.setattr(Snapshotter, "snapshot", real)
    else:

        def progress(done: int, total: int) -> None:
            if done == total and not recorded:  # every session read: none names v1
                record()  # a session opened while gc reads, and its snapshot

        collect_garbage(store, grace=SHORT, progress=progress)
    files.close()
    assert len(recorded) == 1
    assert not store.objects.missing(reachable(store.objects, [recorded[0].tree]))


def test_a_checkout_is_an_open_session_to_a_short_grace_gc(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``session checkout`` records the files now ("before restore", cache hits)
    then restores: on PostgreSQL it held no open mark, so a short-grace gc after
    its snapshot removed the hits its "before restore" event then named."""
    from infai.agent import OnRestore, checkout

    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "no-such-config.toml"))  # snapshots on
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "f.txt").write_text("v0\n")
    made = Snapshotter.__init__

    def no_racy_files(self: Snapshotter, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self._clock = _later

    monkeypatch.setattr(Snapshotter, "__init__", no_racy_files)
    sid = store.create_session(working_dir=str(wd)).id
    files = SessionCheckpoints(store, wd, CheckpointSettings(), watch=False)
    with store.open_writer(sid) as writer:
        first = files.snapshot_record(writer, None, "turn start")
        assert first is not None
        event = writer.append(first, "system")
    files.close()
    (wd / "f.txt").write_text("v1, seen only by a diff\n")
    diff_at(store, sid, event.id)
    _age(store, AGE)
    later = time.time() + AGE
    monkeypatch.setattr(snapshot_module, "_wall", lambda: later)
    real = Snapshotter.snapshot
    ran: list[bool] = []

    def snapshot_then_gc(self: Snapshotter, *args: object, **kwargs: object) -> object:
        got = real(self, *args, **kwargs)  # type: ignore[arg-type]
        if not ran:  # the checkout's first snapshot: the files now, to be recorded
            ran.append(True)
            collect_garbage(store, grace=SHORT)
        return got

    monkeypatch.setattr(Snapshotter, "snapshot", snapshot_then_gc)
    done = checkout(store, sid, event.id, OnRestore(force=True))
    assert ran and done.before_id is not None
    assert (wd / "f.txt").read_text() == "v0\n"
    with store.open_reader(sid) as view:
        before = view.event(done.before_id, resolve=True).record
    assert isinstance(before, SnapshotRecord)
    assert not store.objects.missing(reachable(store.objects, [before.tree]))

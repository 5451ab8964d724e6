"""Recovery of another session's restore in a shared (PostgreSQL) store: the
rule of :meth:`SessionCheckpoints.recover` (recorded on the session that started it
when that one is open nowhere, else on the recovering one, naming it), and
exactly once when a recovery is killed after appending. Here a session is
"open" by its open mark (writers take no lock), so "open elsewhere" is a mark
held by another store object, as another process holds one. A real
PostgreSQL server, a real directory.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.checkpoints import Checkpoints, Restorer
from infai.checkpoints.recovered import JOURNAL
from infai.checkpoints.session import OnRestore, SessionCheckpoints, nearest
from infai.store import RestoreRecord
from infai.store.pg import PgStore


class Killed(BaseException):
    """The process dies here (no ``except`` of the restore catches it)."""


@pytest.fixture
def store(pg_url: str, tmp_path: Path) -> Iterator[PgStore]:
    with PgStore(pg_url, home=tmp_path / "home") as opened:
        yield opened


@pytest.fixture
def elsewhere(pg_url: str, tmp_path: Path) -> Iterator[PgStore]:
    """The same store opened by "another process" (its own connections and marks)."""
    with PgStore(pg_url, home=tmp_path / "home") as opened:
        yield opened


class Sessions:
    """A, B, C in one directory; A restored its first snapshot's files and was
    killed once they were applied, before the record (the journal says applied)."""

    def __init__(self, store: PgStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store, self.work = store, tmp_path / "w"
        self.work.mkdir()
        (self.work / "a.txt").write_text("one\n")
        self.a, self.b, self.c = (
            store.create_session(working_dir=str(self.work)).id for _ in range(3)
        )
        files = SessionCheckpoints(store, self.work, watch=False)
        real = Checkpoints.apply

        def apply(cp: Checkpoints, *args: Any, **kwargs: Any) -> Any:
            real(cp, *args, **kwargs)
            raise Killed

        try:
            with store.open_writer(self.a) as writer:
                first = files.snapshot_record(writer, None, "turn start")
                assert first is not None
                self.first = writer.append(first, "system").id
                self.target = first.tree
                (self.work / "a.txt").write_text("two\n")
                second = files.snapshot_record(writer, None, "after bash")  # a tool's change
                assert second is not None
                writer.append(second, "system")
                monkeypatch.setattr(Checkpoints, "apply", apply)
                with pytest.raises(Killed):
                    files.restore(writer, self.first, OnRestore(), attach=None)
                monkeypatch.undo()
        finally:
            files.close()
        assert (self.work / "a.txt").read_text() == "one\n"
        body = self.journal()
        assert body is not None and body["phase"] == "applied"
        self.tag = body["tmp"]

    def journal(self) -> dict[str, Any] | None:
        return Restorer(self.store.objects, self.work, self.store.home).pending()

    def recover(self, sid: str) -> str | None:
        files = SessionCheckpoints(self.store, self.work, watch=False)
        try:
            with self.store.open_writer(sid) as writer:
                return files.recover(writer)
        finally:
            files.close()

    def restores(self, sid: str) -> list[RestoreRecord]:
        with self.store.open_reader(sid) as view:
            found = [view.event(e.id, resolve=True).record for e in view.entries()]
        return [r for r in found if isinstance(r, RestoreRecord)]

    def head_tree(self, sid: str) -> str | None:
        with self.store.open_reader(sid) as view:
            found = nearest(view, None)
        return found[1].tree if found is not None else None


@pytest.fixture
def s(store: PgStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sessions:
    return Sessions(store, tmp_path, monkeypatch)


def test_completed_in_another_session_is_recorded_on_its_own(s: Sessions) -> None:
    said = s.recover(s.b)
    assert said is not None and f"recorded on session {s.a}'s timeline" in said
    (got,) = s.restores(s.a)
    assert got.source == s.first and got.metadata[JOURNAL] == s.tag
    assert s.head_tree(s.a) == s.target  # after the event it followed: HEAD is it
    assert s.restores(s.b) == [] and s.journal() is None
    assert s.recover(s.b) is None


@pytest.mark.parametrize("holder", ["another process", "this process"])
def test_a_session_open_elsewhere_gets_its_restore_recorded_here(
    s: Sessions, elsewhere: PgStore, holder: str
) -> None:
    # A open in another process, or in this one (its mark on this store's marks
    # connection: seen from the connection that asks all the same)
    mark = (elsewhere if holder == "another process" else s.store).open_mark(s.a)
    try:
        said = s.recover(s.b)
    finally:
        mark.release()
    assert s.restores(s.a) == []  # A's timeline untouched while it was open
    (got,) = s.restores(s.b)
    assert said is not None and "recorded on this session's timeline" in said
    assert got.metadata["session"] == s.a and got.metadata["source"] == s.first
    assert got.before is None and got.metadata[JOURNAL] == s.tag
    assert s.recover(s.a) is None  # finished: A opening later records nothing


def test_a_removed_session_gets_its_restore_recorded_here(s: Sessions) -> None:
    s.store.remove_session(s.a)
    said = s.recover(s.b)
    assert said is not None and "recorded on this session's timeline" in said
    (got,) = s.restores(s.b)
    assert got.metadata["session"] == s.a and s.journal() is None


def test_a_rollback_in_another_session_is_recorded_nowhere(
    store: PgStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    (work / "b.txt").write_text("one\n")
    a, b = (store.create_session(working_dir=str(work)).id for _ in range(2))
    files = SessionCheckpoints(store, work, watch=False)
    from infai.checkpoints import restore as restore_module

    real, done = restore_module._Disk.put, list[bool]()

    def put(disk: Any, info: Any) -> None:
        if done:
            raise Killed
        done.append(True)
        real(disk, info)

    try:
        with store.open_writer(a) as writer:
            first = files.snapshot_record(writer, None, "turn start")
            assert first is not None
            first_id = writer.append(first, "system").id
            (work / "a.txt").write_text("two\n")
            (work / "b.txt").write_text("two\n")
            second = files.snapshot_record(writer, None, "after bash")  # a tool's change
            assert second is not None
            writer.append(second, "system")
            monkeypatch.setattr(restore_module._Disk, "put", put)
            with pytest.raises(Killed):
                files.restore(writer, first_id, OnRestore(), attach=None)
            monkeypatch.undo()
    finally:
        files.close()
    recovering = SessionCheckpoints(store, work, watch=False)
    try:
        with store.open_writer(b) as writer:
            said = recovering.recover(writer)
    finally:
        recovering.close()
    assert said is not None and "rolled back" in said and f"session {a}" in said
    assert (work / "a.txt").read_text() == "two\n" and (work / "b.txt").read_text() == "two\n"
    for sid in (a, b):
        with store.open_reader(sid) as view:
            kinds = [e.kind for e in view.entries()]
        assert "restore" not in kinds


@pytest.mark.parametrize("where", ["on A", "on B, A open elsewhere"])
def test_a_recovery_killed_after_its_append_is_not_recorded_again(
    s: Sessions, elsewhere: PgStore, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """B's recovery appends, then dies before the journal is deleted; C's
    recovery (A still as it was) finds that record and adds none."""
    mark = elsewhere.open_mark(s.a) if where != "on A" else None
    try:
        monkeypatch.setattr(Restorer, "finish", lambda self: (_ for _ in ()).throw(Killed()))
        with pytest.raises(Killed):
            s.recover(s.b)
        monkeypatch.undo()
        assert s.journal() is not None
        said = s.recover(s.c)
    finally:
        if mark is not None:
            mark.release()
    assert said is not None and "completed" in said
    assert "recorded on this session's timeline" not in said
    assert s.restores(s.c) == [] and s.journal() is None
    recorded = s.restores(s.a) + s.restores(s.b)
    assert len(recorded) == 1 and recorded[0].metadata[JOURNAL] == s.tag


CHILD = r"""
import os, signal, sys
from infai.checkpoints import Restorer
from infai.checkpoints.session import SessionCheckpoints
from infai.store.pg import PgStore

url, home, wd, sid = sys.argv[1:5]
store = PgStore(url, home=home)
real = Restorer.finish


def finish(self):
    os.kill(os.getpid(), signal.SIGKILL)  # the record appended, the journal still there


Restorer.finish = finish
files = SessionCheckpoints(store, wd, watch=False)
with store.open_writer(sid) as writer:
    print("recovering", flush=True)
    files.recover(writer)
print("done", flush=True)
"""


def test_a_recovery_process_killed_after_recording_on_a_is_not_recorded_again(
    s: Sessions, pg_url: str
) -> None:
    """The same with a real SIGKILL: B's recovery process dies with its
    connections (nothing of it is rolled back after the append committed)."""
    child = subprocess.run(
        [sys.executable, "-c", CHILD, pg_url, str(s.store.home), str(s.work), s.b],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert s.journal() is not None and len(s.restores(s.a)) == 1
    said = s.recover(s.c)
    assert said is not None and f"recorded on session {s.a}'s timeline" in said
    assert len(s.restores(s.a)) == 1 and s.restores(s.b) == s.restores(s.c) == []
    assert s.journal() is None and s.head_tree(s.a) == s.target

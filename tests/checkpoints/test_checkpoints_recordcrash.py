"""A restore, or the recovery of one, killed (SIGKILL, a real child process)
around its timeline record: after the next open the files are the old ones
with no record of the restore, or the new ones recorded exactly once.

The points: a restore killed once applied (its journal says so, no record
yet), once its record is appended (the journal not yet deleted), once the
journal is deleted; a recovery of such a journal killed once it has noted in
the journal where it will append, once appended, once the journal is
deleted. The recovery of a journal used to delete it before recording the
restore: a kill between left the new files with no record, for ever. And a
recovery on a session standing in for one open elsewhere, killed after its
append, was recorded again by the next recovery, on another session.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from infai.checkpoints import Restorer, Snapshotter
from infai.checkpoints.recovered import JOURNAL
from infai.checkpoints.session import OnRestore, SessionCheckpoints, nearest
from infai.store import MessageRecord, RestoreRecord, Store
from infai.store.file.objects import FileObjects

#: restores killed at random in the loop
ROUNDS = 16

CHILD = r"""
import os, signal, sys, time
from infai.checkpoints import Checkpoints, Restorer
from infai.checkpoints.session import OnRestore, SessionCheckpoints
from infai.store import Store

home, wd, mode, sid, event, point = sys.argv[1:7]


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def pause():  # "slow": widen the windows around the record, for random kills
    time.sleep(0.15)


def kill_after(cls, name, when=lambda *a, **k: True, then=die):
    real = getattr(cls, name)

    def wrapped(self, *a, **k):
        out = real(self, *a, **k)
        if when(*a, **k):
            then()
        return out

    setattr(cls, name, wrapped)


def restore_record(record, *a, **k):
    return record.kind == "restore"


store = Store(home)
files = SessionCheckpoints(store, wd, watch=False)
writer = store.open_writer(sid)
if point == "applied":
    kill_after(Checkpoints, "apply")
elif point == "noted":
    kill_after(Checkpoints, "note")
elif point == "finished":
    kill_after(Restorer, "finish")
elif point == "appended":
    kill_after(type(writer), "append", restore_record)
elif point == "slow":
    kill_after(Checkpoints, "apply", then=pause)
    kill_after(type(writer), "append", restore_record, then=pause)
print("ready", flush=True)
if mode == "restore":
    files.restore(writer, event, OnRestore(force=True), attach=None)
else:
    print(files.recover(writer), flush=True)
print("done", flush=True)
"""


def run_child(home: Path, wd: Path, mode: str, sid: str, event: str, point: str) -> bool:
    """Run the child to its end or to its kill at ``point``; whether it was killed."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(home), str(wd), mode, sid, event, point],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = child.communicate(timeout=120)
    assert out.startswith("ready"), err
    if child.returncode == -signal.SIGKILL:
        return True
    assert child.returncode == 0 and out.rstrip().endswith("done"), err
    return False


class Setup:
    """Session A with two snapshots (files ``one`` then ``two``), sessions B and C
    of the same directory; the disk holds ``two``."""

    def __init__(self, tmp_path: Path, files: int = 6) -> None:
        self.home, self.wd = tmp_path / "home", tmp_path / "wd"
        self.wd.mkdir()
        self._write("one", files)
        store = Store(self.home)
        self.a, self.b, self.c = (
            store.create_session(working_dir=str(self.wd)).id for _ in range(3)
        )
        work = SessionCheckpoints(store, self.wd, watch=False)
        try:
            with store.open_writer(self.a) as writer:
                first = work.snapshot_record(writer, None, "one")
                assert first is not None
                self.one = writer.append(first, "system").id
                self.tree_one = first.tree
                self._write("two", files)
                (self.wd / "f0.txt").unlink()
                second = work.snapshot_record(writer, None, "two")
                assert second is not None
                self.two = writer.append(second, "system").id
                self.tree_two = second.tree
        finally:
            work.close()

    def _write(self, version: str, files: int) -> None:
        for i in range(files):
            (self.wd / f"f{i}.txt").write_text(f"{version} {i}\n" * 50)

    def child(self, mode: str, sid: str, point: str, event: str = "") -> bool:
        return run_child(self.home, self.wd, mode, sid, event or self.one, point)

    def disk(self) -> str:
        return Snapshotter(FileObjects(self.home), self.wd).snapshot().tree  # no cache

    def journal(self) -> dict[str, object] | None:
        return Restorer(FileObjects(self.home), self.wd, self.home).pending()

    def recover(self, sid: str) -> str | None:
        store = Store(self.home)
        files = SessionCheckpoints(store, self.wd, watch=False)
        try:
            with store.open_writer(sid) as writer:
                return files.recover(writer)
        finally:
            files.close()

    def restores(self, sid: str) -> list[RestoreRecord]:
        with Store(self.home).open_reader(sid) as view:
            found = [view.event(e.id, resolve=True).record for e in view.entries()]
        return [r for r in found if isinstance(r, RestoreRecord)]

    def all_restores(self) -> list[RestoreRecord]:
        return [r for sid in (self.a, self.b, self.c) for r in self.restores(sid)]

    def head_tree(self, sid: str) -> str | None:
        with Store(self.home).open_reader(sid) as view:
            found = nearest(view, None)
        return found[1].tree if found is not None else None

    def assert_restored_once(self) -> RestoreRecord:
        """The disk holds ``one``, the journal is gone, exactly one restore is recorded."""
        assert self.journal() is None
        assert self.disk() == self.tree_one
        (got,) = self.all_restores()
        assert got.tree == self.tree_one and got.source == self.one
        return got


@pytest.mark.crash
@pytest.mark.parametrize("point", ["applied", "appended", "finished"])
def test_a_restore_killed_around_its_record_is_recorded_once(tmp_path: Path, point: str) -> None:
    s = Setup(tmp_path)
    assert s.child("restore", s.a, point)
    assert s.journal() is not None or point == "finished"
    said = s.recover(s.a)
    assert (said is None) == (point == "finished")
    got = s.assert_restored_once()
    assert got.metadata[JOURNAL] and s.head_tree(s.a) == s.tree_one
    assert s.recover(s.a) is None and len(s.all_restores()) == 1


@pytest.mark.crash
@pytest.mark.parametrize("point", ["noted", "appended", "finished"])
def test_a_recovery_killed_around_its_record_is_recorded_once(tmp_path: Path, point: str) -> None:
    """The recovery that deleted the journal before recording: killed at
    ``finished``, the new files had no record at all."""
    s = Setup(tmp_path)
    assert s.child("restore", s.a, "applied")
    body = s.journal()
    assert body is not None
    tag = body["tmp"]
    assert s.child("recover", s.a, point)
    s.recover(s.a)
    got = s.assert_restored_once()
    assert got.metadata[JOURNAL] == tag and s.head_tree(s.a) == s.tree_one


@pytest.mark.crash
@pytest.mark.parametrize("point", ["noted", "appended", "finished"])
def test_a_recovery_in_another_session_killed_after_recording_there(
    tmp_path: Path, point: str
) -> None:
    """B recovers A's restore (A not open): recorded on A. Killed, then C
    recovers: the record on A is found, nothing recorded on C."""
    s = Setup(tmp_path)
    assert s.child("restore", s.a, "applied")
    assert s.child("recover", s.b, point)
    s.recover(s.c)
    s.assert_restored_once()
    assert len(s.restores(s.a)) == 1 and s.head_tree(s.a) == s.tree_one


@pytest.mark.crash
@pytest.mark.parametrize("point", ["noted", "appended", "finished"])
def test_a_stand_in_record_killed_is_not_recorded_again_elsewhere(
    tmp_path: Path, point: str
) -> None:
    """A is open elsewhere (its writer held here): B's recovery records A's
    restore on B, naming A, and is killed. C's recovery, A still open, used to
    record it once more, on C: it finds B's record now (the journal noted B
    before that append)."""
    s = Setup(tmp_path)
    assert s.child("restore", s.a, "applied")
    with Store(s.home).open_writer(s.a):
        assert s.child("recover", s.b, point)
        said = s.recover(s.c)
    s.recover(s.a)
    got = s.assert_restored_once()
    assert got.metadata["session"] == s.a and s.restores(s.a) == []
    if point == "noted":  # killed before B's append: C records it, naming A
        assert said is not None and "recorded on this session's timeline" in said
        assert s.restores(s.b) == [] and len(s.restores(s.c)) == 1
    else:
        assert said is None or "recorded on this session's timeline" not in said
        assert len(s.restores(s.b)) == 1 and s.restores(s.c) == []


def _as_older_infai(s: Setup, *, tag: bool) -> None:
    """Rewrite the pending journal as an older infai wrote it: no ``seq`` in its
    metadata (and, with ``tag`` false, no tag either: before temporary names had one)."""
    path = Restorer(FileObjects(s.home), s.wd, s.home).journal
    body = json.loads(path.read_text())
    del body["metadata"]["seq"]
    if not tag:
        del body["tmp"]
    path.write_text(json.dumps(body))


@pytest.mark.crash
@pytest.mark.parametrize("tag", [True, False], ids=["tagged", "untagged"])
@pytest.mark.parametrize("point", ["noted", "appended", "finished"])
def test_an_older_journal_recovered_with_kills_is_recorded_once(
    tmp_path: Path, point: str, tag: bool
) -> None:
    s = Setup(tmp_path)
    assert s.child("restore", s.a, "applied")
    _as_older_infai(s, tag=tag)
    killed = s.child("recover", s.a, point)
    assert killed or (point == "noted" and not tag)  # an untagged one notes nothing
    s.recover(s.a)
    s.assert_restored_once()


def test_an_older_infais_record_with_its_journal_left_is_not_recorded_again(
    tmp_path: Path,
) -> None:
    """An older infai appended the record (no tag in it) and was killed before
    deleting the journal: recovery finds the files at HEAD are the restore's."""
    s = Setup(tmp_path)
    assert s.child("restore", s.a, "applied")
    _as_older_infai(s, tag=False)
    body = s.journal()
    assert body is not None
    with Store(s.home).open_writer(s.a) as writer:
        writer.append(RestoreRecord(tree=str(body["target"]), source=s.one), "system")
    said = s.recover(s.a)
    assert said is not None and "completed" in said
    s.assert_restored_once()


def _timed_round(s: Setup, target_event: str, delay: float | None) -> float:
    """A restore child killed ``delay`` seconds after it is ready (``None``: let it
    finish); the seconds from ready to its end."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(s.home), str(s.wd), "restore", s.a, target_event, "slow"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "ready"
        start = time.monotonic()
        if delay is None:
            assert child.stdout.readline().strip() == "done"
        else:
            time.sleep(delay)
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=120)
        return time.monotonic() - start
    finally:
        child.stdout.close()
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.crash
def test_restores_killed_at_random_are_recorded_exactly_when_done(tmp_path: Path) -> None:
    """Restores back and forth, each killed at a random moment (every other one
    late in its run: the record and the journal's end are there; the child
    pauses after applying and after appending the record, so kills land
    between), each recovered
    by the next open, by A or by B (which records on A, not open): the timeline
    records one restore per round whose files changed, none for one rolled back,
    and A's files at HEAD are the disk's."""
    s = Setup(tmp_path, files=40)
    rng = random.Random(1717)
    _timed_round(s, s.one, None)  # two whole runs (the second warm): how long one takes
    took = _timed_round(s, s.two, None)
    on_disk, done, events = s.tree_two, 2, {s.tree_one: s.one, s.tree_two: s.two}
    completed = 0  # rounds a recovery recorded (killed between apply and journal's end)
    for n in range(ROUNDS):
        target = s.tree_two if on_disk == s.tree_one else s.tree_one
        delay = rng.uniform(took * 0.3, took) if n % 2 else rng.uniform(0, took * 0.6)
        _timed_round(s, events[target], delay)
        said = s.recover(s.a if n % 3 else s.b)
        completed += said is not None and "completed" in said
        now = s.disk()
        assert now in (on_disk, target), "a half-restored working directory"
        assert s.journal() is None
        done += now == target
        records = s.all_restores()
        assert len(records) == done, (n, now == target)
        tags = [r.metadata.get(JOURNAL) for r in records]
        assert len(set(tags)) == len(tags)
        assert s.head_tree(s.a) == now  # A's timeline agrees with the disk
        on_disk = now
    print(f"{done - 2} of {ROUNDS} killed restores done, {completed} of them by recovery")


class Killed(BaseException):
    """The process dies here (no ``except`` of the restore catches it)."""


def test_a_recovery_reads_only_the_events_since_the_restore_began(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two hundred messages before the restore: finding its record reads the
    events from the count the journal holds on, not the session."""
    s = Setup(tmp_path)
    store = Store(s.home)
    files = SessionCheckpoints(store, s.wd, watch=False)
    try:
        with store.open_writer(s.a) as writer:
            for i in range(200):
                writer.append(MessageRecord(content=f"message {i}"), "user")
            monkeypatch.setattr(Restorer, "finish", lambda self: (_ for _ in ()).throw(Killed()))
            with pytest.raises(Killed):  # killed after the record, before the journal's end
                files.restore(writer, s.one, OnRestore(force=True), attach=None)
            monkeypatch.undo()
            writer_type = type(writer)
    finally:
        files.close()
    assert s.journal() is not None and len(s.restores(s.a)) == 1
    read: list[int] = []
    real = writer_type.entry_at

    def entry_at(self: Any, seq: int) -> Any:
        read.append(seq)
        return real(self, seq)

    monkeypatch.setattr(writer_type, "entry_at", entry_at)
    said = s.recover(s.a)
    monkeypatch.undo()
    assert said is not None and "completed" in said
    s.assert_restored_once()
    assert read and min(read) >= 202  # the two snapshots and the messages: never read
    assert len(read) <= 3  # the "before restore" snapshot and the record

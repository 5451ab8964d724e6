"""What a restore leaves behind and who gets told: a user's file that has a
restore's temporary name, a damaged object a rollback needs, and a restore one
session started that recovery in another session completes.

The kills are simulated as the other restore tests do: an exception no
``except`` of the restore catches, raised as the second file is written.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ckpt_support import later
from infai.checkpoints import Checkpoints
from infai.checkpoints import disk as disk_module
from infai.checkpoints import restore as restore_module
from infai.checkpoints.session import SessionCheckpoints, nearest
from infai.store import RestoreRecord, Store
from infai.store.codec import digest_of

FOREIGN = "named like a restore's temporary file, but not made by the restore"
TAKEN = "not changed: a file the restore did not make holds its temporary name"


class Killed(BaseException):
    """The process dies here (no ``except`` of the restore catches it)."""


def _checkpoints(wd: Path, home: Path) -> Checkpoints:
    c = Checkpoints(Store(home).objects, wd, home, watch=False)
    c.snapshotter._clock = later  # no file is racy
    return c


def _killed_after_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    real = restore_module._Disk.put
    done: list[bool] = []

    def put(self: Any, info: Any) -> None:
        if done:
            raise Killed
        done.append(True)
        real(self, info)

    monkeypatch.setattr(restore_module._Disk, "put", put)


def _three_files(wd: Path, home: Path) -> tuple[Checkpoints, restore_module.RestorePlan]:
    """a, b and c each differ between the target (``old``) and the disk (``new``)."""
    wd.mkdir()
    for name in "abc":
        (wd / f"{name}.txt").write_text(f"{name} old\n")
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    for name in "abc":
        (wd / f"{name}.txt").write_text(f"{name} new, a longer line than before\n")
    _, plan = c.plan(target)
    assert [a.op for a in plan.actions] == ["write"] * 3
    return c, plan


def _killed_restore(
    wd: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Checkpoints, str]:
    """A restore killed as it writes b.txt (a.txt written): the journal's tag."""
    c, plan = _three_files(wd, home)
    _killed_after_one_write(monkeypatch)
    with pytest.raises(Killed):
        c.apply(plan)
    monkeypatch.undo()
    assert (wd / "a.txt").read_text() == "a old\n"
    assert (wd / "b.txt").read_text() == "b new, a longer line than before\n"
    journal = c.restorer.pending()
    assert journal is not None
    return c, str(journal.get("tmp", ""))


def test_a_users_file_with_an_older_restores_temporary_name_survives_a_restore(
    tmp_path: Path,
) -> None:
    """Every restore removed a file named ``.infai-restore-<hash of a planned
    path>.tmp`` beside each planned path, without a word: a user's file by that
    name was lost. Its name now carries the restore's random tag."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    wd.mkdir()
    mine = wd / disk_module._tmp_name("a.txt")  # the name every restore used
    mine.write_text("my notes, in both snapshots\n")
    (wd / "a.txt").write_text("a old\n")
    c = _checkpoints(wd, home)
    target = c.snapshot().tree
    (wd / "a.txt").write_text("a new\n")
    _, plan = c.plan(target)
    assert plan.touched == ["a.txt"]
    got = c.apply(plan)
    c.finish()
    assert got == ["a.txt"] and got.left == {}
    assert (wd / "a.txt").read_text() == "a old\n"
    assert mine.read_text() == "my notes, in both snapshots\n"


def test_a_file_made_with_the_restores_own_temporary_name_is_kept_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even the exact name (the tag read from the journal) is not enough: a file
    that does not hold what the restore writes there is not the restore's. It is
    kept, reported, and the path beside it is left as it is."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    c, plan = _three_files(wd, home)
    real = disk_module._Disk.drop_tmp
    made: list[Path] = []

    def drop_tmp(self: Any, path: str, *sides: Any) -> str | None:
        if not made:  # the journal is written: the tag is known
            journal = c.restorer.pending()
            assert journal is not None
            made.append(wd / disk_module._tmp_name("b.txt", journal["tmp"]))
            made[0].write_text("mine\n")
        return real(self, path, *sides)

    monkeypatch.setattr(disk_module._Disk, "drop_tmp", drop_tmp)
    got = c.apply(plan)
    c.finish()
    assert made[0].read_text() == "mine\n"
    assert got == ["a.txt", "c.txt"]
    assert got.left == {made[0].name: FOREIGN, "b.txt": TAKEN}
    assert (wd / "b.txt").read_text() == "b new, a longer line than before\n"
    assert (wd / "a.txt").read_text() == "a old\n" and (wd / "c.txt").read_text() == "c old\n"


@pytest.mark.parametrize("journal", ["tagged", "older infai (no tag)"])
def test_a_users_file_with_the_temporary_name_survives_a_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: str
) -> None:
    """After a kill, files named exactly as the restore's temporary files: the
    restore's own leftover (the first part of the bytes it was writing) is
    removed; the user's are kept and reported, and the path whose temporary name
    one holds is left as the restore made it (reported too)."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    c, tag = _killed_restore(wd, home, monkeypatch)
    if journal != "tagged":  # a journal an older infai wrote: no tag, the old names
        body = json.loads(c.restorer.journal.read_text())
        del body["tmp"]
        c.restorer.journal.write_text(json.dumps(body))
        tag = ""
    leftover = wd / disk_module._tmp_name("b.txt", tag)
    leftover.write_text("b o")  # the write killed part-way
    mine_a = wd / disk_module._tmp_name("a.txt", tag)
    mine_a.write_text("mine, beside a\n")
    empty = wd / disk_module._tmp_name("c.txt", tag)
    empty.write_text("")  # a write killed before its first byte, or a user's: no byte lost
    rec = _checkpoints(wd, home).recover()
    assert rec is not None and rec.action == "rolled back"
    assert not leftover.exists()
    assert mine_a.read_text() == "mine, beside a\n"
    assert not empty.exists()
    assert rec.left == {mine_a.name: FOREIGN, "a.txt": TAKEN}
    assert (wd / "a.txt").read_text() == "a old\n"  # as the restore made it: reported
    assert (wd / "b.txt").read_text() == "b new, a longer line than before\n"
    assert (wd / "c.txt").read_text() == "c new, a longer line than before\n"
    assert c.restorer.pending() is None


def _damage(home: Path, digest: str) -> None:
    conn = sqlite3.connect(home / "objects" / "objects.sqlite")
    try:
        got = conn.execute("UPDATE objects SET data = ? WHERE digest = ?", (b"rot", digest))
        assert got.rowcount == 1
        conn.commit()
    finally:
        conn.close()


def test_a_rollback_needing_a_damaged_object_finishes_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollback whose before bytes are damaged in the store raised on every
    recovery and kept its journal: every later restore of the directory was
    refused. Now that path is left as the restore made it and reported, naming
    the object, the rest rolled back and the journal finished."""
    wd, home = tmp_path / "wd", tmp_path / "home"
    _killed_restore(wd, home, monkeypatch)
    damaged = digest_of(b"a new, a longer line than before\n")
    _damage(home, damaged)
    again = _checkpoints(wd, home)
    rec = again.recover()
    assert rec is not None and rec.action == "rolled back"
    assert rec.left == {
        "a.txt": f"not put back: its bytes are damaged in the store (object {damaged})"
    }
    assert again.restorer.pending() is None and again.recover() is None
    assert (wd / "a.txt").read_text() == "a old\n"  # as the restore left it
    assert (wd / "b.txt").read_text() == "b new, a longer line than before\n"
    assert (wd / "c.txt").read_text() == "c new, a longer line than before\n"


# -- a restore of one session completed by recovery in another --------------------


def _applied_not_recorded(tmp_path: Path) -> tuple[Store, Path, str, str, str]:
    """Session A records two snapshots, then restores the first and is killed
    after the restore is applied, before it is recorded. (store, workdir, A, B,
    A's first snapshot event); B is another session of the same directory."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    store = Store(tmp_path / "home")
    a = store.create_session(working_dir=str(work)).id
    b = store.create_session(working_dir=str(work)).id
    files = SessionCheckpoints(store, work, watch=False)
    try:
        with store.open_writer(a) as writer:
            first = files.snapshot_record(writer, None, "turn start")
            assert first is not None
            first_id = writer.append(first, "system").id
            (work / "a.txt").write_text("two\n")
            second = files.snapshot_record(writer, None, "turn start")
            assert second is not None
            writer.append(second, "system")
            _now, plan, _last, _target = files.plan(writer, first_id)
            meta = {"source": first_id, "before": None, "session": a, "parent": writer.head}
            files.cp.apply(plan, metadata=meta)  # killed here: no record, the journal stays
    finally:
        files.close()
    assert (work / "a.txt").read_text() == "one\n"
    return store, work, a, b, first_id


def _recover_in(store: Store, work: Path, sid: str) -> str | None:
    files = SessionCheckpoints(store, work, watch=False)
    try:
        with store.open_writer(sid) as writer:
            return files.recover(writer)
    finally:
        files.close()


def _head_restore(store: Store, sid: str) -> RestoreRecord | None:
    with store.open_reader(sid) as view:
        if view.head is None:
            return None
        record = view.event(view.head, resolve=True).record
    return record if isinstance(record, RestoreRecord) else None


def test_a_restore_completed_in_another_session_is_recorded_on_its_own(tmp_path: Path) -> None:
    store, work, a, b, first = _applied_not_recorded(tmp_path)
    said = _recover_in(store, work, b)
    got = _head_restore(store, a)
    assert got is not None and got.source == first
    assert said is not None and "completed" in said and f"session {a}" in said
    with store.open_reader(a) as view:
        found = nearest(view, None)
    assert found is not None and found[1].tree == got.tree
    assert _head_restore(store, b) is None  # nothing on B's timeline
    assert _recover_in(store, work, b) is None  # the journal is finished


def test_a_restore_of_a_session_open_elsewhere_is_recorded_here_naming_it(
    tmp_path: Path,
) -> None:
    store, work, a, b, first = _applied_not_recorded(tmp_path)
    with store.open_writer(a) as held:  # A is open in another process
        said = _recover_in(store, work, b)
        assert nearest(held, None) is not None
    assert _head_restore(store, a) is None  # A's timeline untouched
    got = _head_restore(store, b)
    assert got is not None and got.source == first
    assert said is not None and "recorded on this session's timeline" in said
    assert f"session {a}" in said and first in said
    assert got.metadata["session"] == a and got.metadata["source"] == first
    assert a in got.metadata["note"]
    assert _recover_in(store, work, b) is None


def test_a_rollback_in_another_session_names_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rolled back restore is recorded nowhere (the disk is its before snapshot
    again); the notice says whose it was."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    (work / "b.txt").write_text("one\n")
    store = Store(tmp_path / "home")
    a = store.create_session(working_dir=str(work)).id
    b = store.create_session(working_dir=str(work)).id
    files = SessionCheckpoints(store, work, watch=False)
    try:
        with store.open_writer(a) as writer:
            first = files.snapshot_record(writer, None, "turn start")
            assert first is not None
            first_id = writer.append(first, "system").id
            (work / "a.txt").write_text("two\n")
            (work / "b.txt").write_text("two\n")
            second = files.snapshot_record(writer, None, "turn start")
            assert second is not None
            writer.append(second, "system")
            _now, plan, _last, _target = files.plan(writer, first_id)
            _killed_after_one_write(monkeypatch)
            meta = {"source": first_id, "before": None, "session": a, "parent": writer.head}
            with pytest.raises(Killed):
                files.cp.apply(plan, metadata=meta)
            monkeypatch.undo()
    finally:
        files.close()
    said = _recover_in(store, work, b)
    assert said is not None and "rolled back" in said and f"session {a}" in said
    assert (work / "a.txt").read_text() == "two\n" and (work / "b.txt").read_text() == "two\n"
    assert _head_restore(store, a) is None and _head_restore(store, b) is None


def test_a_restore_of_a_removed_session_is_recorded_here_naming_it(tmp_path: Path) -> None:
    store, work, a, b, first = _applied_not_recorded(tmp_path)
    store.remove_session(a)
    said = _recover_in(store, work, b)
    got = _head_restore(store, b)
    assert got is not None and got.source == first and got.metadata["session"] == a
    assert said is not None and "recorded on this session's timeline" in said

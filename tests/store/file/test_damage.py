"""Damage told from health: zeroed bytes before valid lines, and fsck next to a live writer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infai.store import CorruptionError, FileIO, MessageRecord, Store
from infai.store.file.fsck import fsck


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


# -- a zero run before the last valid line is taken for a torn tail -----------------------------


def test_zeroed_bytes_before_the_last_valid_line_are_corruption(tmp_path: Path) -> None:
    """chunks._is_torn calls any "line" holding four NULs torn. If the zeroed bytes eat
    the newline of an earlier line, lines_backward yields zeros + the last (valid,
    acknowledged) line as one line, committed_tail skips it as a torn tail, and open
    silently drops every event after the damage; a writer then truncates them (with
    only a note nobody prints). The spec: invalid bytes before the last valid record
    are corruption, reported by file and offset, nothing changed."""
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        ids = [w.append(msg(f"event {i}"), "user").id for i in range(3)]
    chunk = store.paths(sid).chunk(0)
    data = chunk.read_bytes()
    first_nl = data.index(b"\n")
    second_nl = data.index(b"\n", first_nl + 1)
    # a zeroed sector's worth of damage over the end of event 1 (its newline included)
    start = max(first_nl + 1, second_nl - 100)
    chunk.write_bytes(data[:start] + b"\0" * (second_nl + 1 - start) + data[second_nl + 1 :])
    with pytest.raises(CorruptionError) as exc, store.open_reader(sid) as r:
        assert r.count == 3, f"acknowledged events dropped: {ids[r.count :]}"
    assert exc.value.offset <= start


# -- fsck next to a live writer ------------------------------------------------------------------


class _StopBeforeIndex(BaseException):
    """Stands for the moment another process's writer is between commit and index write."""


class _PauseAfterCommit(FileIO):
    def __init__(self) -> None:
        self.armed = False

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        if self.armed and os.readlink(f"/proc/self/fd/{fd}").endswith("index.jsonl"):
            self.armed = False
            raise _StopBeforeIndex
        return super().pwrite(fd, data, offset)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_fsck_next_to_a_live_writer_reports_no_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsck takes no lock, analyses, and then re-reads every chunk in full (only chunks
    in `truncate_chunks` are cut to the analysed size). A line another process commits
    in between is checked against an index entry its writer has not written yet: a
    healthy session is reported as damaged ("entry #n is missing or stale", "HEAD is
    ..., newest event is ...") and `infai session fsck --all` exits 1. Fix: check only
    the analysed committed prefix of every chunk (plan.chunk_size for the last one)."""
    import infai.store.file.fsck as fsck_module

    pause = _PauseAfterCommit()
    store = Store(tmp_path / "home", io=pause)
    sid = store.create_session().id
    w = store.open_writer(sid)
    w.append(msg("a"), "user")
    real_analyze = fsck_module.analyze  # type: ignore[attr-defined]

    def analyze_then_other_process_appends(paths):  # type: ignore[no-untyped-def]
        plan = real_analyze(paths)
        pause.armed = True
        with pytest.raises(_StopBeforeIndex):
            w.append(msg("b"), "user")  # committed (fdatasync done), index not yet written
        return plan

    monkeypatch.setattr(fsck_module, "analyze", analyze_then_other_process_appends)
    report = fsck(store.paths(sid))
    assert report.problems == []

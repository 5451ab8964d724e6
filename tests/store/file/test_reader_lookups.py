"""A reader that reads every event by id scans the index once, not once per event.

``export_lines`` (and gc's ``session_roots``, a checkout's plan) read each event
through ``reader.event(id)``; each lookup of an id other than HEAD scanned the
whole index, so exporting a session took time in the square of its length
(5,000 events: over five seconds; ``infai --remote`` gave up waiting for the
header line of a long session). After a few such lookups the reader keeps an
id-to-seq map, as the writer does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infai.store import EventNotFound, MessageRecord, Store, export_lines
from infai.store.file.format import INDEX_WIDTH
from infai.store.file.reader import SessionReader


def test_an_export_reads_the_index_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session(name="long").id
    with store.open_writer(sid) as writer:
        ids = [writer.append(MessageRecord(content=f"m {i}"), "user").id for i in range(400)]
    reads: list[int] = []
    real = SessionReader._read_index

    def counted(self: SessionReader, length: int, offset: int) -> bytes:
        reads.append(length)
        return real(self, length, offset)

    monkeypatch.setattr(SessionReader, "_read_index", counted)
    lines = list(export_lines(store, sid))
    assert len(lines) == 401
    index = 400 * INDEX_WIDTH
    assert sum(reads) < 10 * index, (len(reads), sum(reads))  # was twice the index per event
    with store.open_reader(sid) as reader:  # the map answers as the scan did
        assert [reader.seq_of(i.upper()) for i in ids[:5]] == [0, 1, 2, 3, 4]
        with pytest.raises(EventNotFound):
            reader.seq_of("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")
        assert reader.seq_of(ids[-1]) == 399

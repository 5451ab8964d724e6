"""The resume path (a reader's context): what it checks while following each line's
link to its parent's line, and what it decodes from verified blobs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infai.store import CorruptionError, MessageRecord, Store, StoreOptions
from infai.store.file.format import frame


def _rewrite_line(store: Store, sid: str, seq: int, change: dict[str, object]) -> None:
    """Replace event ``seq``'s chunk line with one carrying ``change``, validly framed
    and of the same length (so every other line stays where the index says)."""
    paths = store.paths(sid)
    with store.open_reader(sid) as reader:
        loc = reader.entry_at(seq).location
    chunk = paths.chunk(loc.chunk)
    data = chunk.read_bytes()
    line = data[loc.offset : loc.offset + loc.length]
    obj = json.loads(line)
    del obj["crc"]
    obj.update(change)
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    new = frame(body)
    pad = loc.length - 1 - len(new)
    assert pad >= 0
    obj["preview"] += " " * pad  # keep the length: lengthen a string the reader only shows
    new = frame(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()) + b"\n"
    assert len(new) == loc.length
    chunk.write_bytes(data[: loc.offset] + new + data[loc.offset + loc.length :])


@pytest.mark.parametrize("parent_loc", [[0, 5], [0, 5, 9, 1], 7, "0,5,9"])
def test_a_parent_link_that_is_not_three_numbers_is_corruption(
    tmp_path: Path, parent_loc: object
) -> None:
    store = Store(tmp_path / "home", StoreOptions(lock_timeout=0))
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        for i in range(3):
            w.append(MessageRecord(content=f"event {i}"), "user")
    _rewrite_line(store, sid, 1, {"parent_loc": parent_loc})  # not the tail: opening checks that
    with store.open_reader(sid) as reader, pytest.raises(CorruptionError) as caught:
        reader.context()
    assert "undecodable event" in str(caught.value)

"""Import refuses what the writer would refuse, before it creates anything (store.transfer)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from infai.store import (
    InvalidInput,
    MessageRecord,
    Store,
    StoreOptions,
    export_lines,
    import_session,
)


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home", StoreOptions(lock_timeout=0.2))


# -- import: timestamps are never validated ---------------------------------------------------


def _export_with_timestamp(store: Store, timestamp: str) -> bytes:
    sid = store.create_session(name="src").id
    with store.open_writer(sid) as w:
        w.append(msg("a"), "user")
        w.append(msg("b"), "assistant")
    lines = list(export_lines(store, sid))
    store.remove_session(sid)
    events = [json.loads(line) for line in lines[1:]]
    events[0]["timestamp"] = timestamp
    return lines[0] + b"".join(json.dumps(e).encode() + b"\n" for e in events)


@pytest.mark.parametrize("timestamp", ["T" * 400, "yesterday", "2026-12-02T14:43:39.984693Z\ud800"])
def test_import_rejects_a_bad_timestamp_and_creates_nothing(store: Store, timestamp: str) -> None:
    """transfer._parse_event only checks that `timestamp` is a string.

    * 400 characters: the index entry no longer fits in 512 bytes (`_entry_bytes` stops
      shortening at an empty preview and pads with a negative count), entries overlap,
      the import *succeeds*, and every later open/read raises CorruptionError; recovery
      rewrites the same oversize entries on every open and `fsck --repair` cannot fix it.
    * "yesterday": accepted, although the format says RFC 3339.
    * a lone surrogate: UnicodeEncodeError (not a StoreError) escapes from encode_event.
    """
    data = _export_with_timestamp(store, timestamp)
    with pytest.raises(InvalidInput):
        import_session(store, io.BytesIO(data))
    assert store.list_sessions() == []

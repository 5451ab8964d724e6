"""Unit tests of infai.store.file.format: checksum framing, the fixed-width index, HEAD."""

from __future__ import annotations

import json
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infai.store.codec import NIL_ID, dumps
from infai.store.file.format import (
    HEAD_WIDTH,
    INDEX_WIDTH,
    ChunkLine,
    IndexEntry,
    Location,
    check_frame,
    decode_chunk_line,
    decode_head,
    decode_index_entry,
    encode_chunk_line,
    encode_head,
    encode_index_entry,
    frame,
    index_entry_from_line,
    walk_fields,
)

ID_A = "01a02f3f-a89d-7d25-b4ac-ac89a183258d"
ID_B = "01a02f3f-cb65-73b7-a632-1d948274475f"
KINDS = ["message", "tool_call", "tool_result", "compaction", "branch_summary"]


def make_line(**changes: object) -> ChunkLine:
    fields: dict[str, object] = {
        "seq": 3,
        "id": ID_B,
        "parent_id": ID_A,
        "parent_seq": 1,
        "branch_from": ID_A,
        "kind": "message",
        "role": "user",
        "timestamp": "2026-08-25T17:21:22.454897Z",
        "preview": "try approach B",
        "record": b'{"content":"try approach B"}',
        "digest": None,
        "ixd": 0,
    }
    fields.update(changes)
    return ChunkLine(**fields)  # type: ignore[arg-type]


def make_entry(**changes: object) -> IndexEntry:
    fields: dict[str, object] = {
        "seq": 3,
        "id": ID_B,
        "parent_id": ID_A,
        "parent_seq": 1,
        "branch_from": ID_A,
        "timestamp": "2026-08-25T17:21:22.454897Z",
        "kind": "message",
        "role": "user",
        "location": Location(0, 1234, 301),
        "preview": "p",
        "blob": False,
    }
    fields.update(changes)
    return IndexEntry(**fields)  # type: ignore[arg-type]


# -- frame / check_frame ----------------------------------------------------------


def test_frame_appends_crc_of_the_body() -> None:
    body = dumps({"a": 1, "b": "x"})
    framed = frame(body)
    assert framed[:-18] + b"}" == body
    assert framed[-18:] == b',"crc":"%08x"}' % zlib.crc32(body)
    assert check_frame(framed)
    assert check_frame(framed + b"\n")
    assert check_frame(framed + b"    \n")  # index padding is allowed
    assert json.loads(framed) == {"a": 1, "b": "x", "crc": f"{zlib.crc32(body):08x}"}


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"}",
        b"\n",
        b'{"a":1}',
        b'{"a":1,"crc":"zzzzzzzz"}',
        b'{"a":1,"crc":"00000000"}',
        b'{"a":1,"crx":"00000000"}',
        b"\x00" * 40,
        b" " * 40 + b"\n",
    ],
)
def test_check_frame_rejects_unframed(bad: bytes) -> None:
    assert not check_frame(bad)


def test_every_single_byte_change_is_detected() -> None:
    """Exhaustively: every position, every other byte value (the CRC's hex case too)."""
    framed = encode_chunk_line(make_line())[:-1]
    for pos in range(len(framed)):
        for new in range(256):
            if new == framed[pos]:
                continue
            damaged = framed[:pos] + bytes([new]) + framed[pos + 1 :]
            if damaged.rstrip(b" \n") == framed.rstrip(b" \n") and new in b" \n":
                continue  # only trailing padding changed
            assert not check_frame(damaged), (pos, new)
            if new % 64 == 0:  # the decoder agrees (sampled: it is slower)
                assert decode_chunk_line(damaged + b"\n") is None


def test_truncated_frame_is_rejected() -> None:
    framed = encode_chunk_line(make_line())[:-1]
    for cut in range(len(framed)):
        assert not check_frame(framed[:cut])
        assert decode_chunk_line(framed[:cut]) is None


# -- chunk lines ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"batch": (0, 3)},
        {"branch_from": None, "parent_id": NIL_ID, "parent_seq": -1},
        {"record": None, "digest": "sha256:" + "ab" * 32},
        {"preview": 'quotes " and "record": inside', "record": b'{"content":"\\"record\\":"}'},
        {"preview": "unicode: 日本 🎉", "record": '{"content":"日本 🎉"}'.encode()},
    ],
)
def test_chunk_line_roundtrip(changes: dict[str, object]) -> None:
    line = make_line(**changes)
    data = encode_chunk_line(line)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert check_frame(data)
    got = decode_chunk_line(data)
    assert got is not None
    for field in ("seq", "id", "parent_id", "parent_seq", "branch_from", "kind", "role"):
        assert getattr(got, field) == getattr(line, field)
    assert (got.timestamp, got.preview, got.digest, got.ixd) == (
        line.timestamp,
        line.preview,
        line.digest,
        line.ixd,
    )
    assert got.batch == line.batch
    want_record = None if line.record is None else json.loads(line.record)
    assert got.record_obj == want_record
    assert decode_chunk_line(data[:-1]) is not None  # the newline is optional


def test_batch_closing_line_carries_members() -> None:
    line = make_line(batch=(2, 3))
    line.members = (1234, 0xDEADBEEF)
    data = encode_chunk_line(line)
    assert b'"batch":[2,3]' in data and b'"members":[1234,"deadbeef"]' in data
    got = decode_chunk_line(data)
    assert got is not None and got.members == (1234, 0xDEADBEEF)


def test_chunk_line_batch_field_only_in_batches() -> None:
    data = encode_chunk_line(make_line())
    assert b'"batch"' not in data and b'"members"' not in data
    assert json.loads(data)["record"] == {"content": "try approach B"}


def test_commits() -> None:
    assert make_line().commits
    assert make_line(batch=(2, 3)).commits
    assert not make_line(batch=(0, 3)).commits
    assert not make_line(batch=(1, 3)).commits


def test_decode_chunk_line_rejects_valid_crc_with_wrong_shape() -> None:
    # Correctly framed but not a chunk line: the checksum passes, parsing does not.
    assert decode_chunk_line(frame(dumps({"seq": 1})) + b"\n") is None
    assert decode_chunk_line(frame(b"[1,2,3]") + b"\n") is None
    assert decode_chunk_line(b"") is None
    assert decode_chunk_line(b"\n") is None


# -- index entries -----------------------------------------------------------------------


def test_index_entry_is_exactly_index_width() -> None:
    entry = make_entry()
    data = encode_index_entry(entry)
    assert len(data) == INDEX_WIDTH == 512
    assert data.endswith(b"\n")
    assert decode_index_entry(data) == entry


def test_index_entry_fixed_prefix_is_sliceable() -> None:
    entry = make_entry(seq=77, parent_seq=-1, location=Location(3, 999, 450), kind="compaction")
    data = encode_index_entry(entry)
    fields = walk_fields(data)
    assert fields is not None
    seq, parent_seq, loc, kind = fields
    assert (seq, parent_seq, loc, kind) == (77, -1, Location(3, 999, 450), b"compaction")
    damaged = bytearray(data)
    damaged[10] = ord("9")
    assert walk_fields(bytes(damaged)) is None


def test_index_entry_from_line_is_deterministic() -> None:
    line = make_line(digest="sha256:" + "cd" * 32, record=None)
    loc = Location(2, 99, 400)
    a = encode_index_entry(index_entry_from_line(line, loc))
    b = encode_index_entry(index_entry_from_line(line, loc))
    assert a == b
    entry = decode_index_entry(a)
    assert entry is not None
    assert entry.blob is True
    assert entry.location == loc
    assert entry.location.end == 499
    assert entry.branch_from == ID_A and entry.parent_seq == 1


# What preview() can produce: up to 80 printable characters (control characters are
# replaced by spaces before an entry is ever built).
_previews = st.text(
    alphabet=st.characters(codec="utf-8").filter(str.isprintable),
    max_size=80,
) | st.sampled_from(["日" * 80, "🎉" * 80, '"' * 80, "\\" * 80, "é" * 80, "a" * 79 + "…"])


@settings(max_examples=300, deadline=None)
@given(
    preview=_previews,
    role=st.from_regex(r"[a-z][a-z0-9_\-]{0,31}", fullmatch=True),
    kind=st.sampled_from(KINDS),
    seq=st.integers(1, 10**11),
    offset=st.integers(0, 10**11),
    blob=st.booleans(),
)
def test_index_entry_fits_with_any_preview(
    preview: str, role: str, kind: str, seq: int, offset: int, blob: bool
) -> None:
    entry = make_entry(
        preview=preview,
        role=role,
        kind=kind,
        seq=seq,
        parent_seq=seq - 1,
        location=Location(99_999_999, offset, 9_999_999_999),
        blob=blob,
    )
    data = encode_index_entry(entry)
    assert len(data) == INDEX_WIDTH
    got = decode_index_entry(data)
    assert got is not None
    assert got.seq == seq and got.id == entry.id and got.role == role and got.kind == kind
    assert got.location == entry.location and got.blob == blob
    assert walk_fields(data) == (seq, seq - 1, entry.location, kind.encode())
    if got.preview != preview:
        # Shortened to fit: a non-empty prefix of the original plus an ellipsis.
        assert got.preview.endswith("…")
        assert preview.startswith(got.preview[:-1])
        assert len(got.preview) > 10


def test_control_char_preview_still_fits() -> None:
    # Not producible by preview(), but the width must hold for any string.
    entry = make_entry(preview="\x01" * 80, role="r" * 32)
    data = encode_index_entry(entry)
    assert len(data) == INDEX_WIDTH
    assert decode_index_entry(data) is not None


def test_decode_index_entry_rejects_damage() -> None:
    data = encode_index_entry(make_entry())
    assert decode_index_entry(data[:-1]) is None  # wrong width
    assert decode_index_entry(data[:-1] + b" ") is None  # no newline
    assert decode_index_entry(b"\x00" * INDEX_WIDTH) is None  # zeroed
    assert decode_index_entry(b" " * (INDEX_WIDTH - 1) + b"\n") is None  # blank
    damaged = data.replace(b'"kind":"message"', b'"kind":"messagX"')
    assert len(damaged) == INDEX_WIDTH
    assert decode_index_entry(damaged) is None
    assert walk_fields(damaged) is None


# -- HEAD --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("seq", "ixd"), [(0, 0), (5, 3), (999_999_999_999, 999_999_999_999)])
def test_head_roundtrip(seq: int, ixd: int) -> None:
    data = encode_head(ID_A, seq, ixd)
    assert len(data) == HEAD_WIDTH
    assert data.endswith(b"\n")
    head = decode_head(data)
    assert head is not None
    assert (head.id, head.seq, head.ixd) == (ID_A, seq, ixd)


def test_head_of_empty_session() -> None:
    assert encode_head(None, -1, 0) == b""
    assert decode_head(b"") is None


@pytest.mark.parametrize(
    "bad",
    [
        b"\x00" * HEAD_WIDTH,
        b" " * (HEAD_WIDTH - 1) + b"\n",
        b"garbage",
        b'{"id":"x"}'.ljust(HEAD_WIDTH - 1) + b"\n",
        b'{"id":1,"seq":2,"ixd":3}'.ljust(HEAD_WIDTH - 1) + b"\n",
        b'{"id":"x","seq":"2","ixd":3}'.ljust(HEAD_WIDTH - 1) + b"\n",
        b"[1,2,3]".ljust(HEAD_WIDTH - 1) + b"\n",
    ],
)
def test_decode_head_rejects_damage(bad: bytes) -> None:
    assert decode_head(bad) is None


def test_decode_head_rejects_truncation() -> None:
    data = encode_head(ID_A, 7, 7)
    for cut in range(len(data)):
        assert decode_head(data[:cut]) is None

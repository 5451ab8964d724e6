"""Line framing of the on-disk format (see ``docs/store-format.md``).

Every chunk line and every index entry is one JSON object ending in a checksum
field: the object is serialised without it, CRC-32 is taken over those bytes, and
``,"crc":"xxxxxxxx"}`` replaces the closing brace. A torn or stale line therefore
fails its check and can be told from a valid one without parsing it. Index entries
are additionally padded with spaces to :data:`INDEX_WIDTH` bytes, so entry ``n``
lives at byte ``n * INDEX_WIDTH`` and a path walk seeks straight to each parent.
HEAD is one fixed-width JSON line so it can be overwritten in place.
"""

from __future__ import annotations

import zlib
from typing import Any

import msgspec

#: On-disk format version, written to every session.json.
FORMAT_VERSION = 1
#: Bytes per index entry, newline included.
INDEX_WIDTH = 512
#: Bytes in the HEAD file when it names an event, newline included.
HEAD_WIDTH = 100
NIL_ID = "00000000-0000-0000-0000-000000000000"

_CRC_TAIL = len(b',"crc":"00000000"}')
_encoder = msgspec.json.Encoder()


class Location(msgspec.Struct, frozen=True):
    """Where an event's line lives: chunk number, byte offset, byte length."""

    chunk: int
    offset: int
    length: int

    @property
    def end(self) -> int:
        return self.offset + self.length


NULL_RAW = msgspec.Raw(b"null")


class ChunkLine(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One event as stored in a chunk: the truth from which all else is rebuilt."""

    seq: int
    id: str
    parent_id: str
    parent_seq: int
    branch_from: str | None
    kind: str
    role: str
    timestamp: str
    preview: str
    record: msgspec.Raw  # the record's JSON, or ``null`` when it lives in a blob
    digest: str | None
    ixd: int
    batch: tuple[int, int] | None = None
    crc: str = ""

    @property
    def commits(self) -> bool:
        """True if this line ends its write transaction (a single or a batch's last)."""
        return self.batch is None or self.batch[0] == self.batch[1] - 1


class IndexEntry(msgspec.Struct, kw_only=True):
    """One fixed-width index line: an event's tree links, location and preview."""

    seq: int
    id: str
    parent_id: str
    parent_seq: int
    branch_from: str | None
    timestamp: str
    kind: str
    role: str
    location: Location
    preview: str
    blob: bool
    crc: str = ""


_chunk_decoder = msgspec.json.Decoder(ChunkLine)
_index_decoder = msgspec.json.Decoder(IndexEntry)


def frame(obj: Any) -> bytes:
    """Serialise ``obj`` (its ``crc`` field unset) and append the checksum field."""
    body = _encoder.encode(obj)
    # omit_defaults drops an empty crc; IndexEntry has none to drop, so strip it.
    if body.endswith(b',"crc":""}'):
        body = body[: -len(b',"crc":""}')] + b"}"
    return b'%s,"crc":"%08x"}' % (body[:-1], zlib.crc32(body))


def check_frame(line: bytes) -> bool:
    """True if ``line`` (without newline/padding) carries a valid checksum."""
    if len(line) <= _CRC_TAIL or not line.endswith(b'"}'):
        return False
    tail = line[-_CRC_TAIL:]
    if not tail.startswith(b',"crc":"'):
        return False
    try:
        want = int(tail[8:16], 16)
    except ValueError:
        return False
    return zlib.crc32(line[:-_CRC_TAIL] + b"}") == want


def encode_chunk_line(line: ChunkLine) -> bytes:
    return frame(line) + b"\n"


def decode_chunk_line(data: bytes) -> ChunkLine | None:
    """Parse a chunk line (trailing newline optional); ``None`` if torn or invalid."""
    data = data.rstrip(b"\n")
    if not check_frame(data):
        return None
    try:
        return _chunk_decoder.decode(data)
    except msgspec.DecodeError:
        return None


def index_entry_from_line(line: ChunkLine, location: Location) -> IndexEntry:
    """The index entry that a chunk line at ``location`` must have (deterministic)."""
    return IndexEntry(
        seq=line.seq,
        id=line.id,
        parent_id=line.parent_id,
        parent_seq=line.parent_seq,
        branch_from=line.branch_from,
        timestamp=line.timestamp,
        kind=line.kind,
        role=line.role,
        location=location,
        preview=line.preview,
        blob=line.digest is not None,
    )


def encode_index_entry(entry: IndexEntry) -> bytes:
    """Frame and pad an index entry to exactly :data:`INDEX_WIDTH` bytes."""
    data = frame(entry)
    text = entry.preview
    while len(data) > INDEX_WIDTH - 1 and text:
        # Only the preview is unbounded: shorten it until the entry fits. Each
        # character is at least one byte, so cutting `over // 4` never overshoots.
        over = len(data) - (INDEX_WIDTH - 1)
        text = text[: len(text) - max(1, over // 4)]
        data = frame(msgspec.structs.replace(entry, preview=text + "…" if text else ""))
    return data + b" " * (INDEX_WIDTH - 1 - len(data)) + b"\n"


def decode_index_entry(data: bytes) -> IndexEntry | None:
    """Parse one padded index entry; ``None`` if torn, zeroed or invalid."""
    if len(data) != INDEX_WIDTH or data[-1:] != b"\n":
        return None
    body = data.rstrip(b" \n")
    if not check_frame(body):
        return None
    try:
        return _index_decoder.decode(body)
    except msgspec.DecodeError:
        return None


def encode_head(event_id: str | None, seq: int, ixd: int) -> bytes:
    """HEAD's bytes: empty for an empty session, else one fixed-width JSON line.

    ``ixd`` claims that index entries ``[0, ixd)`` are durable; recovery trusts the
    claim only while HEAD names the newest committed event.
    """
    if event_id is None:
        return b""
    data = b'{"id":"%s","seq":%s,"ixd":%s}' % (
        event_id.encode(),
        str(seq).rjust(12).encode(),
        str(ixd).rjust(12).encode(),
    )
    return data + b" " * (HEAD_WIDTH - 1 - len(data)) + b"\n"


class Head(msgspec.Struct, frozen=True):
    id: str
    seq: int
    ixd: int


_head_decoder = msgspec.json.Decoder(Head)


def decode_head(data: bytes) -> Head | None:
    """Parse HEAD; ``None`` if empty or unreadable (recovery rebuilds it from the log)."""
    if len(data) != HEAD_WIDTH:
        return None
    try:
        return _head_decoder.decode(data)
    except msgspec.DecodeError:
        return None

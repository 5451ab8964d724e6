"""Line framing of the on-disk format (see ``docs/store-format.md``).

Every chunk line and every index entry is one JSON object ending in a checksum
field: the object is serialised without it, CRC-32 is taken over those bytes, and
``,"crc":"xxxxxxxx"}`` replaces the closing brace. A torn or stale line therefore
fails its check and can be told from a valid one without parsing it.

Index entries are padded with spaces to :data:`INDEX_WIDTH` bytes, so entry ``n``
lives at byte ``n * INDEX_WIDTH``, and they begin with fixed-width numbers (JSON
allows the spaces), so a path walk reads an entry's parent, location and kind by
slicing, without a JSON parse. HEAD is one fixed-width JSON line so it can be
overwritten in place.
"""

from __future__ import annotations

import json
import zlib
from json.encoder import encode_basestring  # the C string escaper json itself uses

from ..errors import InvalidInput
from ..events import Entry

#: Bytes per index entry, newline included.
INDEX_WIDTH = 512
#: Bytes in the HEAD file when it names an event, newline included.
HEAD_WIDTH = 128

_CRC_TAIL = len(b',"crc":"00000000"}')


class Location:
    """Where an event's line lives: chunk number, byte offset, byte length."""

    __slots__ = ("chunk", "length", "offset")

    def __init__(self, chunk: int, offset: int, length: int) -> None:
        self.chunk = chunk
        self.offset = offset
        self.length = length

    @property
    def end(self) -> int:
        """The offset just past the line (where the next one starts)."""
        return self.offset + self.length

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and (self.chunk, self.offset, self.length) == (
            other.chunk,
            other.offset,
            other.length,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Location(chunk={self.chunk}, offset={self.offset}, length={self.length})"


def frame(body: bytes) -> bytes:
    """Append the checksum field to a serialised JSON object."""
    return frame_open(body[:-1])


def frame_open(body: bytes) -> bytes:
    """:func:`frame` for an object whose closing brace is not written yet."""
    return b'%s,"crc":"%08x"}' % (body, zlib.crc32(b"}", zlib.crc32(body)))


def check_frame(line: bytes) -> bool:
    """True if ``line`` (trailing newline and padding allowed) carries a valid checksum."""
    line = line.rstrip(b" \n")
    if len(line) <= _CRC_TAIL or line[-_CRC_TAIL:-10] != b',"crc":"':
        return False
    # the exact bytes the writer wrote (eight lower-case hex digits): a checksum
    # that only parses to the same number ("E" for "e", "0x" prefixes) is damage too
    crc = zlib.crc32(b"}", zlib.crc32(line[:-_CRC_TAIL]))
    return line[-10:-2] == b"%08x" % crc and line[-2:] == b'"}'


# -- chunk lines ------------------------------------------------------------


class ChunkLine:
    """One event as stored in a chunk: the truth from which all else is rebuilt.

    When writing, ``record`` holds the record's compact JSON bytes (``None`` when it
    lives in the blob named by ``digest``); a decoded line instead carries the
    parsed record object in ``record_obj``.
    """

    __slots__ = (
        "batch",
        "members",
        "parent_loc",
        "branch_from",
        "digest",
        "id",
        "ixd",
        "kind",
        "parent_id",
        "parent_seq",
        "preview",
        "record",
        "record_obj",
        "role",
        "seq",
        "timestamp",
    )

    def __init__(
        self,
        *,
        seq: int,
        id: str,
        parent_id: str,
        parent_seq: int,
        branch_from: str | None,
        kind: str,
        role: str,
        timestamp: str,
        preview: str,
        record: bytes | None,
        digest: str | None,
        ixd: int,
        batch: tuple[int, int] | None = None,
    ) -> None:
        self.seq = seq
        self.id = id
        self.parent_id = parent_id
        self.parent_seq = parent_seq
        self.branch_from = branch_from
        self.kind = kind
        self.role = role
        self.timestamp = timestamp
        self.preview = preview
        self.record = record
        self.digest = digest
        self.ixd = ixd
        self.batch = batch
        #: where the parent's line is (None for a root): context is rebuilt by
        #: following these from line to line, without the index
        self.parent_loc: Location | None = None
        #: on a batch's last line: (length, CRC-32) of the lines before it in the batch
        self.members: tuple[int, int] | None = None
        self.record_obj: object = None

    @property
    def commits(self) -> bool:
        """True if this line ends its write transaction (a single or a batch's last)."""
        return self.batch is None or self.batch[0] == self.batch[1] - 1


def _str(value: str | None) -> str:
    return "null" if value is None else encode_basestring(value)


class _Escaped:
    """A line's string fields, JSON-escaped once for both its line and its entry."""

    __slots__ = ("branch_from", "id", "kind", "parent_id", "preview", "role", "timestamp")

    def __init__(self, line: ChunkLine | IndexEntry) -> None:
        esc = encode_basestring
        self.id = esc(line.id)
        self.parent_id = esc(line.parent_id)
        self.branch_from = "null" if line.branch_from is None else esc(line.branch_from)
        self.kind = esc(line.kind)
        self.role = esc(line.role)
        self.timestamp = esc(line.timestamp)
        self.preview = esc(line.preview)


def _loc(loc: Location | None) -> str:
    return "null" if loc is None else f"[{loc.chunk},{loc.offset},{loc.length}]"


def _line_bytes(line: ChunkLine, esc: _Escaped) -> bytes:
    # Equivalent to ``dumps`` of the fields in this order, written out by hand
    # because appends are on the hot path.
    extra = ""
    if line.batch is not None:
        extra += f',"batch":[{line.batch[0]},{line.batch[1]}]'
    if line.members is not None:
        extra += f',"members":[{line.members[0]},"{line.members[1]:08x}"]'
    head = (
        f'{{"seq":{line.seq},"id":{esc.id},"parent_id":{esc.parent_id},'
        f'"parent_seq":{line.parent_seq},"parent_loc":{_loc(line.parent_loc)},'
        f'"branch_from":{esc.branch_from},'
        f'"kind":{esc.kind},"role":{esc.role},"timestamp":{esc.timestamp},'
        f'"preview":{esc.preview},"digest":{_str(line.digest)},"ixd":{line.ixd}{extra},"record":'
    )
    return frame_open(head.encode() + (line.record or b"null")) + b"\n"


def encode_chunk_line(line: ChunkLine) -> bytes:
    """The line's bytes, newline included; the record comes last, before the checksum."""
    return _line_bytes(line, _Escaped(line))


def encode_event(line: ChunkLine, chunk: int, offset: int) -> tuple[bytes, bytes]:
    """A new event's chunk line and index entry (the writer's path: one escaping pass)."""
    esc = _Escaped(line)
    data = _line_bytes(line, esc)
    loc = Location(chunk, offset, len(data))
    return data, _entry_bytes(line.seq, line.parent_seq, loc, line.digest is not None, esc)


def decode_chunk_line(data: bytes) -> ChunkLine | None:
    """Parse a chunk line (trailing newline optional); ``None`` if torn or invalid."""
    if not check_frame(data):
        return None
    try:
        obj = json.loads(data)
        batch = obj.get("batch")
        line = ChunkLine(
            seq=obj["seq"],
            id=obj["id"],
            parent_id=obj["parent_id"],
            parent_seq=obj["parent_seq"],
            branch_from=obj["branch_from"],
            kind=obj["kind"],
            role=obj["role"],
            timestamp=obj["timestamp"],
            preview=obj["preview"],
            record=None,
            digest=obj["digest"],
            ixd=obj["ixd"],
            batch=None if batch is None else (batch[0], batch[1]),
        )
        line.record_obj = obj["record"]
        members = obj.get("members")
        if members is not None:
            line.members = (members[0], int(members[1], 16))
        parent_loc = obj["parent_loc"]
        if parent_loc is not None:
            line.parent_loc = Location(*parent_loc)
        return line
    except (ValueError, KeyError, TypeError, IndexError):
        return None


# -- index entries ------------------------------------------------------------


class IndexEntry(Entry):
    """One fixed-width index line: an event's tree links, location and preview.

    The neutral :class:`~infai.store.events.Entry` plus where the event's line
    lives in the chunks: only this backend has such a place.
    """

    __slots__ = ("location",)

    def __init__(
        self,
        *,
        seq: int,
        id: str,
        parent_id: str,
        parent_seq: int,
        branch_from: str | None,
        timestamp: str,
        kind: str,
        role: str,
        location: Location,
        preview: str,
        blob: bool,
    ) -> None:
        super().__init__(
            seq=seq,
            id=id,
            parent_id=parent_id,
            parent_seq=parent_seq,
            branch_from=branch_from,
            timestamp=timestamp,
            kind=kind,
            role=role,
            preview=preview,
            blob=blob,
        )
        self.location = location

    def to_obj(self) -> dict[str, object]:
        """:meth:`Entry.to_obj` plus the chunk location (so it shows in JSON output too)."""
        loc = self.location
        return {
            "seq": self.seq,
            "parent_seq": self.parent_seq,
            "location": {"chunk": loc.chunk, "offset": loc.offset, "length": loc.length},
            "kind": self.kind,
            "id": self.id,
            "parent_id": self.parent_id,
            "branch_from": self.branch_from,
            "timestamp": self.timestamp,
            "role": self.role,
            "blob": self.blob,
            "preview": self.preview,
        }


# The fixed-width prefix: {"seq":%12d,"parent_seq":%12d,"location":{"chunk":%8d,
# "offset":%12d,"length":%10d},"kind":"<kind>", ...
_PREFIX = b'{"seq":%12d,"parent_seq":%12d,"location":{"chunk":%8d,"offset":%12d,"length":%10d},'
_SEQ = slice(7, 19)
_PARENT = slice(33, 45)
_CHUNK = slice(66, 74)
_OFFSET = slice(84, 96)
_LENGTH = slice(106, 116)
_KIND_AT = 126  # first byte of the kind string, after '},"kind":"'


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
    return _entry_bytes(entry.seq, entry.parent_seq, entry.location, entry.blob, _Escaped(entry))


def _entry_bytes(seq: int, parent_seq: int, loc: Location, blob: bool, esc: _Escaped) -> bytes:
    prefix = _PREFIX % (seq, parent_seq, loc.chunk, loc.offset, loc.length)
    middle = (
        f'"kind":{esc.kind},"id":{esc.id},"parent_id":{esc.parent_id},'
        f'"branch_from":{esc.branch_from},"timestamp":{esc.timestamp},'
        f'"role":{esc.role},"blob":{"true" if blob else "false"},"preview":'
    ).encode()
    preview = esc.preview
    text: str | None = None
    while True:
        data = frame_open(prefix + middle + preview.encode())
        over = len(data) - (INDEX_WIDTH - 1)
        if over <= 0 or preview == '""':
            break
        # Only the preview is unbounded: shorten it until the entry fits. Each
        # character is at least one byte, so cutting `over // 6` never overshoots.
        text = json.loads(preview) if text is None else text
        cut = text[: len(text) - max(1, over // 6) - 1]
        text = cut + "…" if cut else ""
        preview = _str(text)
    if len(data) > INDEX_WIDTH - 1:
        raise InvalidInput(f"event #{seq}: its fields do not fit in an index entry")
    return data + b" " * (INDEX_WIDTH - 1 - len(data)) + b"\n"


def decode_index_entry(data: bytes) -> IndexEntry | None:
    """Parse one padded index entry; ``None`` if torn, zeroed or invalid."""
    if len(data) != INDEX_WIDTH or data[-1:] != b"\n" or not check_frame(data):
        return None
    try:
        obj = json.loads(data)
        loc = obj["location"]
        return IndexEntry(
            seq=obj["seq"],
            id=obj["id"],
            parent_id=obj["parent_id"],
            parent_seq=obj["parent_seq"],
            branch_from=obj["branch_from"],
            timestamp=obj["timestamp"],
            kind=obj["kind"],
            role=obj["role"],
            location=Location(loc["chunk"], loc["offset"], loc["length"]),
            preview=obj["preview"],
            blob=obj["blob"],
        )
    except (ValueError, KeyError, TypeError):
        return None


def walk_fields(data: bytes) -> tuple[int, int, Location, bytes] | None:
    """``(seq, parent_seq, location, kind)`` of a checked index entry, by slicing."""
    if len(data) != INDEX_WIDTH or not check_frame(data):
        return None
    try:
        loc = Location(int(data[_CHUNK]), int(data[_OFFSET]), int(data[_LENGTH]))
        kind = data[_KIND_AT : data.index(b'"', _KIND_AT)]
        return int(data[_SEQ]), int(data[_PARENT]), loc, kind
    except ValueError:
        return None


# -- HEAD ---------------------------------------------------------------------


class Head:
    """HEAD's content: the newest event, and how many index entries are durable."""

    __slots__ = ("id", "ixd", "seq")

    def __init__(self, id: str, seq: int, ixd: int) -> None:
        self.id = id
        self.seq = seq
        self.ixd = ixd


def encode_head(event_id: str | None, seq: int, ixd: int) -> bytes:
    """HEAD's bytes: empty for an empty session, else one fixed-width JSON line.

    ``ixd`` claims that index entries ``[0, ixd)`` are durable; recovery trusts the
    claim only while HEAD names the newest committed event.
    """
    if event_id is None:
        return b""
    data = frame_open(b'{"id":"%s","seq":%12d,"ixd":%12d' % (event_id.encode(), seq, ixd))
    return data + b" " * (HEAD_WIDTH - 1 - len(data)) + b"\n"


def decode_head(data: bytes) -> Head | None:
    """Parse HEAD; ``None`` if empty or unreadable (recovery rebuilds it from the log)."""
    if len(data) != HEAD_WIDTH or not check_frame(data):
        return None
    try:
        obj = json.loads(data)
        head = Head(obj["id"], obj["seq"], obj["ixd"])
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(head.id, str) or any(type(n) is not int for n in (head.seq, head.ixd)):
        return None
    return head

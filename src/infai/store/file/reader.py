"""Reading one session: HEAD, path walks, timelines and records, without the lock.

The index is an array of fixed-width entries, entry ``n`` at byte
``n * INDEX_WIDTH``, and every entry names its parent's sequence number. Walking
the active path from HEAD is therefore one positioned read per event, whatever
the session's size: the resume path never loads or parses the whole index. Only
operations that are about the whole tree (``entries``, ``children``, ``leaves``)
read all of it. Chunk lines are read at their recorded location and blobs only
when a record is resolved.

A reader analyses recovery in memory (see :mod:`~infai.store.file.recovery`) and so
sees the committed prefix even while a writer appends or after a crash that no
writer has recovered yet. It never changes a file.
"""

from __future__ import annotations

import json
import os

from ..codec import check_uuid
from ..errors import CorruptionError, EventNotFound, InvalidInput
from ..events import Context, Entry, Event
from ..records import Record, record_from_stored
from .blobs import read_blob
from .chunks import ChunkFiles
from .format import (
    INDEX_WIDTH,
    IndexEntry,
    Location,
    check_frame,
    decode_index_entry,
    walk_fields,
)
from .layout import SessionPaths
from .recovery import Recovery, analyze

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

_raw_decode = json.JSONDecoder().raw_decode

#: index entries read at once while walking a path toward the root
PATH_WINDOW = 64


class SessionReader:
    """Read access to one session's committed events."""

    def __init__(self, paths: SessionPaths, plan: Recovery | None = None) -> None:
        self.paths = paths
        self.session_id = paths.root.name
        state = analyze(paths, leftovers=False) if plan is None else plan
        self._count = state.count
        self._head_seq = state.last.seq if state.last else -1
        self._head_id = state.last.id if state.last else None
        self._overrides: dict[int, bytes] = dict(state.index_writes)
        self._chunks = ChunkFiles(paths)
        self._index_fd = -1
        self._ids: dict[str, int] | None = None
        self._lookups = 0  # of events other than HEAD, each a scan of the index

    # -- HEAD and lookups -------------------------------------------------

    @property
    def head(self) -> str | None:
        """The id of the active tip (the newest committed event), or None if empty."""
        return self._head_id

    @property
    def count(self) -> int:
        """Number of committed events."""
        return self._count

    def _read_index(self, length: int, offset: int) -> bytes:
        """Bytes of the index file (none if it is missing: recovery supplies entries)."""
        if self._index_fd < 0:
            try:
                self._index_fd = os.open(self.paths.index, os.O_RDONLY)
            except FileNotFoundError:
                return b""
        return os.pread(self._index_fd, length, offset)

    def entry_at(self, seq: int) -> IndexEntry:
        """The index entry of the ``seq``-th event, checked; a ``seq`` outside this
        snapshot raises :class:`EventNotFound` (as on every backend), an entry that
        fails its check :class:`CorruptionError`."""
        if not 0 <= seq < self._count:
            raise EventNotFound(f"#{seq}", self.session_id)
        raw = self._overrides.get(seq)
        if raw is None:
            raw = self._read_index(INDEX_WIDTH, seq * INDEX_WIDTH)
        return self._checked_entry(raw, seq)

    def _checked_entry(self, raw: bytes, seq: int) -> IndexEntry:
        entry = decode_index_entry(raw)
        if entry is None or entry.seq != seq:
            raise CorruptionError(
                self.paths.index, seq * INDEX_WIDTH, "index entry fails its check"
            )
        return entry

    def seq_of(self, event_id: str) -> int:
        """The sequence number of ``event_id``; raises :class:`EventNotFound`.

        After a few lookups of events other than HEAD, the reader keeps an
        id-to-seq map: each would otherwise scan the whole index, and a reader
        that reads every event by id (an export, gc, a checkout) took time in
        the square of the session's length (5,000 events: seconds)."""
        event_id = check_uuid(event_id, "event id")
        if self._ids is None and event_id != self._head_id:
            self._lookups += 1
            if self._lookups > 2:
                self._build_id_map()
        if self._ids is not None:
            seq = self._ids.get(event_id)
            if seq is None:
                raise EventNotFound(event_id, self.session_id)
            return seq
        if event_id == self._head_id:
            return self._head_seq
        for seq, raw in self._overrides.items():
            if f'"id":"{event_id}"'.encode() in raw:
                return seq
        data = self._read_index(self._count * INDEX_WIDTH, 0)
        pos = data.find(f'"id":"{event_id}"'.encode())
        if pos < 0:
            raise EventNotFound(event_id, self.session_id)
        return pos // INDEX_WIDTH

    def entry(self, event_id: str) -> IndexEntry:
        """The entry of ``event_id`` from the index alone; no chunk is read."""
        return self.entry_at(self.seq_of(event_id))

    def _build_id_map(self) -> dict[str, int]:
        if self._ids is None:
            self._ids = {e.id: e.seq for e in self.entries()}
        return self._ids

    # -- the tree ---------------------------------------------------------

    def entries(self) -> Iterator[IndexEntry]:
        """Every event's index entry, oldest first (reads the whole index)."""
        data = self._read_index(self._count * INDEX_WIDTH, 0) if self._count else b""
        for seq in range(self._count):
            raw = self._overrides.get(seq) or data[seq * INDEX_WIDTH : (seq + 1) * INDEX_WIDTH]
            yield self._checked_entry(raw, seq)

    def _walk(self, at: str | None, to_boundary: bool) -> list[tuple[int, bytes, Location]]:
        """``(seq, raw entry, location)`` from ``at`` (default HEAD) to the root or a compaction.

        One index entry per event on the path. Parents are usually just before
        their children, so entries are read a window at a time, ending at the one
        needed; each entry's parent and kind are read by slicing, without a parse.
        """
        seq = self._head_seq if at is None else self.seq_of(at)
        out: list[tuple[int, bytes, Location]] = []
        window, window_start, window_end = b"", 0, 0
        overrides = self._overrides
        while seq >= 0:
            if not window_start <= seq < window_end:
                window_start = max(0, seq + 1 - PATH_WINDOW)
                window_end = seq + 1
                window = self._read_index(
                    (window_end - window_start) * INDEX_WIDTH, window_start * INDEX_WIDTH
                )
            raw = overrides.get(seq) if overrides else None
            if raw is None:
                at_byte = (seq - window_start) * INDEX_WIDTH
                raw = window[at_byte : at_byte + INDEX_WIDTH]
            fields = walk_fields(raw)
            if fields is None or fields[0] != seq:
                raise CorruptionError(
                    self.paths.index, seq * INDEX_WIDTH, "index entry fails its check"
                )
            out.append((seq, raw, fields[2]))
            if to_boundary and fields[3] == b"compaction":
                break
            if fields[1] >= seq:
                raise CorruptionError(
                    self.paths.index, seq * INDEX_WIDTH, "parent is not older than its child"
                )
            seq = fields[1]
        out.reverse()
        return out

    def path(self, at: str | None = None, *, to_boundary: bool = True) -> list[Entry]:
        """Entries from the root (or the nearest compaction) to ``at`` (default HEAD).

        Reads one index entry per event on the path; no chunk or blob is opened.
        """
        return [self._checked_entry(raw, seq) for seq, raw, _ in self._walk(at, to_boundary)]

    def children(self, event_id: str) -> list[Entry]:
        """Direct children of ``event_id``, oldest first."""
        event_id = check_uuid(event_id, "event id")
        self.seq_of(event_id)
        return [e for e in self.entries() if e.parent_id == event_id]

    def roots(self) -> list[Entry]:
        """Events without a parent, oldest first (reads the whole index)."""
        return [e for e in self.entries() if e.parent_seq < 0]

    def leaves(self) -> list[Entry]:
        """Tips of every branch (events without children), oldest first."""
        entries = list(self.entries())
        parents = {e.parent_seq for e in entries}
        return [e for e in entries if e.seq not in parents]

    # -- events and records -------------------------------------------------

    def event(self, event_id: str, *, resolve: bool = False) -> Event:
        """Load one event; a blob record stays unresolved unless ``resolve``."""
        entry = self.entry(event_id)
        data = self._chunks.read(entry.location)
        loc = entry.location
        return self._decode_event(data, loc.chunk, loc.offset, entry.seq, resolve, entry.id)[0]

    def events_between(self, start: int, stop: int) -> list[Event]:
        """Events ``start``..``stop - 1`` in order, records of blobs unresolved; nearby
        lines are read together (the search index reads whole sessions this way)."""
        stop = min(stop, self._count)
        if start >= stop:
            return []
        data = self._read_index((stop - start) * INDEX_WIDTH, start * INDEX_WIDTH)
        entries = []
        for seq in range(start, stop):
            at = (seq - start) * INDEX_WIDTH
            raw = self._overrides.get(seq) or data[at : at + INDEX_WIDTH]
            entries.append(self._checked_entry(raw, seq))
        datas = self._chunks.read_many([e.location for e in entries])
        return [
            self._decode_event(data, e.location.chunk, e.location.offset, e.seq, False, e.id)[0]
            for e, data in zip(entries, datas, strict=True)
        ]

    def resolve(self, event: Event) -> Record:
        """The event's record, loading and verifying its blob if needed."""
        if event.record is not None:
            return event.record
        if event.digest is None:
            raise InvalidInput(f"event {event.id} has no record")
        return self._blob_record(event.kind, event.digest)

    def _blob_record(self, kind: str, digest: str) -> Record:
        blob = read_blob(self.paths, digest)  # its digest is checked
        return record_from_stored(kind, _raw_decode(blob.decode())[0])

    def context(self, at: str | None = None, *, resolve: bool = True) -> Context:
        """The active context at ``at`` (default HEAD), records resolved.

        Each chunk line names its parent's location, so after one index read for
        the tip this follows lines back to the boundary, reading each once (in
        blocks, as parents usually sit just before their children). Without
        ``resolve``, records in blobs stay unresolved (a viewer shows previews
        and loads a blob only when asked: :meth:`resolve`).
        """
        seq = self._head_seq if at is None else self.seq_of(at)
        if seq < 0:
            return Context([])
        loc = self.entry_at(seq).location
        where: tuple[int, int, int] | None = (loc.chunk, loc.offset, loc.length)
        event_id = self._head_id if at is None else check_uuid(at, "event id")
        events: list[Event] = []
        read_back = self._chunks.read_back
        while where is not None:
            chunk, offset, length = where
            data = read_back(chunk, offset, length)
            event, where = self._decode_event(data, chunk, offset, seq, resolve, event_id)
            events.append(event)
            if event.kind == "compaction":
                break
            seq, event_id = event.parent_seq, event.parent_id
        events.reverse()
        return Context(events)

    def _decode_event(
        self,
        data: bytes,
        chunk: int,
        offset: int,
        seq: int,
        resolve: bool,
        event_id: str | None = None,
    ) -> tuple[Event, tuple[int, int, int] | None]:
        """The event in a chunk line read at ``offset`` of ``chunk``: the one decoder of
        stored events.

        The line's checksum, sequence number (and id, when known) are checked; its
        record was checked against its type when written, so it is rebuilt as is.
        This is the resume path, kept lean. Returns the parent's ``(chunk, offset,
        length)`` too.
        """
        if not check_frame(data):
            raise CorruptionError(self.paths.chunk(chunk), offset, "checksum mismatch")
        try:
            obj = _raw_decode(data.decode())[0]
            if obj["seq"] != seq or (event_id is not None and obj["id"] != event_id):
                raise CorruptionError(
                    self.paths.chunk(chunk),
                    offset,
                    f"index says #{seq} {event_id or ''}, chunk says #{obj['seq']} {obj['id']}",
                )
            kind, digest = obj["kind"], obj["digest"]
            record: Record | None = None
            if digest is None:
                record = record_from_stored(kind, obj["record"])
            elif resolve:
                record = self._blob_record(kind, digest)
            event = Event(
                id=obj["id"],
                parent_id=obj["parent_id"],
                branch_from=obj["branch_from"],
                kind=kind,
                role=obj["role"],
                timestamp=obj["timestamp"],
                record=record,
                digest=digest,
                seq=seq,
                preview=obj["preview"],
                parent_seq=obj["parent_seq"],
            )
            parent_loc = obj["parent_loc"]
            if (parent_loc is None) != (event.parent_seq < 0) or event.parent_seq >= seq:
                raise CorruptionError(
                    self.paths.chunk(chunk), offset, "parent link is inconsistent"
                )
            if parent_loc is None:
                return event, None
            parent_chunk, parent_offset, parent_length = parent_loc
            return event, (parent_chunk, parent_offset, parent_length)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptionError(
                self.paths.chunk(chunk), offset, f"undecodable event: {exc}"
            ) from None

    def refresh(self) -> None:
        """See what was committed since this reader was opened or last refreshed."""
        state = analyze(self.paths, leftovers=False)
        self.close()
        self._count = state.count
        self._head_seq = state.last.seq if state.last else -1
        self._head_id = state.last.id if state.last else None
        self._overrides = dict(state.index_writes)
        self._chunks = ChunkFiles(self.paths)
        self._ids = None
        self._lookups = 0

    def close(self) -> None:
        """Close the index and chunk files (a later read reopens them)."""
        self._chunks.close()
        if self._index_fd >= 0:
            os.close(self._index_fd)
            self._index_fd = -1

    def __enter__(self) -> SessionReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

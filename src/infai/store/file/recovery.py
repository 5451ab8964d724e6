"""Crash recovery: decide what a session's files must be, then (for a writer) make them so.

Recovery runs on every open, in a fixed order, and is split in two so readers
and writers share it: :func:`analyze` only reads and returns a :class:`Recovery`
plan plus the in-memory view a reader needs; :func:`apply` (writer only, under
the lock) carries the plan out. Applying a plan and analysing again yields an
empty plan, so recovery twice changes nothing the second time.

1. **Chunks** are the truth. Chunk numbers must be contiguous. In the last
   chunk, bytes after the last committed transaction are a crash's leftovers
   (see :func:`~infai.store.file.chunks.committed_tail`) and are truncated; anything
   invalid before it is corruption, reported by file and offset, never skipped.
2. **Index.** Entries before the durable mark ``ixd`` of the last committed line
   were fsynced and are trusted; the rest (at most one fsync interval) are
   compared with the entries rebuilt from their chunk lines, and missing, torn
   or stale ones are rewritten. Entries past the last event are cut off.
3. **HEAD** always names the newest committed event (only an append moves it),
   so it is rebuilt from step 1 when it differs; a leftover ``HEAD.tmp`` from an
   interrupted strict-mode update is removed either way, since its event, if
   valid, is already the one HEAD names. Other ``*.tmp`` files (a blob or
   metadata write that never reached its rename) are removed too.
"""

from __future__ import annotations

import os

from ..errors import CorruptionError
from .chunks import committed_tail, lines_forward
from .format import (
    INDEX_WIDTH,
    ChunkLine,
    Location,
    decode_chunk_line,
    decode_head,
    decode_index_entry,
    encode_head,
    encode_index_entry,
    index_entry_from_line,
)
from .fsio import FileIO, atomic_write, write_all
from .layout import SessionPaths


class Recovery:
    """What the files must be changed to, and the state they then describe."""

    def __init__(self) -> None:
        #: chunk number -> committed size, for chunks that must be truncated
        self.truncate_chunks: dict[int, int] = {}
        #: index entries (by sequence number) to write, already encoded
        self.index_writes: dict[int, bytes] = {}
        #: the index file size the plan ends with, if it must change
        self.index_size: int | None = None
        #: index entries known durable before the plan is applied
        self.index_durable = 0
        self.head: bytes | None = None
        self.remove: list[str] = []
        #: what the plan does, in words (empty when there is nothing to do)
        self.notes: list[str] = []
        # The state after recovery:
        self.last: ChunkLine | None = None
        self.last_location: Location | None = None
        self.chunk_count = 0
        #: the last writer finished cleanly: nothing it wrote can be unsynced
        self.clean = False
        self.chunk_size = 0  # committed size of the last chunk

    @property
    def empty(self) -> bool:
        """True if applying the plan would change no file's content."""
        return not (
            self.truncate_chunks
            or self.index_writes
            or self.index_size is not None
            or self.head is not None
            or self.remove
        )

    @property
    def count(self) -> int:
        """Events in the committed prefix (what a reader opened on this plan sees)."""
        return self.last.seq + 1 if self.last else 0


def _chunk_state(paths: SessionPaths, plan: Recovery) -> None:
    numbers = paths.chunk_numbers()
    for expect, number in enumerate(numbers):
        if number != expect:
            raise CorruptionError(paths.chunk(expect), 0, "chunk file is missing")
    plan.chunk_count = len(numbers)
    if not numbers:
        return
    last = numbers[-1]
    size = os.path.getsize(paths.chunk(last))
    tail = committed_tail(paths, last)
    if tail.end != size:
        plan.truncate_chunks[last] = tail.end
        plan.notes.append(
            f"{paths.chunk(last)}: truncated {size - tail.end} uncommitted bytes "
            f"at offset {tail.end}"
        )
    plan.chunk_size = tail.end
    if tail.last is not None:
        plan.last = tail.last
        plan.last_location = Location(last, tail.last_offset, tail.end - tail.last_offset)
        return
    # The newest chunk holds nothing committed yet: the last event ends the previous chunk,
    # which was complete and synced before the newest one was created.
    if last > 0:
        prev = committed_tail(paths, last - 1)
        prev_size = os.path.getsize(paths.chunk(last - 1))
        if prev.end != prev_size or prev.last is None:
            raise CorruptionError(paths.chunk(last - 1), prev.end, "chunk ends in a torn line")
        plan.last = prev.last
        plan.last_location = Location(last - 1, prev.last_offset, prev.end - prev.last_offset)


def _resume_point(paths: SessionPaths, index_fd: int, trusted: int) -> tuple[int, Location | None]:
    """Where to start re-deriving the index: a sequence number and its predecessor's location."""
    if trusted > 0:
        entry = decode_index_entry(os.pread(index_fd, INDEX_WIDTH, (trusted - 1) * INDEX_WIDTH))
        if entry is not None and entry.seq == trusted - 1:
            return trusted, entry.location
    return 0, None  # nothing durable, or a durable entry is damaged: re-derive it all


def _index_state(paths: SessionPaths, plan: Recovery, head_ixd: int) -> None:
    count = plan.count
    try:
        index_fd = os.open(paths.index, os.O_RDONLY)
    except FileNotFoundError:
        index_fd = -1
    try:
        size = os.fstat(index_fd).st_size if index_fd >= 0 else 0
        on_disk = size // INDEX_WIDTH
        want_size = count * INDEX_WIDTH
        if size != want_size and not (index_fd < 0 and count == 0):
            plan.index_size = want_size
            if size > want_size:
                plan.notes.append(
                    f"{paths.index}: cut {size - want_size} bytes past the last event"
                )
        if count == 0:
            return
        assert plan.last is not None
        trusted = min(max(plan.last.ixd, head_ixd), on_disk, count)
        start_seq, prev = (0, None) if index_fd < 0 else _resume_point(paths, index_fd, trusted)
        plan.index_durable = start_seq
        # Scan the chunks forward from the record after `prev`.
        chunk, offset = (0, 0) if prev is None else (prev.chunk, prev.end)
        seq = start_seq
        while seq < count:
            path = paths.chunk(chunk)
            limit = plan.chunk_size if chunk == plan.chunk_count - 1 else os.path.getsize(path)
            if offset >= limit:
                chunk, offset = chunk + 1, 0
                if chunk >= plan.chunk_count:
                    raise CorruptionError(paths.index, seq * INDEX_WIDTH, f"event #{seq} not found")
                continue
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(limit - offset)
            for line_off, raw in lines_forward(data, offset):
                line = decode_chunk_line(raw)
                if line is None:
                    raise CorruptionError(path, line_off, "line fails its checksum")
                if line.seq != seq:
                    raise CorruptionError(
                        path, line_off, f"expected event #{seq}, found #{line.seq}"
                    )
                loc = Location(chunk, line_off, len(raw))
                expected = encode_index_entry(index_entry_from_line(line, loc))
                actual = (
                    os.pread(index_fd, INDEX_WIDTH, seq * INDEX_WIDTH)
                    if index_fd >= 0 and seq < on_disk
                    else b""
                )
                if actual != expected:
                    plan.index_writes[seq] = expected
                seq += 1
            offset = limit
        if plan.index_writes:
            first = min(plan.index_writes)
            plan.notes.append(
                f"{paths.index}: rebuilt {len(plan.index_writes)} entries from the chunks "
                f"starting at #{first}"
            )
            if plan.index_size is None and (max(plan.index_writes) + 1) * INDEX_WIDTH > size:
                plan.index_size = want_size
    finally:
        if index_fd >= 0:
            os.close(index_fd)


def analyze(paths: SessionPaths, *, leftovers: bool = True) -> Recovery:
    """Read the session's files and return the recovery plan (changes nothing).

    Without ``leftovers`` the session directory is not listed for temp files a
    killed write left: a reader never removes them, so it need not look.
    """
    if not paths.root.is_dir():
        raise FileNotFoundError(paths.root)
    plan = Recovery()
    _chunk_state(paths, plan)
    try:
        have_head: bytes | None = paths.head.read_bytes()
    except FileNotFoundError:
        have_head = None
    head = decode_head(have_head or b"")
    last = plan.last
    current = head is not None and last is not None and (head.id, head.seq) == (last.id, last.seq)
    _index_state(paths, plan, head.ixd if current and head else 0)
    # HEAD naming the newest event with every index entry durable is written only
    # after a writer's last sync (a clean close, a strict append, or recovery).
    plan.clean = current and head is not None and head.ixd >= plan.count
    if not current and not (last is None and have_head == b""):
        plan.head = encode_head(last.id, last.seq, last.seq + 1) if last else b""
        if have_head is not None:
            plan.notes.append(f"{paths.head}: rebuilt from the log")
    if leftovers:
        for name in os.listdir(paths.root):
            if name.endswith(".tmp"):
                plan.remove.append(str(paths.root / name))
    return plan


def settle(io: FileIO, paths: SessionPaths, plan: Recovery) -> None:
    """Make durable what a killed writer may have left only in the page cache.

    Its last line may be complete but never synced, its newest chunk or blob may
    be a directory entry never synced: this writer would otherwise build on them
    and acknowledge events whose parents a power cut could still take away.
    Skipped when the plan shows the last writer finished cleanly.
    """
    if plan.clean:
        return
    if plan.chunk_count:
        fd = io.open(str(paths.chunk(plan.chunk_count - 1)), os.O_RDONLY)
        try:
            io.fdatasync(fd)
        finally:
            io.close(fd)
    io.fsync_dir(str(paths.chunks))
    io.fsync_dir(str(paths.blobs))


def apply(io: FileIO, paths: SessionPaths, plan: Recovery) -> None:
    """Carry out ``plan`` durably, in the same order it was decided."""
    for number, size in plan.truncate_chunks.items():
        fd = io.open(str(paths.chunk(number)), os.O_WRONLY)
        try:
            io.ftruncate(fd, size)
            io.fsync(fd)
        finally:
            io.close(fd)
    # Entries a killed writer left unsynced may match the chunks (so nothing is
    # rewritten), but only a sync makes them durable before new lines say so.
    if plan.index_writes or plan.index_size is not None or plan.index_durable < plan.count:
        fd = io.open(str(paths.index), os.O_WRONLY | os.O_CREAT)
        try:
            if plan.index_size is not None:
                io.ftruncate(fd, plan.index_size)
            for seq in sorted(plan.index_writes):
                write_all(io, fd, plan.index_writes[seq], offset=seq * INDEX_WIDTH)
            io.fsync(fd)
        finally:
            io.close(fd)
    # Leftover temp files go first: rewriting HEAD below uses HEAD.tmp itself.
    for path in plan.remove:
        io.unlink(path)
    if plan.remove:
        io.fsync_dir(str(paths.root))
    if plan.head is not None:
        atomic_write(io, str(paths.head), plan.head)

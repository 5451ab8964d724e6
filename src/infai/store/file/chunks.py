"""Reading chunk files: random access by location, and the committed tail.

Chunks are append-only JSONL files named ``000000.jsonl``, ``000001.jsonl``…; a
new one starts when the current one reaches the rotation size, so a read of one
event touches one small region of one file. Each line carries its sequence
number, its checksum, and, when it belongs to a batch, its place ``[i, n]`` in
that batch: a batch is acknowledged as a whole, so only a line that ends its
transaction (a single event, or ``i == n - 1``) commits.

:func:`committed_tail` finds where the committed prefix of the last chunk ends by
walking lines backward from the end, so opening a session costs the size of its
tail, not of its history.
"""

from __future__ import annotations

import os
import zlib

from ..errors import CorruptionError
from .format import ChunkLine, Location, decode_chunk_line
from .layout import SessionPaths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

BLOCK = 64 * 1024
#: nearby lines closer than this are fetched in one read
COALESCE_GAP = 16 * 1024


class ChunkFiles:
    """Read-only file descriptors for a session's chunks, opened on demand."""

    def __init__(self, paths: SessionPaths) -> None:
        self.paths = paths
        self._fds: dict[int, int] = {}
        self._block: tuple[int, int, bytes] | None = None  # see read_back

    def fd(self, number: int) -> int:
        """Chunk ``number``'s descriptor, opened once; a missing chunk is CorruptionError."""
        fd = self._fds.get(number)
        if fd is None:
            path = self.paths.chunk(number)
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                raise CorruptionError(path, 0, "chunk file is missing") from None
            self._fds[number] = fd
        return fd

    def read(self, loc: Location) -> bytes:
        """The bytes at ``loc`` (one pread); a short file is CorruptionError."""
        data = os.pread(self.fd(loc.chunk), loc.length, loc.offset)
        if len(data) != loc.length:
            raise CorruptionError(
                self.paths.chunk(loc.chunk),
                loc.offset,
                f"expected {loc.length} bytes, file ends after {len(data)}",
            )
        return data

    def read_many(self, locs: list[Location]) -> list[bytes]:
        """The bytes at each location, with nearby ranges fetched in one read."""
        order = sorted(range(len(locs)), key=lambda i: (locs[i].chunk, locs[i].offset))
        out: list[bytes] = [b""] * len(locs)
        i = 0
        while i < len(order):
            first = locs[order[i]]
            j, end = i + 1, first.end
            while j < len(order):
                nxt = locs[order[j]]
                if nxt.chunk != first.chunk or nxt.offset - end > COALESCE_GAP:
                    break
                end = max(end, nxt.end)
                j += 1
            span = self.read(Location(first.chunk, first.offset, end - first.offset))
            for k in order[i:j]:
                loc = locs[k]
                out[k] = span[loc.offset - first.offset : loc.end - first.offset]
            i = j
        return out

    def read_back(self, chunk: int, offset: int, length: int) -> bytes:
        """:meth:`read` of the line at ``(chunk, offset, length)``, for a walk toward
        older lines: reads a block ending at the line and serves the lines before it
        from that block. Plain numbers, not a :class:`Location`: a context calls this
        once per event."""
        end = offset + length
        cached = self._block
        if cached is not None and cached[0] == chunk and cached[1] <= offset:
            start, block = cached[1], cached[2]
            if end - start <= len(block):
                return block[offset - start : end - start]
        start = min(offset, max(0, end - BLOCK))
        block = self.read(Location(chunk, start, end - start))
        self._block = (chunk, start, block)
        return block[offset - start :]

    def close(self) -> None:
        """Close every chunk opened; a later read opens them again."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def lines_backward(fd: int, size: int) -> Iterator[tuple[int, bytes]]:
    """Yield ``(start, line)`` from the end of a file back to its start.

    A line includes its trailing newline; only the first one yielded can lack it.
    """
    buf_start = max(0, size - BLOCK)
    buf = os.pread(fd, size - buf_start, buf_start)
    end = size
    while end > 0:
        i = buf.rfind(b"\n", 0, end - 1 - buf_start) if end - 1 > buf_start else -1
        while i < 0 and buf_start > 0:
            new_start = max(0, buf_start - BLOCK)
            buf = os.pread(fd, buf_start - new_start, new_start) + buf
            buf_start = new_start
            i = buf.rfind(b"\n", 0, end - 1 - buf_start)
        start = buf_start + i + 1 if i >= 0 else 0
        yield start, buf[start - buf_start : end - buf_start]
        end = start


def lines_forward(data: bytes, base: int) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, line)`` for each line of ``data``, which starts at ``base``."""
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        yield base + pos, data[pos:end]
        pos = end


class Tail:
    """The committed end of a chunk and its last committed line."""

    __slots__ = ("end", "last", "last_offset")

    def __init__(self, end: int, last: ChunkLine | None, last_offset: int) -> None:
        self.end = end
        self.last = last
        self.last_offset = last_offset


def _is_torn(line: bytes) -> bool:
    """A region a crash can leave: a final line without newline, or zero-filled bytes.

    The store never writes a NUL byte (JSON escapes them), and a power cut zeroes
    whole blocks, so a run of NULs marks unwritten space; a lone NUL is damage.
    """
    return not line.endswith(b"\n") or b"\x00\x00\x00\x00" in line


def committed_tail(paths: SessionPaths, number: int) -> Tail:
    """Find the end of the last committed transaction in chunk ``number``.

    Bytes after it may only be what a crash leaves: a torn line, zero-filled
    bytes, or valid lines of a batch whose closing line never made it. A complete
    line that fails its checksum there is corruption, reported with its offset.
    """
    path = paths.chunk(number)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        lines = lines_backward(fd, size)
        while (item := next(lines, None)) is not None:
            start, raw = item
            parsed = decode_chunk_line(raw) if raw.endswith(b"\n") else None
            if parsed is None:
                if not _is_torn(raw):
                    raise CorruptionError(path, start, "complete line is not a valid event")
                # Zeroed bytes can swallow the newline before a valid line. That line
                # must then close a batch whose own members were zeroed (torn);
                # anything else means damage before a committed record.
                after = raw.rfind(b"\x00") + 1
                closer = decode_chunk_line(raw[after:]) if after else None
                if closer is None:
                    continue
                if closer.members is None or not closer.commits:
                    raise CorruptionError(path, start, "zeroed bytes before a valid line")
                start, raw, parsed = start + after, raw[after:], closer
            if not parsed.commits:
                continue  # a member of a batch that never committed
            if parsed.members is None:
                return Tail(end=start + len(raw), last=parsed, last_offset=start)
            # A batch's closing line carries the length and CRC of the lines before it.
            length, crc = parsed.members
            first = start - length
            region = os.pread(fd, length, first) if first >= 0 else b""
            if first >= 0 and zlib.crc32(region) == crc:
                return Tail(end=start + len(raw), last=parsed, last_offset=start)
            if first < 0 or not _is_torn(region):
                raise CorruptionError(
                    path, max(first, 0), f"batch of event #{parsed.seq} is damaged"
                )
            # The batch was torn by a crash before it committed: skip it whole.
            lines = lines_backward(fd, first)
        return Tail(end=0, last=None, last_offset=0)
    finally:
        os.close(fd)

"""Unit tests of infai.store.file.chunks: backward line iteration and the committed tail."""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infai.store import CorruptionError
from infai.store.file import chunks as chunks_mod
from infai.store.file.chunks import ChunkFiles, committed_tail, lines_backward, lines_forward
from infai.store.file.format import ChunkLine, Location, encode_chunk_line
from infai.store.file.layout import SessionPaths

NIL = "00000000-0000-0000-0000-000000000000"


def uid(n: int) -> str:
    return f"01a02f3f-0000-7000-8000-{n:012x}"


def line(seq: int, batch: tuple[int, int] | None = None, content: str = "x") -> bytes:
    return encode_chunk_line(
        ChunkLine(
            seq=seq,
            id=uid(seq),
            parent_id=uid(seq - 1) if seq else NIL,
            parent_seq=seq - 1,
            branch_from=None,
            kind="message",
            role="user",
            timestamp="2026-08-25T17:21:22.454897Z",
            preview=content[:80],
            record=json.dumps({"content": content}).encode(),
            digest=None,
            ixd=0,
            batch=batch,
        )
    )


def batch(first_seq: int, n: int) -> bytes:
    """A batch of ``n`` lines as the writer frames it: the closing line vouches for the rest."""
    members = b"".join(line(first_seq + i, (i, n)) for i in range(n - 1))
    closing = ChunkLine(
        seq=first_seq + n - 1,
        id=uid(first_seq + n - 1),
        parent_id=uid(first_seq + n - 2),
        parent_seq=first_seq + n - 2,
        branch_from=None,
        kind="message",
        role="user",
        timestamp="2026-08-25T17:21:22.454897Z",
        preview="x",
        record=b'{"content":"x"}',
        digest=None,
        ixd=0,
        batch=(n - 1, n),
    )
    closing.members = (len(members), zlib.crc32(members))
    return members + encode_chunk_line(closing)


@pytest.fixture
def paths(tmp_path: Path) -> SessionPaths:
    p = SessionPaths(tmp_path / "s")
    p.chunks.mkdir(parents=True)
    return p


def write_chunk(paths: SessionPaths, data: bytes, number: int = 0) -> None:
    paths.chunk(number).write_bytes(data)


# -- lines_backward ------------------------------------------------------------------


def backward(data: bytes, tmp_path: Path) -> list[tuple[int, bytes]]:
    f = tmp_path / "f"
    f.write_bytes(data)
    fd = os.open(f, os.O_RDONLY)
    try:
        return list(lines_backward(fd, len(data)))
    finally:
        os.close(fd)


def expected_backward(data: bytes) -> list[tuple[int, bytes]]:
    return list(reversed(list(lines_forward(data, 0))))


@pytest.mark.parametrize("block", [1, 2, 3, 5, 7, 16, 64 * 1024])
@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n",
        b"\n\n\n",
        b"a\n",
        b"a",
        b"abc\ndef\n",
        b"abc\ndef",
        b"abc\n\ndef\n",
        b"x" * 50 + b"\n" + b"y" * 3 + b"\n",
        b"short\n" + b"z" * 40,
    ],
)
def test_lines_backward_small_blocks(
    data: bytes, block: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chunks_mod, "BLOCK", block)
    got = backward(data, tmp_path)
    assert got == expected_backward(data)
    # Only the first line yielded may lack its newline; lines tile the file.
    assert b"".join(raw for _, raw in reversed(got)) == data
    for _, raw in got[1:]:
        assert raw.endswith(b"\n")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    tail=st.binary(max_size=10).map(lambda b: b.replace(b"\n", b"")),
    block=st.integers(1, 40),
)
def test_lines_backward_matches_forward(
    lines: list[bytes],
    tail: bytes,
    block: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chunks_mod, "BLOCK", block)
    data = b"".join(x + b"\n" for x in lines) + tail
    assert backward(data, tmp_path) == expected_backward(data)


def test_lines_backward_is_lazy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Finding the last line of a big file reads about one block, not the whole file.
    monkeypatch.setattr(chunks_mod, "BLOCK", 64)
    data = b"".join(b"line %05d\n" % i for i in range(10_000))
    f = tmp_path / "big"
    f.write_bytes(data)
    reads: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, n: int, off: int) -> bytes:
        reads.append(n)
        return real_pread(fd, n, off)

    monkeypatch.setattr(os, "pread", counting_pread)
    fd = os.open(f, os.O_RDONLY)
    try:
        it: Iterator[tuple[int, bytes]] = lines_backward(fd, len(data))
        assert next(it) == (len(data) - 11, b"line 09999\n")
    finally:
        os.close(fd)
    assert sum(reads) <= 128


# -- committed_tail --------------------------------------------------------------------------


BLOCKS = [3, 17, 100, 64 * 1024]


@pytest.fixture(params=BLOCKS)
def block(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    size: int = request.param
    monkeypatch.setattr(chunks_mod, "BLOCK", size)
    return size


def test_tail_of_empty_chunk(paths: SessionPaths, block: int) -> None:
    write_chunk(paths, b"")
    tail = committed_tail(paths, 0)
    assert (tail.end, tail.last, tail.last_offset) == (0, None, 0)


def test_tail_of_clean_chunk(paths: SessionPaths, block: int) -> None:
    data = line(0) + line(1) + line(2)
    write_chunk(paths, data)
    tail = committed_tail(paths, 0)
    assert tail.end == len(data)
    assert tail.last is not None and tail.last.seq == 2
    assert tail.last_offset == len(line(0)) + len(line(1))


@pytest.mark.parametrize(
    "junk",
    [
        b"{",  # a torn line, no newline
        b'{"seq":3,"id":"01a0',
        b"\x00" * 300,  # zero-filled tail
        b"\x00" * 10 + b"\n",  # zeroes ending in a newline
        b"\x00" * 10 + b"\n" + b"{",  # both
    ],
)
def test_tail_ignores_crash_leftovers(paths: SessionPaths, block: int, junk: bytes) -> None:
    good = line(0) + line(1)
    write_chunk(paths, good + junk)
    tail = committed_tail(paths, 0)
    assert tail.end == len(good)
    assert tail.last is not None and tail.last.seq == 1


def test_tail_ignores_torn_copy_of_a_valid_line(paths: SessionPaths, block: int) -> None:
    good = line(0)
    write_chunk(paths, good + line(1)[:-5])
    assert committed_tail(paths, 0).end == len(good)


def test_tail_complete_line_failing_checksum_is_corruption(paths: SessionPaths, block: int) -> None:
    good = line(0) + line(1)
    bad = bytearray(line(2))
    bad[20] ^= 0x01
    write_chunk(paths, good + bytes(bad))
    with pytest.raises(CorruptionError) as info:
        committed_tail(paths, 0)
    assert info.value.offset == len(good)
    assert info.value.path == str(paths.chunk(0))


def test_tail_lone_nul_in_complete_line_is_corruption(paths: SessionPaths, block: int) -> None:
    # The store never writes a NUL; a power cut zeroes whole blocks. One NUL in an
    # otherwise complete last line is damage, not a torn write.
    good = line(0)
    bad = bytearray(line(1))
    bad[25] = 0
    write_chunk(paths, good + bytes(bad))
    with pytest.raises(CorruptionError) as info:
        committed_tail(paths, 0)
    assert info.value.offset == len(good)


def test_tail_complete_batch(paths: SessionPaths, block: int) -> None:
    data = line(0) + batch(1, 3)
    write_chunk(paths, data)
    tail = committed_tail(paths, 0)
    assert tail.end == len(data)
    assert tail.last is not None and tail.last.seq == 3


def test_tail_drops_batch_without_its_closing_line(paths: SessionPaths, block: int) -> None:
    good = line(0)
    write_chunk(paths, good + line(1, (0, 3)) + line(2, (1, 3)))
    tail = committed_tail(paths, 0)
    assert tail.end == len(good)
    assert tail.last is not None and tail.last.seq == 0


def test_tail_drops_batch_with_torn_closing_line(paths: SessionPaths, block: int) -> None:
    good = line(0)
    write_chunk(paths, good + batch(1, 2)[:-1])
    assert committed_tail(paths, 0).end == len(good)


@pytest.mark.parametrize("zero", ["second_member", "first_member_and_more", "one_block"])
def test_tail_drops_batch_with_zeroed_member(paths: SessionPaths, block: int, zero: str) -> None:
    # The closing line reached the disk but an earlier block of the same write did not.
    good = line(0) + batch(1, 2)
    whole = batch(3, 3)
    first_len = len(line(3, (0, 3)))
    second_len = len(line(4, (1, 3)))
    start, length = {
        "second_member": (first_len, second_len),
        "first_member_and_more": (0, first_len + 10),  # member 1 keeps its newline
        "one_block": (5, 64),
    }[zero]
    zeroed = whole[:start] + b"\x00" * length + whole[start + length :]
    assert len(zeroed) == len(whole)
    write_chunk(paths, good + zeroed)
    tail = committed_tail(paths, 0)
    assert tail.end == len(good)
    assert tail.last is not None and tail.last.seq == 2


def test_tail_batch_with_altered_member_is_corruption(paths: SessionPaths, block: int) -> None:
    # Not what a crash leaves: every byte is there, but a member is not what was written.
    good = line(0)
    whole = bytearray(batch(1, 3))
    whole[30] ^= 0x01
    write_chunk(paths, good + bytes(whole))
    with pytest.raises(CorruptionError) as info:
        committed_tail(paths, 0)
    assert info.value.offset == len(good)


def test_tail_after_batches_and_singles(paths: SessionPaths, block: int) -> None:
    data = batch(0, 2) + line(2) + batch(3, 4) + line(7) + batch(8, 2)
    write_chunk(paths, data + line(10, (0, 2)))
    tail = committed_tail(paths, 0)
    assert tail.end == len(data)
    assert tail.last is not None and tail.last.seq == 9


def test_tail_batch_only_chunk_uncommitted(paths: SessionPaths, block: int) -> None:
    write_chunk(paths, line(0, (0, 2)))
    tail = committed_tail(paths, 0)
    assert tail.end == 0 and tail.last is None


def test_tail_batch_missing_members_is_corruption(paths: SessionPaths, block: int) -> None:
    # A closing line whose members are not before it at all.
    closing = batch(5, 3).splitlines(keepends=True)[-1]
    write_chunk(paths, closing)
    with pytest.raises(CorruptionError):
        committed_tail(paths, 0)


def test_tail_with_lines_spanning_blocks(paths: SessionPaths, block: int) -> None:
    data = b"".join(line(i, content="c" * (i * 37 % 200)) for i in range(12))
    write_chunk(paths, data + line(12)[:30])
    tail = committed_tail(paths, 0)
    assert tail.end == len(data)
    assert tail.last is not None and tail.last.seq == 11


def test_chunk_files_read_and_missing(paths: SessionPaths) -> None:
    data = line(0) + line(1)
    write_chunk(paths, data)
    files = ChunkFiles(paths)
    try:
        loc = Location(0, len(line(0)), len(line(1)))
        assert files.read(loc) == line(1)
        with pytest.raises(CorruptionError, match="ends after"):
            files.read(Location(0, len(data) - 5, 10))
        with pytest.raises(CorruptionError, match="missing"):
            files.read(Location(7, 0, 1))
    finally:
        files.close()


def test_chunk_files_read_many_matches_read(paths: SessionPaths) -> None:
    parts = [line(i, content="p" * (i * 53 % 300)) for i in range(20)]
    write_chunk(paths, b"".join(parts[:10]), 0)
    write_chunk(paths, b"".join(parts[10:]), 1)
    locs = []
    for number, group in ((0, parts[:10]), (1, parts[10:])):
        off = 0
        for p in group:
            locs.append(Location(number, off, len(p)))
            off += len(p)
    files = ChunkFiles(paths)
    try:
        wanted = [locs[i] for i in (19, 3, 4, 12, 0, 3, 9, 10)]
        assert files.read_many(wanted) == [files.read(loc) for loc in wanted]
        assert files.read_many([]) == []
    finally:
        files.close()

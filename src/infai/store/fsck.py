"""Checking a session end to end, and repairing only what is provably safe.

:func:`fsck` reads everything: every chunk line (checksum, sequence, parent
link, batch framing), every index entry against the entry its chunk line
implies, every blob against its digest, HEAD against the newest event, and
unreferenced or leftover files. Each problem is reported with the file and byte
offset where it was found. It changes nothing.

:func:`repair` (``fsck --repair``) does only what cannot lose an acknowledged
event: it runs recovery (truncating an uncommitted tail, rebuilding missing or
stale index entries and HEAD) and then rewrites the whole index from the
chunks. Damage inside the chunks or blobs is reported, never "fixed".
"""

from __future__ import annotations

import os

from .blobs import PREFIX, digest_of
from .chunks import lines_forward
from .errors import CorruptionError
from .format import (
    INDEX_WIDTH,
    NIL_ID,
    decode_chunk_line,
    decode_head,
    decode_index_entry,
    encode_index_entry,
    index_entry_from_line,
)
from .format import Location as Loc
from .fsio import FileIO, atomic_write
from .layout import SessionPaths
from .recovery import analyze, apply


class Problem:
    """One thing found wrong: where (file, byte offset) and what."""

    __slots__ = ("detail", "offset", "path")

    def __init__(self, path: str, offset: int, detail: str) -> None:
        self.path = path
        self.offset = offset
        self.detail = detail

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Problem) and (self.path, self.offset, self.detail) == (
            other.path,
            other.offset,
            other.detail,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Problem({self.path!r}, {self.offset}, {self.detail!r})"

    def __str__(self) -> str:
        return f"{self.path}: offset {self.offset}: {self.detail}"


class FsckReport:
    """What fsck found in one session."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.events = 0
        self.blobs = 0
        self.problems: list[Problem] = []
        #: what recovery on open would do (a crash's leftovers, not damage)
        self.pending_recovery: list[str] = []
        self.repaired: list[str] = []
        #: blob files no event names: harmless leftovers of a crash, removed by repair
        self.orphans: list[str] = []

    @property
    def ok(self) -> bool:
        return not self.problems and not self.pending_recovery


def fsck(paths: SessionPaths) -> FsckReport:
    """Verify every byte of the session; report problems, change nothing."""
    report = FsckReport(paths.root.name)
    try:
        plan = analyze(paths)
        report.pending_recovery = list(plan.notes)
        if plan.head is not None and not plan.notes:
            report.pending_recovery.append(f"{paths.head}: does not name the newest event")
        # Check only the prefix analysed: a live writer may append meanwhile.
        committed = dict(plan.truncate_chunks)
        chunk_limit: int | None = plan.chunk_count
        if plan.chunk_count:
            committed[plan.chunk_count - 1] = plan.chunk_size
        # What recovery will rebuild is listed as pending, not again as damage.
        pending_entries = set(plan.index_writes)
        index_cut = plan.index_size is not None
        head_pending = plan.head is not None
    except CorruptionError as exc:
        report.problems.append(Problem(exc.path, exc.offset, exc.detail))
        committed, pending_entries, index_cut, head_pending = {}, set(), False, False
        chunk_limit = None
    problem = report.problems.append

    seen: dict[str, int] = {}
    located: dict[str, Loc] = {}
    digests: set[str] = set()
    expected_index: list[bytes] = []
    last_id, last_seq = None, -1
    expect_member: int | None = None
    batch_size = 0
    for number in paths.chunk_numbers()[:chunk_limit]:
        path = paths.chunk(number)
        data = path.read_bytes()
        if number in committed:
            data = data[: committed[number]]
        for offset, raw in lines_forward(data, 0):
            line = decode_chunk_line(raw) if raw.endswith(b"\n") else None
            if line is None:
                problem(Problem(str(path), offset, "line fails its checksum"))
                continue
            where = (str(path), offset)
            if line.seq != last_seq + 1:
                problem(Problem(*where, f"event #{line.seq} follows #{last_seq}"))
            if line.id in seen:
                problem(Problem(*where, f"duplicate event id {line.id}"))
            if line.parent_id == NIL_ID:
                if line.parent_seq != -1:
                    problem(Problem(*where, "root event names a parent sequence number"))
            elif seen.get(line.parent_id) != line.parent_seq:
                problem(Problem(*where, f"parent {line.parent_id} is not event #{line.parent_seq}"))
            if line.parent_loc != located.get(line.parent_id):
                problem(Problem(*where, f"parent location {line.parent_loc} is wrong"))
            if line.branch_from is not None and line.branch_from != line.parent_id:
                problem(Problem(*where, "branch_from differs from parent_id"))
            want_batch = None if expect_member is None else (expect_member, batch_size)
            if line.batch != want_batch and not (
                want_batch is None and line.batch and not line.batch[0]
            ):
                problem(Problem(*where, f"batch framing {line.batch}, expected {want_batch}"))
            if line.batch and not line.commits:
                expect_member, batch_size = line.batch[0] + 1, line.batch[1]
            else:
                expect_member = None
            if line.digest is not None:
                digests.add(line.digest)
            seen[line.id] = line.seq
            located[line.id] = Loc(number, offset, len(raw))
            last_id, last_seq = line.id, line.seq
            entry = index_entry_from_line(line, Loc(number, offset, len(raw)))
            expected_index.append(encode_index_entry(entry))
    report.events = len(expected_index)

    index = paths.index.read_bytes() if paths.index.exists() else b""
    grown = len(index) > len(expected_index) * INDEX_WIDTH  # past the analysed prefix
    for seq, want in enumerate(expected_index):
        have = index[seq * INDEX_WIDTH : (seq + 1) * INDEX_WIDTH]
        if have != want and seq not in pending_entries:
            problem(
                Problem(str(paths.index), seq * INDEX_WIDTH, f"entry #{seq} is missing or stale")
            )
    if grown and not index_cut and not _valid_entries_after(index, len(expected_index)):
        problem(
            Problem(str(paths.index), len(expected_index) * INDEX_WIDTH, "entries past last event")
        )

    parsed = decode_head(paths.head.read_bytes()) if paths.head.exists() else None
    head = (parsed.id, parsed.seq) if parsed else None
    newer = parsed is not None and parsed.seq > last_seq and grown  # a live writer's
    if head != (None if last_id is None else (last_id, last_seq)) and not (head_pending or newer):
        problem(Problem(str(paths.head), 0, f"HEAD is {head}, newest event is {last_id}"))

    on_disk = set(os.listdir(paths.blobs)) if paths.blobs.is_dir() else set()
    for digest in sorted(digests):
        name = digest.removeprefix(PREFIX)
        blob = paths.blob(digest)
        if name not in on_disk:
            problem(Problem(str(blob), 0, f"blob {digest} is missing"))
            continue
        actual = digest_of(blob.read_bytes())
        if actual != digest:
            problem(Problem(str(blob), 0, f"content hashes to {actual}"))
    report.blobs = len(digests)
    report.orphans = sorted(on_disk - {d.removeprefix(PREFIX) for d in digests})
    return report


def _valid_entries_after(index: bytes, count: int) -> bool:
    """True if the index bytes past ``count`` entries are whole valid entries (appended
    by a live writer after the analysis), not leftovers."""
    rest = index[count * INDEX_WIDTH :]
    if len(rest) % INDEX_WIDTH:
        return False
    return all(
        decode_index_entry(rest[i : i + INDEX_WIDTH]) is not None
        for i in range(0, len(rest), INDEX_WIDTH)
    )


def repair(io: FileIO, paths: SessionPaths) -> list[str]:
    """Recover and rebuild the index from the chunks; the caller holds the writer lock."""
    plan = analyze(paths)
    done = list(plan.notes)
    if not plan.empty:
        apply(io, paths, plan)
    entries: list[bytes] = []
    for number in paths.chunk_numbers():
        data = paths.chunk(number).read_bytes()
        for offset, raw in lines_forward(data, 0):
            line = decode_chunk_line(raw)
            if line is None:
                raise CorruptionError(paths.chunk(number), offset, "line fails its checksum")
            entries.append(
                encode_index_entry(index_entry_from_line(line, Loc(number, offset, len(raw))))
            )
    rebuilt = b"".join(entries)
    if not paths.index.exists() or paths.index.read_bytes() != rebuilt:
        atomic_write(io, str(paths.index), rebuilt)
        done.append(f"{paths.index}: rebuilt {len(entries)} entries from the chunks")
    for orphan in orphan_blobs(paths):
        io.unlink(str(paths.blobs / orphan))
        done.append(f"{paths.blobs / orphan}: removed unreferenced blob")
    return done


def orphan_blobs(paths: SessionPaths) -> list[str]:
    """Blob files no committed event names (left by a crash before the event was written)."""
    named = set()
    for number in paths.chunk_numbers():
        for _, raw in lines_forward(paths.chunk(number).read_bytes(), 0):
            line = decode_chunk_line(raw)
            if line is not None and line.digest is not None:
                named.add(line.digest.removeprefix(PREFIX))
    return sorted(set(os.listdir(paths.blobs)) - named) if paths.blobs.is_dir() else []

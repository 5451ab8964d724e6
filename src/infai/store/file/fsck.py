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

from ..codec import NIL_ID, PREFIX, digest_of
from ..errors import CorruptionError
from ..report import FsckReport, Problem
from .chunks import lines_forward
from .format import (
    INDEX_WIDTH,
    ChunkLine,
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


class _Pending:
    """What recovery on open would rebuild: reported as pending, not as damage."""

    def __init__(self) -> None:
        #: chunk number -> committed size (the prefix that is checked)
        self.committed: dict[int, int] = {}
        #: how many chunks to check (None: all)
        self.chunk_limit: int | None = None
        self.entries: set[int] = set()
        self.index_cut = False
        self.head = False
        #: why recovery refuses to run (damage it found), if it does
        self.refused: Problem | None = None


def _analyse(paths: SessionPaths, report: FsckReport) -> _Pending:
    """Run recovery's analysis in memory: what it would do, and the prefix to check."""
    pending = _Pending()
    try:
        plan = analyze(paths)
    except CorruptionError as exc:
        pending.refused = Problem(exc.path, exc.offset, exc.detail)
        return pending
    report.pending_recovery = [_to_come(note) for note in plan.notes]
    if plan.head is not None and not plan.notes:
        report.pending_recovery.append(f"{paths.head}: does not name the newest event")
    # Check only the prefix analysed: a live writer may append meanwhile.
    pending.committed = dict(plan.truncate_chunks)
    pending.chunk_limit = plan.chunk_count
    if plan.chunk_count:
        pending.committed[plan.chunk_count - 1] = plan.chunk_size
    pending.entries = set(plan.index_writes)
    pending.index_cut = plan.index_size is not None
    pending.head = plan.head is not None
    return pending


_TENSES = ((": truncated ", ": would truncate "), (": rebuilt ", ": would rebuild "),
           (": cut ", ": would cut "))  # fmt: skip


def _to_come(note: str) -> str:
    """Recovery's note of what it did, said of what it would do (nothing is done yet)."""
    for done, to_do in _TENSES:
        if done in note:
            return note.replace(done, to_do, 1)
    return note


class _LineCheck:
    """Chunk lines checked in order: what each must be, given the ones before it."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problem = problems.append
        self.seen: dict[str, int] = {}
        self.located: dict[str, Loc] = {}
        self.digests: set[str] = set()
        self.expected_index: list[bytes] = []
        self.last_id: str | None = None
        self.last_seq = -1
        self.expect_member: int | None = None
        self.batch_size = 0
        #: sequence numbers and locations of lines that failed their checksum: what
        #: follows from them (a child's parent link, their index entries) is not
        #: reported again, so one flipped byte is one problem
        self.damaged_seqs: set[int] = set()
        self.damaged_locs: set[tuple[int, int]] = set()  # (chunk, offset)

    def chunk(self, path: str, number: int, data: bytes) -> None:
        for offset, raw in lines_forward(data, 0):
            line = decode_chunk_line(raw) if raw.endswith(b"\n") else None
            if line is None:
                self.problem(Problem(path, offset, "line fails its checksum"))
                self._damaged(Loc(number, offset, len(raw)))
                continue
            self._links(line, path, offset)
            self._batch(line, path, offset)
            if line.digest is not None:
                self.digests.add(line.digest)
            self.seen[line.id] = line.seq
            self.located[line.id] = Loc(number, offset, len(raw))
            self.last_id, self.last_seq = line.id, line.seq
            entry = index_entry_from_line(line, Loc(number, offset, len(raw)))
            self.expected_index.append(encode_index_entry(entry))

    def _damaged(self, where: Loc) -> None:
        """A line that fails its checksum still holds the next sequence number (the
        lines after it say so); its index entry cannot be checked."""
        self.last_seq += 1
        self.damaged_seqs.add(self.last_seq)
        self.damaged_locs.add((where.chunk, where.offset))
        self.expected_index.append(b"")
        self.expect_member = None

    def _links(self, line: ChunkLine, path: str, offset: int) -> None:
        """Sequence, id and parent links (id, sequence number, location, branch)."""
        problem = self.problem
        if line.seq != self.last_seq + 1:
            problem(Problem(path, offset, f"event #{line.seq} follows #{self.last_seq}"))
        if line.id in self.seen:
            problem(Problem(path, offset, f"duplicate event id {line.id}"))
        parent_at = (line.parent_loc.chunk, line.parent_loc.offset) if line.parent_loc else None
        on_damaged = line.parent_seq in self.damaged_seqs and parent_at in self.damaged_locs
        if line.parent_id == NIL_ID:
            if line.parent_seq != -1:
                problem(Problem(path, offset, "root event names a parent sequence number"))
        elif self.seen.get(line.parent_id) != line.parent_seq and not on_damaged:
            problem(
                Problem(path, offset, f"parent {line.parent_id} is not event #{line.parent_seq}")
            )
        if line.parent_loc != self.located.get(line.parent_id) and not on_damaged:
            problem(Problem(path, offset, f"parent location {line.parent_loc} is wrong"))
        if line.branch_from is not None and line.branch_from != line.parent_id:
            problem(Problem(path, offset, "branch_from differs from parent_id"))

    def _batch(self, line: ChunkLine, path: str, offset: int) -> None:
        """A batch's lines are numbered [i, n] in order; a single line has none."""
        want = None if self.expect_member is None else (self.expect_member, self.batch_size)
        if line.batch != want and not (want is None and line.batch and not line.batch[0]):
            self.problem(Problem(path, offset, f"batch framing {line.batch}, expected {want}"))
        if line.batch and not line.commits:
            self.expect_member, self.batch_size = line.batch[0] + 1, line.batch[1]
        else:
            self.expect_member = None


def fsck(paths: SessionPaths) -> FsckReport:
    """Verify every byte of the session; report problems, change nothing."""
    report = FsckReport(paths.root.name)
    pending = _analyse(paths, report)
    lines = _LineCheck(report.problems)
    for number in paths.chunk_numbers()[: pending.chunk_limit]:
        path = paths.chunk(number)
        data = path.read_bytes()
        if number in pending.committed:
            data = data[: pending.committed[number]]
        lines.chunk(str(path), number, data)
    report.events = len(lines.expected_index)
    grown = _check_index(paths, report, lines.expected_index, pending)
    _check_head(paths, report, lines, pending.head, grown)
    _check_blobs(paths, report, lines.digests)
    refused = pending.refused
    if refused and all(
        (p.path, p.offset) != (refused.path, refused.offset) for p in report.problems
    ):
        # recovery's analysis and the line check can trip over the same damaged line:
        # said once
        report.problems.insert(0, refused)
    return report


def _check_index(
    paths: SessionPaths, report: FsckReport, expected: list[bytes], pending: _Pending
) -> bool:
    """Each index entry against the one its chunk line implies; True if the index
    holds more entries than the prefix analysed (a live writer's)."""
    index = paths.index.read_bytes() if paths.index.exists() else b""
    grown = len(index) > len(expected) * INDEX_WIDTH  # past the analysed prefix
    stale = [
        seq
        for seq, want in enumerate(expected)
        # an empty ``want``: the chunk line is damaged (reported there), nothing to compare
        if want
        and index[seq * INDEX_WIDTH : (seq + 1) * INDEX_WIDTH] != want
        and seq not in pending.entries
    ]
    for first, last in _runs(stale):  # a missing index is one problem, not one per entry
        which = f"entry #{first} is" if first == last else f"entries #{first}..#{last} are"
        report.problems.append(
            Problem(str(paths.index), first * INDEX_WIDTH, f"{which} missing or stale")
        )
    if grown and not pending.index_cut and not _valid_entries_after(index, len(expected)):
        report.problems.append(
            Problem(str(paths.index), len(expected) * INDEX_WIDTH, "entries past last event")
        )
    return grown


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    """Ascending ``numbers`` as (first, last) runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and runs[-1][1] == n - 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


def _check_head(
    paths: SessionPaths, report: FsckReport, lines: _LineCheck, pending: bool, grown: bool
) -> None:
    """HEAD names the newest event, unless recovery will rebuild it (``pending``) or
    a live writer moved it past the prefix analysed (newer, and the index ``grown``)."""
    parsed = decode_head(paths.head.read_bytes()) if paths.head.exists() else None
    head = (parsed.id, parsed.seq) if parsed else None
    newest = None if lines.last_id is None else (lines.last_id, lines.last_seq)
    newer = parsed is not None and parsed.seq > lines.last_seq and grown  # a live writer's
    if head != newest and not (pending or newer):
        report.problems.append(
            Problem(str(paths.head), 0, f"HEAD is {head}, newest event is {lines.last_id}")
        )


def _check_blobs(paths: SessionPaths, report: FsckReport, digests: set[str]) -> None:
    """Every named blob is present and hashes to its name; unnamed ones are orphans."""
    on_disk = set(os.listdir(paths.blobs)) if paths.blobs.is_dir() else set()
    for digest in sorted(digests):
        name = digest.removeprefix(PREFIX)
        blob = paths.blob(digest)
        if name not in on_disk:
            report.problems.append(Problem(str(blob), 0, f"blob {digest} is missing"))
            continue
        actual = digest_of(blob.read_bytes())
        if actual != digest:
            report.problems.append(Problem(str(blob), 0, f"content hashes to {actual}"))
    report.blobs = len(digests)
    report.orphans = sorted(on_disk - {d.removeprefix(PREFIX) for d in digests})


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
    """Recover and rebuild the index from the chunks; the caller holds the writer lock.

    Damage inside the chunks stops the repair before anything is written (the
    returned notes say so, and the check that follows names the damage): only
    salvage, which copies what verifies into a new session, gets past it.
    """
    try:
        plan = analyze(paths)
        entries = _index_from_chunks(paths, plan.truncate_chunks)
    except CorruptionError as exc:
        return [f"nothing repaired: {exc}; 'infai session salvage' copies what verifies"]
    done = list(plan.notes)
    if not plan.empty:
        apply(io, paths, plan)
        entries = _index_from_chunks(paths)  # recovery may have cut an uncommitted tail
    rebuilt = b"".join(entries)
    if not paths.index.exists() or paths.index.read_bytes() != rebuilt:
        atomic_write(io, str(paths.index), rebuilt)
        done.append(f"{paths.index}: rebuilt {len(entries)} entries from the chunks")
    for orphan in orphan_blobs(paths):
        io.unlink(str(paths.blobs / orphan))
        done.append(f"{paths.blobs / orphan}: removed unreferenced blob")
    return done


def _index_from_chunks(paths: SessionPaths, cut: dict[int, int] | None = None) -> list[bytes]:
    """Every index entry, as the chunk lines imply them (chunk ``n`` read only up to
    ``cut[n]`` bytes: recovery's committed size); CorruptionError at the first line
    that fails its checksum."""
    entries: list[bytes] = []
    for number in paths.chunk_numbers():
        data = paths.chunk(number).read_bytes()
        if cut and number in cut:
            data = data[: cut[number]]
        for offset, raw in lines_forward(data, 0):
            line = decode_chunk_line(raw)
            if line is None:
                raise CorruptionError(paths.chunk(number), offset, "line fails its checksum")
            entries.append(
                encode_index_entry(index_entry_from_line(line, Loc(number, offset, len(raw))))
            )
    return entries


def orphan_blobs(paths: SessionPaths) -> list[str]:
    """Blob files no committed event names (left by a crash before the event was written)."""
    named = set()
    for number in paths.chunk_numbers():
        for _, raw in lines_forward(paths.chunk(number).read_bytes(), 0):
            line = decode_chunk_line(raw)
            if line is not None and line.digest is not None:
                named.add(line.digest.removeprefix(PREFIX))
    return sorted(set(os.listdir(paths.blobs)) - named) if paths.blobs.is_dir() else []

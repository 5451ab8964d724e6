"""Appending to one session: the durable write path.

**Default ("fast") sequence, one fsync per append.** The chunks are the truth and
everything else can be rebuilt from them, so only the chunk must be durable when
an append returns:

1. blobs the events name: temp file, fsync, rename, fsync ``blobs/`` (new ones only);
2. if ``index_sync_interval`` entries were written since the last index fsync,
   fsync the index first; the count of entries known durable goes into the line
   as ``ixd`` so recovery re-checks at most that interval;
3. on rotation, create the next chunk and fsync ``chunks/`` before writing to it;
4. write the checksummed line(s) in one write and ``fdatasync`` the chunk: the
   append is now committed; it is acknowledged when the call returns;
5. write the index entries and overwrite HEAD in place, without syncing: both are
   hints that recovery verifies and rebuilds.

**Strict sequence** (``durability="strict"``), the design's conservative order:
sync the chunk; write and sync ``HEAD.tmp``; write and sync the index entry;
rename ``HEAD.tmp`` over HEAD; sync the session directory.

A batch is written as one transaction (each line tagged ``[i, n]``, the last one
carrying the length and CRC of the others) with the same constant number of
fsyncs as a single event. Any ``OSError`` on the write path poisons the writer:
the call raises :class:`StoreIOError`, nothing is acknowledged, the failed bytes
are cut back out of the chunk (a page the kernel kept after a failed sync must
not look committed to the next writer), and every later write is refused until
the session is reopened.
"""

from __future__ import annotations

import contextlib
import os
import zlib

from ..codec import NIL_ID, check_role, check_timestamp, check_uuid, digest_of, now_rfc3339
from ..errors import InvalidInput, StoreIOError
from ..events import Event, EventSpec
from ..info import BASE_FORMAT, format_for
from ..records import RECORD_TYPES, Record, encode_record, preview
from .blobs import put_blobs
from .format import (
    INDEX_WIDTH,
    ChunkLine,
    Location,
    encode_event,
    encode_head,
)
from .fsio import FileIO, write_all, write_file
from .layout import SessionPaths
from .reader import SessionReader
from .recovery import Recovery

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..options import StoreOptions
    from .lock import WriterLock


class SessionWriter(SessionReader):
    """The one writer of a session; holds its OS lock until :meth:`close`."""

    def __init__(
        self,
        paths: SessionPaths,
        plan: Recovery,
        io: FileIO,
        options: StoreOptions,
        lock: WriterLock,
        on_first_append: Callable[[], None] | None = None,
        on_close: Callable[[], object] | None = None,
        on_commit: Callable[[list[Event]], None] | None = None,
        on_format: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(paths, plan)
        self._io = io
        self._opts = options
        self._lock = lock
        self._failed: BaseException | None = None
        self._pending: str | None = None
        self._ixd = plan.count  # recovery synced the index
        self._chunk_no = max(plan.chunk_count - 1, 0)
        self._chunk_size = plan.chunk_size
        self._chunk_fd = -1
        self._index_wfd = -1
        self._head_fd = -1
        self._on_first_append = on_first_append
        #: called with the format needed before the first event of a kind a newer
        #: format brings (snapshot, restore: 2; gap: 3) is written, so the session's
        #: metadata says so first (see infai.store.info)
        self._on_format = on_format
        self._format_done = BASE_FORMAT
        self._on_close = on_close
        #: called with the events of each append once it is durable (the search index)
        self._on_commit = on_commit
        self._strict = options.durability == "strict"
        self._head_loc = plan.last_location
        self._blobs_synced = False
        self.appended = 0

    # -- selection (two-phase branching) ------------------------------------

    @property
    def pending_parent(self) -> str | None:
        """The event the next append will follow, if one was selected."""
        return self._pending

    def select(self, event_id: str | None) -> None:
        """Make ``event_id`` the parent of the next append (memory only; HEAD stays).

        ``None`` (or HEAD itself) returns to HEAD.
        """
        if event_id is None:
            self._pending = None
            return
        event_id = check_uuid(event_id, "event id")
        self.seq_of(event_id)
        self._pending = None if event_id == self.head else event_id

    # -- appends -----------------------------------------------------------

    def append(self, record: Record, role: str, *, parent: str | None = None) -> Event:
        """Append one event after ``parent`` (default: the selected event, else HEAD).

        Returns once the event is durable. A parent other than HEAD starts a branch
        (``branch_from`` is set) and HEAD moves to the new event.
        """
        return self.append_batch([(record, role)], parent=parent)[0]

    def append_batch(
        self, items: Sequence[tuple[Record, str]], *, parent: str | None = None
    ) -> list[Event]:
        """Append events as one transaction: all become durable together, or none.

        The first follows ``parent`` (default: the selected event, else HEAD); each
        next one follows the previous.
        """
        self._check_usable()
        if not items:
            return []
        if parent is None:
            parent = self._pending
        if parent is None:
            parent_id, parent_seq = (self._head_id or NIL_ID), self._head_seq
        else:
            parent_id = check_uuid(parent, "parent id")
            parent_seq = self.seq_of(parent_id)
        branch_from = parent_id if parent_seq != self._head_seq else None

        import uuid_utils  # not needed (nor imported) by readers

        specs = []
        stamp = now_rfc3339()  # one transaction, one time
        for record, role in items:
            event_id = str(uuid_utils.uuid7())
            specs.append((event_id, parent_id, branch_from, role, stamp, record))
            parent_id, branch_from = event_id, None
        return self._write(specs, {specs[0][1]: parent_seq})

    def import_batch(self, specs: Sequence[EventSpec]) -> list[Event]:
        """Append events with given ids, parents, branch points and timestamps (import).

        The caller has checked that ids are new and parents exist in the session.
        """
        self._check_usable()
        for event_id, parent_id, branch_from, _role, timestamp, _record in specs:
            check_uuid(event_id, "event id")
            check_uuid(parent_id, "parent id")
            if branch_from is not None:
                check_uuid(branch_from, "branch_from")
            check_timestamp(timestamp)
        return self._write(specs, {})

    def _write(self, specs: Sequence[EventSpec], known: dict[str, int]) -> list[Event]:
        if not specs:
            return []
        lines: list[ChunkLine] = []
        blobs: list[tuple[str, bytes]] = []
        n = len(specs)
        local = dict(known)
        in_batch: dict[str, int] = {}  # id -> position, for parents written alongside
        parent_at: list[int | None] = []
        for i, (event_id, parent_id, branch_from, role, timestamp, record) in enumerate(specs):
            if type(record) not in RECORD_TYPES.values():
                raise InvalidInput(f"not a record: {type(record).__name__}")
            check_role(role)
            data = encode_record(record)
            digest = None
            inline: bytes | None = data
            if len(data) > self._opts.blob_threshold:
                digest = digest_of(data)
                blobs.append((digest, data))
                inline = None
            seq = self._count + i
            parent_loc = None
            if parent_id == NIL_ID:
                parent_seq = -1
            elif parent_id in local:
                parent_seq = local[parent_id]
            else:
                parent_seq = self.seq_of(parent_id)
            if parent_id in in_batch:
                parent_at.append(in_batch[parent_id])
            else:
                parent_at.append(None)
                if parent_seq == self._head_seq:
                    parent_loc = self._head_loc
                elif parent_seq >= 0:
                    parent_loc = self.entry_at(parent_seq).location
            local[event_id] = seq
            in_batch[event_id] = i
            line = ChunkLine(
                seq=seq,
                id=event_id,
                parent_id=parent_id,
                parent_seq=parent_seq,
                branch_from=branch_from,
                kind=record.kind,
                role=role,
                timestamp=timestamp,
                preview=preview(record),
                record=inline,
                digest=digest,
                ixd=0,
                batch=(i, n) if n > 1 else None,
            )
            line.parent_loc = parent_loc
            lines.append(line)
        try:
            if self._on_first_append is not None:
                self._on_first_append()
                self._on_first_append = None
            needed = format_for({spec[5].kind for spec in specs})
            if needed > self._format_done and self._on_format is not None:
                self._on_format(needed)  # before the events: never an older format holding them
                self._format_done = needed
            self._commit(lines, blobs, parent_at)
        except OSError as exc:
            self._failed = exc
            raise StoreIOError(
                exc.errno, f"append failed, writer closed for writes: {exc}"
            ) from exc
        self._pending = None
        self.appended += n
        events = [
            Event(
                id=line.id,
                parent_id=line.parent_id,
                branch_from=line.branch_from,
                kind=line.kind,
                role=line.role,
                timestamp=line.timestamp,
                record=spec[5],
                digest=line.digest,
                seq=line.seq,
                preview=line.preview,
                parent_seq=line.parent_seq,
            )
            for line, spec in zip(lines, specs, strict=True)
        ]
        if self._on_commit is not None:
            # Durable already: what follows maintains a derived index and never fails
            # the append (the hook swallows its own errors).
            self._on_commit(events)
        return events

    def _unwrite(self, committed_size: int) -> None:
        """Cut an unacknowledged write out of the chunk after a failure.

        After a failed fdatasync Linux may keep the written page in the cache but
        mark it clean: a later reopen would read the line as committed and build on
        bytes the disk never got. Best effort; recovery handles what remains.
        """
        with contextlib.suppress(OSError):
            if os.fstat(self._chunk_fd).st_size > committed_size:
                self._io.ftruncate(self._chunk_fd, committed_size)

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise StoreIOError(
                f"session {self.session_id}: an earlier write failed ({self._failed}); "
                "reopen the session to continue"
            )
        if self._lock is None:
            raise StoreIOError(f"session {self.session_id}: writer is closed")

    def _commit(
        self, lines: list[ChunkLine], blobs: list[tuple[str, bytes]], parent_at: list[int | None]
    ) -> None:
        io, opts = self._io, self._opts
        if blobs:
            # The first time this writer names a blob that already exists, sync
            # blobs/ anyway: a killed writer may have renamed it there unsynced.
            put_blobs(io, self.paths, blobs, sync_existing=not self._blobs_synced)
            self._blobs_synced = True
        if self._count - self._ixd >= opts.index_sync_interval and self._index_wfd >= 0:
            io.fsync(self._index_wfd)
            self._ixd = self._count
        if self._chunk_fd < 0 or self._chunk_size >= opts.chunk_size:
            self._open_chunk()
        encoded: list[bytes] = []
        entries: list[bytes] = []
        locations: list[Location] = []
        offset = self._chunk_size
        members_crc = 0  # CRC-32 of the lines so far, for a batch's closing line
        for i, line in enumerate(lines):
            line.ixd = self._ixd
            j = parent_at[i]
            if j is not None:
                line.parent_loc = locations[j]
            if i and i == len(lines) - 1:
                # The closing line vouches for the rest of its batch: recovery checks
                # one CRC over their bytes instead of walking every line back.
                line.members = (offset - self._chunk_size, members_crc)
            data, entry = encode_event(line, self._chunk_no, offset)
            members_crc = zlib.crc32(data, members_crc)
            encoded.append(data)
            entries.append(entry)
            locations.append(Location(self._chunk_no, offset, len(data)))
            offset += len(data)
        try:
            write_all(io, self._chunk_fd, b"".join(encoded))
            io.fdatasync(self._chunk_fd)
        except OSError:
            self._unwrite(self._chunk_size)
            raise
        # Committed. What follows only maintains rebuildable hints.
        self._chunk_size = offset
        last = lines[-1]
        # Strict mode renames HEAD into place only after the index fsync below.
        head = encode_head(
            last.id, last.seq, self._count + len(lines) if self._strict else self._ixd
        )
        if self._index_wfd < 0:
            self._index_wfd = io.open(str(self.paths.index), os.O_WRONLY | os.O_CREAT)
        if self._strict:
            write_file(io, str(self.paths.head_tmp), head)
        write_all(io, self._index_wfd, b"".join(entries), offset=self._count * INDEX_WIDTH)
        if self._ids is not None:
            for line in lines:
                self._ids[line.id] = line.seq
        self._count += len(lines)
        self._head_id, self._head_seq = last.id, last.seq
        self._head_loc = locations[-1]
        if self._strict:
            io.fsync(self._index_wfd)
            self._ixd = self._count
            io.rename(str(self.paths.head_tmp), str(self.paths.head))
            io.fsync_dir(str(self.paths.root))
        else:
            if self._head_fd < 0:
                self._head_fd = io.open(str(self.paths.head), os.O_WRONLY | os.O_CREAT)
            write_all(io, self._head_fd, head, offset=0)

    def _open_chunk(self) -> None:
        """Open the chunk to append to, starting the next one when this one is full."""
        io = self._io
        if self._chunk_fd >= 0 or self._chunk_size >= self._opts.chunk_size:
            if self._chunk_fd >= 0:
                io.close(self._chunk_fd)
                self._chunk_fd = -1
            self._chunk_no, self._chunk_size = self._chunk_no + 1, 0
        path = str(self.paths.chunk(self._chunk_no))
        self._chunk_fd = io.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        # Even an existing chunk: a killed writer may have created it and died
        # before syncing its directory entry.
        io.fsync_dir(str(self.paths.chunks))

    # -- closing -----------------------------------------------------------

    def close(self) -> None:
        """Sync the index, release the lock and close files (idempotent)."""
        io = self._io
        try:
            if self._index_wfd >= 0:
                if self._failed is None:
                    # The index is a hint: if this fails, recovery rebuilds it. Once it
                    # is synced, HEAD may claim so, sparing the next open a re-check.
                    with contextlib.suppress(OSError):
                        io.fsync(self._index_wfd)
                        if self._head_fd >= 0 and self._head_id is not None:
                            head = encode_head(self._head_id, self._head_seq, self._count)
                            write_all(io, self._head_fd, head, offset=0)
                io.close(self._index_wfd)
            for fd in (self._chunk_fd, self._head_fd):
                if fd >= 0:
                    io.close(fd)
        finally:
            self._index_wfd = self._chunk_fd = self._head_fd = -1
            if self._lock is not None:
                self._lock.release()
                self._lock = None  # type: ignore[assignment]
                if self._on_close is not None:
                    self._on_close()
            super().close()

    def refresh(self) -> None:
        """Nothing to re-read: the writer's lock keeps every other writer out, so
        what this writer holds is the session as it is."""

    def __enter__(self) -> SessionWriter:
        return self

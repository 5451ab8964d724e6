"""The directory store's objects: one SQLite database, ``<home>/objects/objects.sqlite``,
and pack files beside it for large contents.

Model, in prose (the contract is :mod:`infai.store.objects`): a table of
``(digest, size, data, pack, pos)`` rows keyed by digest — the bytes inline for
objects under :data:`~.packs.PACK_MIN` and for a batch's first
:data:`BATCH_INLINE` bytes of larger ones, else the pack and offset where they
are (:mod:`.packs`: one append-only file per batch, synced before the batch
commits) — a ``packs`` table naming the packs, a narrow ``puts`` table of when
each digest was last put (POSIX seconds; garbage collection's grace period),
plus a one-row ``generation`` counter that every removal bumps. SQLite rather
than one file per object because a workspace snapshot adds thousands of small
objects at once and must make them durable together: one transaction, one sync
in WAL mode), where loose files would need an fsync each. The database runs
with ``synchronous = NORMAL``: a commit is safe against a process kill at once
(the write-ahead log is in the kernel's hands) and :meth:`FileObjects.sync`
makes it safe against a power cut (an ``fsync`` of the log). A batch does that
before it returns unless opened with ``durable=False``, for a caller that
syncs later but before anything durable names the objects (a snapshot that
will be recorded on a timeline: see :mod:`infai.store.objects`). Unlike the listing
and search indexes under ``<home>/index/``, this database is *truth*, not a
cache: it is never rebuilt, and a damaged one is reported, not replaced.

Several processes share it safely (SQLite's own locking, with a busy timeout);
a writer of a batch holds the write lock only while its transaction commits.
Rows are verified on read: bytes that do not hash to their digest raise
:class:`~infai.store.errors.BlobDigestError` naming the database (or pack and
offset) and digest. Removal deletes rows, then drops packs no row names and
rewrites packs that are more than half garbage (their live objects copied into
the removing transaction's own pack), deleting the old files after the commit.
Schema version 3 (packs, a rowid objects table: SQLite advises against
``WITHOUT ROWID`` for large rows) migrates versions 1 and 2 in place, their
inline bytes staying inline.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType

from ..codec import PREFIX, digest_of
from ..errors import BlobDigestError, CorruptionError, ObjectNotFound, StoreIOError
from ..objects import check_digest
from . import objspace
from .objschema import SCHEMA_VERSION, migrate
from .packs import PACK_MIN, PackReader, PackWriter, pack_path, sync_dir

#: a put refreshes its time: a narrow row, so putting an existing object again
#: never rewrites the object's bytes
_PUT_TIME = "INSERT INTO puts (digest, at) VALUES (?, ?) ON CONFLICT (digest) DO UPDATE SET at = ?"
#: how long a process waits for another's write transaction, in milliseconds
BUSY_MS = 30_000
#: digests per query in :meth:`FileObjects.missing` (SQLite's variable limit is 32766)
_CHUNK = 500
#: puts a batch keeps before inserting them with one ``executemany``
_PENDING = 1000
#: a batch's first bytes of large objects stay inline: a snapshot after a small
#: change then costs one sync (the database's) and makes no pack file
BATCH_INLINE = 1 << 20
#: large objects a batch keeps before one lookup and one hand-over to its pack
GROUP_BYTES = 4 << 20


class _Batch:
    """Puts collected in memory-light form: small objects wait as rows for one
    ``executemany``; large ones wait in a group of at most :data:`GROUP_BYTES`
    whose digests are looked up with one query, the new ones then handed to
    the batch's pack in one go (or kept inline while the batch is small). So a
    batch of 200 MB neither sits in a Python list nor costs a query and a
    thread hand-over per object."""

    def __init__(self, owner: FileObjects, durable: bool = True) -> None:
        self._owner = owner
        self._durable = durable
        self._conn = owner._connect()
        self._seen: set[str] = set()
        self._pack: PackWriter | None = None
        self._pack_id = 0
        self._inline = 0
        #: rows waiting for one ``executemany`` (at most :data:`_PENDING` of them)
        self._rows: list[tuple[str, int, bytes | None, int | None, int | None]] = []
        self._times: list[tuple[str, float, float]] = []
        #: large objects waiting for their lookup (see :meth:`_place`)
        self._large: list[tuple[str, bytes]] = []
        self._large_bytes = 0

    def put(self, data: bytes) -> str:
        return self.put_known(PREFIX + hashlib.sha256(data).hexdigest(), data)

    def put_known(self, digest: str, data: bytes) -> str:
        """Add ``data`` whose digest the caller computed (it is the caller's word:
        a snapshot hashes while it reads); ``digest``."""
        if digest not in self._seen:
            self._seen.add(digest)
            if len(data) < PACK_MIN:
                self._rows.append((digest, len(data), data, None, None))
            else:
                self._large.append((digest, data))
                self._large_bytes += len(data)
                if self._large_bytes >= GROUP_BYTES or len(self._large) >= _CHUNK:
                    self._place()
            now = time.time()
            self._times.append((digest, now, now))
            if len(self._times) >= _PENDING:
                self._flush()
        return digest

    def _place(self) -> None:
        """Find where the waiting large objects go: nowhere if stored already,
        inline while the batch is under :data:`BATCH_INLINE`, else the pack.
        A group that fits inline whole goes inline without the lookup (a warm
        snapshot's few files: ``INSERT OR IGNORE`` keeps a stored row as it is;
        the budget then counts them, which only starts a pack sooner)."""
        if not self._large:
            return
        if self._pack is None and self._inline + self._large_bytes <= BATCH_INLINE:
            self._inline += self._large_bytes
            self._rows.extend((d, len(data), data, None, None) for d, data in self._large)
            self._large.clear()
            self._large_bytes = 0
            return
        marks = ",".join("?" * len(self._large))
        found = {
            row[0]
            for row in self._conn.execute(
                f"SELECT digest FROM objects WHERE digest IN ({marks})",
                [d for d, _ in self._large],
            )
        }
        packed: list[tuple[str, bytes]] = []
        for digest, data in self._large:
            if digest in found:
                continue
            if self._pack is None and self._inline + len(data) <= BATCH_INLINE:
                self._inline += len(data)  # a small batch: one sync, no pack file
                self._rows.append((digest, len(data), data, None, None))
            else:
                packed.append((digest, data))
        self._large.clear()
        self._large_bytes = 0
        if packed:
            pack, offsets = self._append([data for _, data in packed])
            for (digest, data), pos in zip(packed, offsets, strict=True):
                self._rows.append((digest, len(data), None, pack, pos))

    def _flush(self) -> None:
        """Insert the waiting rows (within the batch's transaction)."""
        self._place()
        self._conn.executemany(
            "INSERT OR IGNORE INTO objects (digest, size, data, pack, pos) VALUES (?, ?, ?, ?, ?)",
            self._rows,
        )
        self._conn.executemany(_PUT_TIME, self._times)
        self._rows.clear()
        self._times.clear()

    def _append(self, datas: list[bytes]) -> tuple[int, list[int]]:
        """Append to this batch's pack (created on first use): (pack id, offsets)."""
        try:
            if self._pack is None:
                self._pack = PackWriter(self._owner.packs)
                cur = self._conn.execute(
                    "INSERT INTO packs (name, size) VALUES (?, 0)", (self._pack.name,)
                )
                self._pack_id = int(cur.lastrowid or 0)
            return self._pack_id, self._pack.append_many(datas)
        except OSError as exc:
            raise StoreIOError(f"{self._owner.packs}: could not write a pack: {exc}") from exc

    def repack(self, digest: str, data: bytes) -> None:
        """Move a live object into this batch's pack (gc rewriting a sparse pack)."""
        pack, (pos,) = self._append([data])
        self._conn.execute(
            "UPDATE objects SET pack = ?, pos = ?, data = NULL WHERE digest = ?",
            (pack, pos, digest),
        )

    def _discard(self) -> None:
        if self._pack is not None:
            self._pack.discard()
            self._pack = None

    def __enter__(self) -> _Batch:
        self._owner._lock.acquire()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self._owner._lock.release()
            raise self._owner._io_error("begin a batch", exc) from exc
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if kind is None:
                try:
                    self._flush()
                    if self._pack is not None:
                        self._pack.sync()  # the bytes are durable before any row names them
                        self._conn.execute(
                            "UPDATE packs SET size = ? WHERE id = ?",
                            (self._pack.size, self._pack_id),
                        )
                    self._conn.execute("COMMIT")
                    self._owner._committed(self._durable)
                except (sqlite3.Error, OSError) as error:
                    self._conn.execute("ROLLBACK")
                    self._discard()
                    if isinstance(error, OSError):
                        raise StoreIOError(
                            f"{self._owner.packs}: could not sync a pack: {error}"
                        ) from error
                    raise self._owner._io_error("commit a batch", error) from error
            else:
                self._conn.execute("ROLLBACK")
                self._discard()
        finally:
            self._owner._lock.release()


class FileObjects:
    """The store's objects in ``<home>/objects/objects.sqlite`` (created on first write)."""

    def __init__(self, home: Path) -> None:
        self.path = home / "objects" / "objects.sqlite"
        self.packs = home / "objects" / "packs"
        self._reader = PackReader(self.packs)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        #: a batch committed without a sync since the last one (see :meth:`sync`)
        self._unsynced = False
        self._wal_ino = -1

    def _io_error(self, what: str, exc: sqlite3.Error) -> StoreIOError:
        return StoreIOError(f"{self.path}: could not {what}: {exc}")

    def _connect(self) -> sqlite3.Connection:
        with self._lock:
            if self._conn is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                    conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
                    # a new database only (before its first table and before WAL);
                    # an older one is converted by gc (objspace.compact)
                    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = NORMAL")
                    found = conn.execute("PRAGMA user_version").fetchone()[0]
                    if found > SCHEMA_VERSION:
                        conn.close()
                        raise CorruptionError(
                            self.path, 0, f"schema version {found} is newer than this infai"
                        )
                    if found < SCHEMA_VERSION:
                        migrate(conn)
                except sqlite3.DatabaseError as exc:
                    raise CorruptionError(self.path, 0, f"not a readable database: {exc}") from exc
                self._conn = conn
            return self._conn

    def _exists(self) -> bool:
        return self._conn is not None or self.path.exists()

    def batch(self, *, durable: bool = True) -> _Batch:
        """A batch of puts, committed together when the ``with`` block exits, and
        synced to disk then too unless ``durable`` is false (see :meth:`sync`)."""
        return _Batch(self, durable)

    def _committed(self, durable: bool) -> None:
        """A batch committed (under the lock): sync now, or remember to."""
        self._unsynced = True
        if durable:
            self.sync()

    def sync(self) -> None:
        """Make every batch this object committed durable across a power cut.

        An ``fsync`` of the write-ahead log, opened by name: a commit's frames
        are either still in the log (synced here) or were copied into the
        database by a checkpoint, which SQLite syncs itself (before copying the
        log, and the database after it) with ``synchronous = NORMAL``. A log
        file not synced before (a new inode) has its directory synced too. A
        no-op when nothing was committed since the last sync."""
        with self._lock:
            if not self._unsynced:
                return
            wal = self.path.with_name(self.path.name + "-wal")
            try:
                fd = os.open(wal, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                fd = -1  # checkpointed and removed: in the synced database
            except OSError as exc:
                raise StoreIOError(f"{wal}: could not open to sync: {exc}") from exc
            try:
                if fd >= 0:
                    os.fsync(fd)
                    ino = os.fstat(fd).st_ino
                    if ino != self._wal_ino:
                        sync_dir(self.path.parent)
                        self._wal_ino = ino
            except OSError as exc:
                raise StoreIOError(f"{wal}: could not sync: {exc}") from exc
            finally:
                if fd >= 0:
                    os.close(fd)
            self._unsynced = False

    def put(self, data: bytes) -> str:
        """Add one object durably; its digest."""
        with self.batch() as batch:
            return batch.put(data)

    def get(self, digest: str) -> bytes:
        """The object's bytes, verified against ``digest``."""
        check_digest(digest)
        for attempt in (0, 1):
            row = self._row(digest)
            if row is None:
                raise ObjectNotFound(digest)
            data, size, pos, name = row
            if data is not None:
                where, at, got = self.path, 0, bytes(data)
                break
            where, at = pack_path(self.packs, name), int(pos or 0)
            try:
                got = self._reader.read(name, at, int(size))
                break
            except FileNotFoundError:
                if attempt:  # not a pack gc rewrote meanwhile: gone
                    raise BlobDigestError(
                        where, at, f"object {digest}: its pack is missing"
                    ) from None
            except OSError as exc:
                raise StoreIOError(f"{where}: could not read object {digest}: {exc}") from exc
        if digest_of(got) != digest:
            raise BlobDigestError(where, at, f"object {digest} does not match its content")
        return got

    def _row(self, digest: str) -> tuple[bytes | None, int, int | None, str] | None:
        if not self._exists():
            return None
        with self._lock:
            row = (
                self._connect()
                .execute(
                    "SELECT o.data, o.size, o.pos, p.name FROM objects o"
                    " LEFT JOIN packs p ON p.id = o.pack WHERE o.digest = ?",
                    (digest,),
                )
                .fetchone()
            )
        return None if row is None else (row[0], row[1], row[2], row[3])

    def has(self, digest: str) -> bool:
        """Whether the object is stored."""
        return not self.missing([digest])

    def missing(self, digests: Iterable[str]) -> set[str]:
        """Those of ``digests`` that are not stored."""
        wanted = {check_digest(d) for d in digests}
        if not wanted or not self._exists():
            return wanted
        found: set[str] = set()
        ordered = sorted(wanted)
        with self._lock:
            conn = self._connect()
            for start in range(0, len(ordered), _CHUNK):
                part = ordered[start : start + _CHUNK]
                marks = ",".join("?" * len(part))
                rows = conn.execute(f"SELECT digest FROM objects WHERE digest IN ({marks})", part)
                found.update(row[0] for row in rows)
        return wanted - found

    def size(self, digest: str) -> int:
        """The object's length in bytes."""
        check_digest(digest)
        row = None
        if self._exists():
            with self._lock:
                row = (
                    self._connect()
                    .execute("SELECT size FROM objects WHERE digest = ?", (digest,))
                    .fetchone()
                )
        if row is None:
            raise ObjectNotFound(digest)
        return int(row[0])

    def digests(self) -> Iterator[str]:
        """Every digest (read in one go: gc then works on a stable list)."""
        if not self._exists():
            return iter(())
        with self._lock:
            rows = self._connect().execute("SELECT digest FROM objects").fetchall()
        return iter([row[0] for row in rows])

    def remove(self, digests: Iterable[str], *, grace: float = 0.0) -> int:
        """Remove these objects in one transaction, except those put within the last
        ``grace`` seconds (checked under the write lock, which every batch takes
        too, so no put is in flight); the bytes freed."""
        doomed = sorted({check_digest(d) for d in digests})
        if not self._exists():
            return 0
        freed = 0
        with self.batch() as batch:
            conn = self._connect()
            dropped = self._orphans(conn)
            cutoff = time.time() - grace
            keep = "AND NOT EXISTS (SELECT 1 FROM puts p WHERE p.digest = o.digest AND p.at >= ?)"
            touched: set[int] = set()
            for start in range(0, len(doomed), _CHUNK):
                part = doomed[start : start + _CHUNK]
                marks = ",".join("?" * len(part))
                where = f"o.digest IN ({marks}) {keep}"
                row = conn.execute(
                    f"SELECT COALESCE(SUM(size), 0) FROM objects o WHERE {where}", (*part, cutoff)
                ).fetchone()
                freed += int(row[0])
                touched.update(
                    r[0]
                    for r in conn.execute(
                        f"SELECT DISTINCT pack FROM objects o WHERE {where} AND pack IS NOT NULL",
                        (*part, cutoff),
                    )
                )
                conn.execute(f"DELETE FROM objects AS o WHERE {where}", (*part, cutoff))
                conn.execute(
                    f"DELETE FROM puts WHERE digest IN ({marks}) AND at < ?", (*part, cutoff)
                )
            conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
            dropped += self._tidy(conn, batch, sorted(touched))
        for name in dropped:  # after the commit: no row names them any more
            self._reader.forget(name)
            pack_path(self.packs, name).unlink(missing_ok=True)
        return freed

    def _orphans(self, conn: sqlite3.Connection) -> list[str]:
        """Pack files no row names: left by a batch that failed or was killed.
        Called under the write lock, which every batch holds while its pack is
        being written, so none of these is in use."""
        try:
            names = [p.name[: -len(".pack")] for p in self.packs.glob("*.pack")]
        except OSError:
            return []
        known = {row[0] for row in conn.execute("SELECT name FROM packs")}
        return [name for name in names if name not in known]

    def _tidy(self, conn: sqlite3.Connection, batch: _Batch, packs: list[int]) -> list[str]:
        """Drop packs no object lives in any more and rewrite those more than half
        garbage (live objects into ``batch``'s pack); the names to delete."""
        dropped: list[str] = []
        for pack in packs:
            name, total = conn.execute(
                "SELECT name, size FROM packs WHERE id = ?", (pack,)
            ).fetchone()
            live = conn.execute(
                "SELECT digest, size, pos FROM objects WHERE pack = ?", (pack,)
            ).fetchall()
            if sum(int(r[1]) for r in live) * 2 >= int(total):
                continue
            for digest, size, pos in live:
                data = self._reader.read(name, int(pos), int(size))
                if digest_of(data) != digest:
                    where = pack_path(self.packs, name)
                    raise BlobDigestError(where, int(pos), f"object {digest} is damaged")
                batch.repack(digest, data)
            conn.execute("DELETE FROM packs WHERE id = ?", (pack,))
            dropped.append(name)
        return dropped

    def recent(self, seconds: float) -> set[str]:
        """Digests put (or put again) within the last ``seconds``."""
        if not self._exists():
            return set()
        with self._lock:
            rows = (
                self._connect()
                .execute("SELECT digest FROM puts WHERE at >= ?", (time.time() - seconds,))
                .fetchall()
            )
        return {row[0] for row in rows}

    def touch(self, digests: Iterable[str]) -> set[str]:
        """Refresh the put time of the stored ones of ``digests`` in one write
        transaction (under the write lock a removal takes too); those not stored."""
        wanted = sorted({check_digest(d) for d in digests})
        if not wanted or not self._exists():
            return set(wanted)
        found: set[str] = set()
        with self.batch(durable=False):  # a lost touch only shortens a grace
            conn = self._connect()
            now = time.time()
            for start in range(0, len(wanted), _CHUNK):
                part = wanted[start : start + _CHUNK]
                marks = ",".join("?" * len(part))
                present = [
                    row[0]
                    for row in conn.execute(
                        f"SELECT digest FROM objects WHERE digest IN ({marks})", part
                    )
                ]
                conn.executemany(_PUT_TIME, [(d, now, now) for d in present])
                found.update(present)
        return set(wanted) - found

    def generation(self) -> int:
        """Bumped by every removal."""
        if not self._exists():
            return 0
        with self._lock:
            row = (
                self._connect()
                .execute("SELECT value FROM meta WHERE key = 'generation'")
                .fetchone()
            )
        return int(row[0]) if row else 0

    def stats(self) -> tuple[int, int]:
        """How many objects, and their total size."""
        if not self._exists():
            return 0, 0
        with self._lock:
            row = (
                self._connect()
                .execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM objects")
                .fetchone()
            )
        return int(row[0]), int(row[1])

    def disk_bytes(self) -> int:
        """What the objects take on disk now: the database, its log and the packs."""
        return objspace.disk_bytes(self.path, self.packs)

    def reclaimable(self, digests: Iterable[str]) -> int:
        """About how many bytes removing ``digests`` and :meth:`compact` would give
        back to the file system (see :mod:`.objspace`)."""
        if not self._exists():
            return 0
        with self._lock:
            return objspace.reclaimable(self._connect(), self.path, digests)

    def compact(self) -> str | None:
        """Give the space removals left inside the database and its log back to the
        file system (see :mod:`.objspace`); what was done, in words."""
        if not self._exists():
            return None
        with self._lock:
            try:
                return objspace.compact(self._connect())
            except sqlite3.Error as exc:
                raise self._io_error("compact the database", exc) from exc

    def close(self) -> None:
        """Close the database connection (idempotent)."""
        with self._lock:
            self._reader.close()
            if self._conn is not None:
                self._conn.close()
                self._conn = None

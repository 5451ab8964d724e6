"""The directory store's objects: one SQLite database, ``<home>/objects/objects.sqlite``.

Model, in prose (the contract is :mod:`infai.store.objects`): a table of
``(digest, size, data)`` rows keyed by digest, a narrow ``puts`` table of when
each digest was last put (POSIX seconds; garbage collection's grace period),
plus a one-row ``generation`` counter that every removal bumps. SQLite rather
than one file per object because a workspace snapshot adds thousands of small
objects at once and must make them durable together: one transaction, one sync
(``synchronous = FULL`` in WAL mode), where loose files would need an fsync each. Unlike the listing
and search indexes under ``<home>/index/``, this database is *truth*, not a
cache: it is never rebuilt, and a damaged one is reported, not replaced.

Several processes share it safely (SQLite's own locking, with a busy timeout);
a writer of a batch holds the write lock only while its transaction commits.
Rows are verified on read: bytes that do not hash to their digest raise
:class:`~infai.store.errors.BlobDigestError` naming the database and digest.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType

from ..codec import PREFIX, digest_of
from ..errors import BlobDigestError, CorruptionError, ObjectNotFound, StoreIOError
from ..objects import check_digest

#: the database's schema version (``PRAGMA user_version``; 2 added ``puts``)
SCHEMA_VERSION = 2
_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    digest TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', 0);
CREATE TABLE IF NOT EXISTS puts (digest TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID;
"""
#: a put refreshes its time: a narrow row, so putting an existing object again
#: never rewrites the object's bytes
_PUT_TIME = "INSERT INTO puts (digest, at) VALUES (?, ?) ON CONFLICT (digest) DO UPDATE SET at = ?"
#: how long a process waits for another's write transaction, in milliseconds
BUSY_MS = 30_000
#: digests per query in :meth:`FileObjects.missing` (SQLite's variable limit is 32766)
_CHUNK = 500


class _Batch:
    """Puts collected in memory-light form: each is inserted at once inside the
    open transaction, so a batch of 200 MB does not sit in a Python list."""

    def __init__(self, owner: FileObjects) -> None:
        self._owner = owner
        self._conn = owner._connect()
        self._seen: set[str] = set()

    def put(self, data: bytes) -> str:
        digest = PREFIX + hashlib.sha256(data).hexdigest()
        if digest not in self._seen:
            self._seen.add(digest)
            self._conn.execute(
                "INSERT OR IGNORE INTO objects (digest, size, data) VALUES (?, ?, ?)",
                (digest, len(data), data),
            )
            now = time.time()
            self._conn.execute(_PUT_TIME, (digest, now, now))
        return digest

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
                    self._conn.execute("COMMIT")
                except sqlite3.Error as error:
                    self._conn.execute("ROLLBACK")
                    raise self._owner._io_error("commit a batch", error) from error
            else:
                self._conn.execute("ROLLBACK")
        finally:
            self._owner._lock.release()


class FileObjects:
    """The store's objects in ``<home>/objects/objects.sqlite`` (created on first write)."""

    def __init__(self, home: Path) -> None:
        self.path = home / "objects" / "objects.sqlite"
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()

    def _io_error(self, what: str, exc: sqlite3.Error) -> StoreIOError:
        return StoreIOError(f"{self.path}: could not {what}: {exc}")

    def _connect(self) -> sqlite3.Connection:
        with self._lock:
            if self._conn is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                    conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = FULL")
                    found = conn.execute("PRAGMA user_version").fetchone()[0]
                    if found > SCHEMA_VERSION:
                        conn.close()
                        raise CorruptionError(
                            self.path, 0, f"schema version {found} is newer than this infai"
                        )
                    if found < SCHEMA_VERSION:
                        conn.executescript(
                            f"BEGIN IMMEDIATE; {_SCHEMA}; "
                            f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
                        )
                except sqlite3.DatabaseError as exc:
                    raise CorruptionError(self.path, 0, f"not a readable database: {exc}") from exc
                self._conn = conn
            return self._conn

    def _exists(self) -> bool:
        return self._conn is not None or self.path.exists()

    def batch(self) -> _Batch:
        """A batch of puts, durable together when the ``with`` block exits."""
        return _Batch(self)

    def put(self, data: bytes) -> str:
        """Add one object durably; its digest."""
        with self.batch() as batch:
            return batch.put(data)

    def get(self, digest: str) -> bytes:
        """The object's bytes, verified against ``digest``."""
        check_digest(digest)
        row = None
        if self._exists():
            with self._lock:
                row = (
                    self._connect()
                    .execute("SELECT data FROM objects WHERE digest = ?", (digest,))
                    .fetchone()
                )
        if row is None:
            raise ObjectNotFound(digest)
        data = bytes(row[0])
        if digest_of(data) != digest:
            raise BlobDigestError(self.path, 0, f"object {digest} does not match its content")
        return data

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
        with self.batch():
            conn = self._connect()
            cutoff = time.time() - grace
            keep = "AND NOT EXISTS (SELECT 1 FROM puts p WHERE p.digest = o.digest AND p.at >= ?)"
            for start in range(0, len(doomed), _CHUNK):
                part = doomed[start : start + _CHUNK]
                marks = ",".join("?" * len(part))
                where = f"o.digest IN ({marks}) {keep}"
                row = conn.execute(
                    f"SELECT COALESCE(SUM(size), 0) FROM objects o WHERE {where}", (*part, cutoff)
                ).fetchone()
                freed += int(row[0])
                conn.execute(f"DELETE FROM objects AS o WHERE {where}", (*part, cutoff))
                conn.execute(
                    f"DELETE FROM puts WHERE digest IN ({marks}) AND at < ?", (*part, cutoff)
                )
            conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
        return freed

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

    def close(self) -> None:
        """Close the database connection (idempotent)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

"""SQLite files the directory store derives from its sessions, and may throw away.

Model, in prose: the listing index and the search index are caches of what
the session directories say, kept in SQLite files under ``<home>/index/``.
They are never the only copy of anything: a missing file is built again, and
one that SQLite finds damaged (or that another infai wrote with a different
schema) is deleted and built again, with a note saying so
(:attr:`DerivedDB.notes`), never read as if it were right. Writes are
transactions in WAL mode without fsync (``synchronous=NORMAL``): a power cut may
lose the last ones, which the next validation notices and redoes, and the file
stays consistent.

Stat signatures tell a derived row whether the file it came from changed. The
kernel stamps files with a coarse clock, so a file changed twice within one
tick may keep its mtime; a signature taken of a file modified less than
:data:`RACY_NS` ago is therefore not trusted (stored as ``""``, which never
matches), and the row is read again next time (git's "racily clean" rule).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

#: a signature of a file modified this recently (ns) is not trusted
RACY_NS = 2_000_000_000
#: SQLite's primary result codes for a damaged file
_DAMAGED = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB


def signature(path: str, now_ns: int) -> str:
    """``ino:mtime:size`` of ``path``; ``"-"`` if missing; ``""`` if modified too recently."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "-"
    if now_ns - st.st_mtime_ns < RACY_NS:
        return ""
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def is_damage(exc: BaseException) -> bool:
    """Whether an SQLite error says the file is damaged (not merely busy)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.DatabaseError) and code is not None and code & 0xFF in _DAMAGED


class DerivedDB:
    """One derived SQLite file: opened lazily, shared by threads under one lock."""

    def __init__(self, path: Path, version: int, schema: str, notes: list[str]) -> None:
        self.path = path
        self.version = version
        self.schema = schema
        #: what was repaired (a damaged or foreign file rebuilt), for shells to show
        self.notes = notes
        self.lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        #: set when the file was (re)created empty by this process: callers rebuild
        self.fresh = False

    def exists(self) -> bool:
        """Whether the file is there (a writer updates only a file someone uses)."""
        return self._conn is not None or self.path.exists()

    def connect(self, busy_ms: int = 5000) -> sqlite3.Connection:
        """The open connection, creating the file (and schema) if needed."""
        if self._conn is not None:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
            return self._conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in (0, 1):
            conn = sqlite3.connect(
                self.path, timeout=busy_ms / 1000, check_same_thread=False, isolation_level=None
            )
            try:
                self.fresh = self._prepare(conn)
                self._conn = conn
                return conn
            except sqlite3.DatabaseError as exc:
                conn.close()
                if attempt or not (is_damage(exc) or isinstance(exc, _Foreign)):
                    raise
                self._remove_files(f"{self.path}: {exc}; rebuilt from the sessions")
        raise AssertionError("unreachable")  # pragma: no cover

    def _prepare(self, conn: sqlite3.Connection) -> bool:
        """Check the file's schema version; create the schema in an empty file."""
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        # fewer, larger checkpoints (each one syncs): builds write many pages at once
        conn.execute("PRAGMA wal_autocheckpoint = 8192")
        found = conn.execute("PRAGMA user_version").fetchone()[0]
        if found == self.version:
            return False
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if found != 0 or tables:
            raise _Foreign(f"schema version {found}, expected {self.version}")
        # Every statement says IF NOT EXISTS: two processes may create the file at once.
        conn.executescript(
            f"BEGIN IMMEDIATE; {self.schema}; PRAGMA user_version = {self.version}; COMMIT;"
        )
        return True

    @staticmethod
    @contextlib.contextmanager
    def transaction(conn: sqlite3.Connection) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any error."""
        if not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if conn.in_transaction:
            conn.execute("COMMIT")

    def discard(self, why: str | None) -> None:
        """Close and delete the file (a damaged one, noted as ``why``); the next use
        builds it again."""
        self.close()
        self._remove_files(why)

    def _remove_files(self, why: str | None) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        if why is not None:
            self.notes.append(why)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class _Foreign(sqlite3.DatabaseError):
    """The file holds another schema (an older or newer infai's): rebuilt."""


def now_ns() -> int:
    """The wall clock in ns (what file mtimes are compared with)."""
    return time.time_ns()

"""The listing index: every session's metadata in one SQLite table, kept honest by stat.

Model, in prose: listing sessions used to read every ``session.json`` and
``HEAD``, which grows with the history (a user who imports months of sessions
has thousands). The listing index keeps, per session, what a listing needs:
the metadata, the time of the last append (from HEAD's UUIDv7), and the stat
signatures (inode, mtime, size) of ``session.json`` and ``HEAD`` it was read
from. The session directories stay the truth; the index is checked against
them in three tiers, cheapest first:

1. every listing stats ``sessions/`` itself: a session made, removed or copied
   in by any process changes that directory, and then its entries are listed
   and compared with the index (new ones read, vanished ones dropped);
2. this store's own writers update a session's row as they change it (create,
   rename, append: HEAD's move at most :data:`HEAD_EVERY` seconds late while a
   writer stays open, at once when it closes; removal);
3. every :data:`FULL_EVERY` seconds a listing also stats each session's
   ``session.json`` and ``HEAD`` and re-reads the ones whose signatures changed:
   so a change *inside* a session directory by a process that does not keep
   the index (an older infai, an edit by hand) is seen within that time.
   :meth:`ListingIndex.rows` with ``full=True`` does it at once.

Each row also keeps what a listing shows people besides the metadata: the
event count (from HEAD's sequence number, read anyway) and the preview of the
first user message, the session's title when it has no name (from the first
entries of ``index.jsonl``, a few KiB). Both are read with the row, never
per listing; a writer of this store updates the count with HEAD's time.

A warm listing therefore costs two system calls and one query whatever the
number of sessions. The file is ``<home>/index/sessions.sqlite``; deleted, it
costs one full read at the next listing; damaged, it is rebuilt with a note.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..info import SessionInfo, SessionSummary
from .derived import DerivedDB, is_damage, now_ns, signature
from .format import INDEX_WIDTH, decode_head, decode_index_entry
from .meta import decode_info, id_time

VERSION = 3  # 2: first_prompt and events; 3: the covering index listing_shown
SCHEMA = """
CREATE TABLE IF NOT EXISTS listing (
    id TEXT PRIMARY KEY,
    meta_sig TEXT NOT NULL,
    head_sig TEXT NOT NULL,
    format INTEGER NOT NULL,
    name TEXT,
    working_dir TEXT,
    model TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    parent_session TEXT,
    parent_event TEXT,
    extra TEXT,
    appended TEXT NOT NULL,
    active TEXT NOT NULL,
    first_prompt TEXT,
    events INTEGER NOT NULL
);
-- Covers what a listing reads, in its order: a listing scans this index alone, not
-- one table row per session (a newly opened store's listing of 5,000 sessions
-- spent half its time in those lookups).
CREATE INDEX IF NOT EXISTS listing_shown ON listing (
    active DESC, id DESC, format, name, working_dir, model, created_at, parent_session,
    parent_event, extra, first_prompt, events
);
CREATE TABLE IF NOT EXISTS checked (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS unreadable (id TEXT PRIMARY KEY)
"""
_COLS = (
    "id, meta_sig, head_sig, format, name, working_dir, model, created_at, updated_at,"
    " parent_session, parent_event, extra, appended, active, first_prompt, events"
)
#: what a listing reads back: the metadata as shown (``active`` is its ``updated_at``)
_SHOWN = (
    "id, format, name, working_dir, model, created_at, active, parent_session, parent_event, extra,"
    " first_prompt, events"
)
_INSERT = f"INSERT OR REPLACE INTO listing ({_COLS}) VALUES ({', '.join('?' * 16)})"

#: seconds between full checks of every session's files (tier 3)
FULL_EVERY = 30.0
#: seconds a writer's HEAD move may wait before it reaches the index (tier 2)
HEAD_EVERY = 1.0

#: a stored row: the columns of :data:`_COLS`, in order
Row = tuple[Any, ...]
#: a listed session: the columns of :data:`_SHOWN`, in order
Shown = tuple[Any, ...]


class ListingIndex:
    """The derived listing of one store's sessions (see the module docstring)."""

    def __init__(self, home: Path, sessions_dir: Path, notes: list[str]) -> None:
        self.sessions_dir = sessions_dir
        self.db = DerivedDB(home / "index" / "sessions.sqlite", VERSION, SCHEMA, notes)
        #: errors of the session.json files the last check could not read
        self.unreadable: list[StoreError] = []
        self._head_noted: dict[str, float] = {}
        self._bad: list[str] = []  # ids of the sessions in unreadable
        self._cache: tuple[int, list[Shown]] | None = None
        self._infos: tuple[list[Shown], list[SessionInfo]] | None = None

    def rows(self, *, full: bool = False) -> list[Shown]:
        """Every readable session as listed (:data:`_SHOWN`), most recently active
        first, checked as the module docstring says (``full``: check every session's
        files now)."""
        with self.db.lock:
            try:
                return self._rows(full)
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                self._cache = None
                self.db.discard(f"{self.db.path}: {exc}; rebuilt from the sessions")
                return self._rows(full)

    def sessions(self) -> list[SessionInfo]:
        """Every readable session's metadata, most recently active first (the objects
        are reused while nothing changed: treat them as read-only)."""
        rows = self.rows()
        if self._infos is None or self._infos[0] is not rows:
            self._infos = (rows, [info_of(r) for r in rows])
        return list(self._infos[1])

    def summaries(self) -> list[SessionSummary]:
        """As :meth:`sessions`, each with its first prompt and event count."""
        rows = self.rows()
        if self._infos is None or self._infos[0] is not rows:
            self._infos = (rows, [info_of(r) for r in rows])
        infos = self._infos[1]
        return [SessionSummary(i, r[10], r[11]) for i, r in zip(infos, rows, strict=True)]

    def _rows(self, full: bool) -> list[Shown]:
        conn = self.db.connect()
        checked = dict(conn.execute("SELECT key, value FROM checked").fetchall())
        now = now_ns()
        dir_sig = signature(str(self.sessions_dir), now)
        due = full or self.db.fresh or now / 1e9 - float(checked.get("full", 0)) >= FULL_EVERY
        if due:
            self._check(conn, full=True, now=now)
        elif not dir_sig or dir_sig != checked.get("dir"):
            self._check(conn, full=False, now=now)
        else:
            self._recheck_unreadable(conn, now)
        if due or dir_sig != checked.get("dir"):
            self._checked(conn, dir_sig, now if due else None)
        self.db.fresh = False
        # Unchanged since the last answer in this process (no commit by any connection,
        # ours included): the same rows.
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if self._cache is not None and self._cache[0] == version:
            return self._cache[1]
        rows = conn.execute(
            f"SELECT {_SHOWN} FROM listing ORDER BY active DESC, id DESC"
        ).fetchall()
        self._cache = (version, rows)
        return rows

    def _check(self, conn: sqlite3.Connection, *, full: bool, now: int) -> None:
        """Compare the index with ``sessions/``: new and vanished sessions always, and
        with ``full`` each session's files' signatures."""
        self.unreadable, self._bad = [], []
        try:
            names = [n for n in os.listdir(self.sessions_dir) if not n.startswith(".")]
        except FileNotFoundError:
            names = []
        known: dict[str, tuple[str, str]] = {
            r[0]: (r[1], r[2])
            for r in conn.execute("SELECT id, meta_sig, head_sig FROM listing").fetchall()
        }
        base = str(self.sessions_dir)
        changed: list[tuple[Row, tuple[str, str] | None]] = []
        for name in names:
            old = known.pop(name, None)
            if old is not None and not full:
                continue
            meta_sig = signature(f"{base}/{name}/session.json", now)
            head_sig = signature(f"{base}/{name}/HEAD", now)
            if old is not None and meta_sig and head_sig and (meta_sig, head_sig) == old:
                continue
            row = self._read(name, meta_sig, head_sig)
            if row is not None:
                changed.append((row, old))
        self._store(conn, changed, list(known))
        self._keep_unreadable(conn)

    def _recheck_unreadable(self, conn: sqlite3.Connection, now: int) -> None:
        """Read again the sessions the last check could not read (a listing names them
        every time, and one that was repaired comes back)."""
        self.unreadable, self._bad = [], []
        names = [r[0] for r in conn.execute("SELECT id FROM unreadable").fetchall()]
        if not names:
            return
        base = str(self.sessions_dir)
        rows: list[tuple[Row, tuple[str, str] | None]] = []
        for name in names:
            meta_sig = signature(f"{base}/{name}/session.json", now)
            row = self._read(name, meta_sig, signature(f"{base}/{name}/HEAD", now))
            if row is not None:
                rows.append((row, None))
        self._store(conn, rows, [])
        self._keep_unreadable(conn)

    def _keep_unreadable(self, conn: sqlite3.Connection) -> None:
        """Remember which sessions could not be read, for the listings that follow."""
        with DerivedDB.transaction(conn):
            conn.execute("DELETE FROM unreadable")
            conn.executemany(
                "INSERT OR IGNORE INTO unreadable VALUES (?)", [(i,) for i in self._bad]
            )

    def _read(self, name: str, meta_sig: str, head_sig: str) -> Row | None:
        """A session's row read from its files (signatures taken before reading)."""
        if meta_sig == "-":
            return None  # not a session (yet, or any more)
        root = self.sessions_dir / name
        try:
            info = decode_info((root / "session.json").read_bytes(), str(root / "session.json"))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except StoreError as exc:
            self.unreadable.append(exc)
            self._bad.append(name)
            return None
        appended, events = _head_facts(root / "HEAD")
        first = _first_prompt(root / "index.jsonl")
        return make_row(info, meta_sig, head_sig, appended, first, events)

    def _store(
        self,
        conn: sqlite3.Connection,
        rows: list[tuple[Row, tuple[str, str] | None]],
        gone: list[str],
    ) -> None:
        """Write re-read rows, each only if its row is still the one compared (a writer
        of this store may have put a newer one there meanwhile), and drop vanished ones."""
        if not rows and not gone:
            return
        self._cache = None
        with DerivedDB.transaction(conn):
            for row, old in rows:
                if old is None:
                    conn.execute(_INSERT.replace("OR REPLACE", "OR IGNORE"), row)
                else:
                    conn.execute(
                        f"UPDATE listing SET ({_COLS}) = ({', '.join('?' * 16)})"
                        " WHERE id = ? AND meta_sig = ? AND head_sig = ?",
                        (*row, row[0], *old),
                    )
            conn.executemany("DELETE FROM listing WHERE id = ?", [(g,) for g in gone])

    @staticmethod
    def _checked(conn: sqlite3.Connection, dir_sig: str, full_at: int | None) -> None:
        """Record what was checked (the listing rows themselves are unchanged)."""
        with DerivedDB.transaction(conn):
            conn.execute("INSERT OR REPLACE INTO checked VALUES ('dir', ?)", (dir_sig,))
            if full_at is not None:
                conn.execute(
                    "INSERT OR REPLACE INTO checked VALUES ('full', ?)", (str(full_at / 1e9),)
                )

    # -- this store's writers keep it current --------------------------------------

    def note(self, session_id: str) -> None:
        """Re-read one session into the index now (after this process changed it)."""
        self._update(session_id, remove=False)

    def forget(self, session_id: str) -> None:
        """Drop a removed session's row."""
        self._update(session_id, remove=True)

    def head_moved(self, session_id: str, head_id: str, events: int) -> None:
        """A writer of this store appended (HEAD is ``head_id``; the session holds
        ``events`` events): record the last append's time and the count, at most every
        :data:`HEAD_EVERY` seconds per session (the writer's close notes the rest)."""
        last = self._head_noted.get(session_id, 0.0)
        if time.monotonic() - last < HEAD_EVERY or not self.db.exists():
            return
        if not self.db.lock.acquire(blocking=False):
            return  # a listing is checking right now: never make an append wait
        try:
            self._head_noted[session_id] = time.monotonic()
            appended = id_time(head_id)
            self._cache = None
            conn = self.db.connect(busy_ms=50)
            with DerivedDB.transaction(conn):
                conn.execute(
                    "UPDATE listing SET appended = ?, head_sig = '', events = ?,"
                    " active = max(updated_at, ?) WHERE id = ?",
                    (appended, events, appended, session_id),
                )
        except sqlite3.Error:
            return
        finally:
            self.db.lock.release()

    def _update(self, session_id: str, *, remove: bool) -> None:
        """Best effort and only if the index is in use: a failure leaves the row to the
        next full check."""
        if not self.db.exists():
            return
        self._head_noted.pop(session_id, None)
        with self.db.lock:
            self._cache = None
            try:
                conn = self.db.connect(busy_ms=100)
                if remove:
                    with DerivedDB.transaction(conn):
                        conn.execute("DELETE FROM listing WHERE id = ?", (session_id,))
                    return
                now = now_ns()
                root = str(self.sessions_dir / session_id)
                row = self._read(
                    session_id,
                    signature(f"{root}/session.json", now),
                    signature(f"{root}/HEAD", now),
                )
                if row is not None:
                    with DerivedDB.transaction(conn):
                        conn.execute(_INSERT, row)
            except (sqlite3.Error, OSError, StoreError):
                return

    def close(self) -> None:
        """Close the SQLite connection."""
        with self.db.lock:
            self._cache = None
            self.db.close()


def make_row(
    info: SessionInfo,
    meta_sig: str,
    head_sig: str,
    appended: str,
    first_prompt: str | None = None,
    events: int = 0,
) -> Row:
    """The listing row of ``info`` read under these signatures."""
    return (
        info.id,
        meta_sig,
        head_sig,
        info.format,
        info.name,
        info.working_dir,
        info.model,
        info.created_at,
        info.updated_at,
        info.parent_session,
        info.parent_event,
        json.dumps(info.extra, ensure_ascii=False) if info.extra else None,
        appended,
        max(info.updated_at, appended),
        first_prompt,
        events,
    )


#: index entries looked at for a session's first user message (it is nearly always
#: the first or second; a session opening with more is shown by its name or id)
FIRST_ENTRIES = 16


def _head_facts(head_file: Path) -> tuple[str, int]:
    """When HEAD's event was made (from its UUIDv7 id, "" if unknown) and how many
    events the session holds (HEAD is the last one appended): hints, as HEAD is."""
    try:
        head = decode_head(head_file.read_bytes())
    except OSError:
        return "", 0
    return ("", 0) if head is None else (id_time(head.id), head.seq + 1)


def _first_prompt(index_file: Path) -> str | None:
    """The preview of the first ``user`` message among the first index entries."""
    try:
        with open(index_file, "rb") as f:
            data = f.read(FIRST_ENTRIES * INDEX_WIDTH)
    except OSError:
        return None
    for at in range(0, len(data) - INDEX_WIDTH + 1, INDEX_WIDTH):
        entry = decode_index_entry(data[at : at + INDEX_WIDTH])
        if entry is None:
            return None  # torn or damaged: no title rather than a wrong one
        if entry.kind == "message" and entry.role == "user":
            return entry.preview
    return None


def info_of(row: Shown) -> SessionInfo:
    """The metadata a listing shows: ``updated_at`` is the later of session.json's
    stamp and the last append's time.

    Built without the keyword call of ``SessionInfo(...)``: a listing makes one per
    session, thousands from a newly opened store, where the keyword parsing was a
    third of the cost. The row was checked when it was read from ``session.json``.
    """
    info: SessionInfo = object.__new__(SessionInfo)
    (
        info.id,
        info.format,
        info.name,
        info.working_dir,
        info.model,
        info.created_at,
        info.updated_at,
        info.parent_session,
        info.parent_event,
    ) = row[:9]
    info.extra = json.loads(row[9]) if row[9] else {}
    return info

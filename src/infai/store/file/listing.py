"""The listing index: every session's metadata in one SQLite table, checked by stat.

Model, in prose: listing sessions used to read every ``session.json`` and
``HEAD``, which grows with the history (a user who imports months of sessions
has thousands). The listing index keeps, per session, what a listing needs:
the metadata, the time of the last append (from HEAD's UUIDv7), and the stat
signatures (inode, mtime, size) of ``session.json`` and ``HEAD`` it was read
from. A listing lists ``sessions/``, stats those two files per session and
re-reads only the sessions whose signatures changed (or are too recent to
trust: see :mod:`.derived`); rows of sessions that are gone are dropped. So a
change made by a process that never touched the index (an older infai, a
session directory copied in by hand) is seen at the next listing, and the
session directories stay the truth. This store's own writers update rows as
they create, rename, append to and remove sessions.

The file is ``<home>/index/sessions.sqlite``; deleting it costs one full read
at the next listing.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..info import SessionInfo
from .derived import DerivedDB, is_damage, now_ns, signature
from .meta import decode_info, last_append

VERSION = 1
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
    appended TEXT NOT NULL
)
"""
_COLS = (
    "id, meta_sig, head_sig, format, name, working_dir, model, created_at, updated_at,"
    " parent_session, parent_event, extra, appended"
)

#: (id, meta_sig, head_sig, format, name, working_dir, model, created_at, updated_at,
#:  parent_session, parent_event, extra, appended)
Row = tuple[Any, ...]


class ListingIndex:
    """The derived listing of one store's sessions (see the module docstring)."""

    def __init__(self, home: Path, sessions_dir: Path, notes: list[str]) -> None:
        self.sessions_dir = sessions_dir
        self.db = DerivedDB(home / "index" / "sessions.sqlite", VERSION, SCHEMA, notes)
        #: errors of the session.json files the last refresh could not read
        self.unreadable: list[StoreError] = []

    def rows(self) -> list[Row]:
        """Every readable session's row, validated against the session directories."""
        with self.db.lock:
            try:
                return self._refresh()
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                self.db.discard(f"{self.db.path}: {exc}; rebuilt from the sessions")
                return self._refresh()

    def sessions(self) -> list[SessionInfo]:
        """Every readable session's metadata, most recently active first."""
        rows = self.rows()
        rows.sort(key=lambda r: (max(r[8], r[12]), r[0]), reverse=True)
        return [info_of(r) for r in rows]

    def _refresh(self) -> list[Row]:
        conn = self.db.connect()
        self.unreadable = []
        try:
            names = os.listdir(self.sessions_dir)
        except FileNotFoundError:
            names = []
        known: dict[str, Row] = {
            r[0]: r for r in conn.execute(f"SELECT {_COLS} FROM listing").fetchall()
        }
        base = str(self.sessions_dir)
        now = now_ns()
        out: list[Row] = []
        changed: list[Row] = []
        for name in names:
            if name.startswith("."):
                continue
            meta = f"{base}/{name}/session.json"
            head = f"{base}/{name}/HEAD"
            meta_sig, head_sig = signature(meta, now), signature(head, now)
            row = known.pop(name, None)
            if row is not None and meta_sig and head_sig and (meta_sig, head_sig) == row[1:3]:
                out.append(row)
                continue
            if meta_sig == "-":
                continue  # not a session (yet, or any more)
            try:
                info = decode_info(Path(meta).read_bytes(), meta)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except StoreError as exc:
                self.unreadable.append(exc)
                continue
            fresh = make_row(info, meta_sig, head_sig, last_append(Path(head)))
            out.append(fresh)
            if fresh != row:
                changed.append(fresh)
        gone = list(known)
        if changed or gone:
            self._write(conn, changed, gone)
        return out

    def _write(self, conn: sqlite3.Connection, rows: list[Row], gone: list[str]) -> None:
        """Store re-read rows and drop vanished ones; skipped if another process holds
        the file (the next listing re-reads them)."""
        try:
            with DerivedDB.transaction(conn):
                conn.executemany(
                    f"INSERT OR REPLACE INTO listing ({_COLS}) VALUES ({', '.join('?' * 13)})",
                    rows,
                )
                conn.executemany("DELETE FROM listing WHERE id = ?", [(g,) for g in gone])
        except sqlite3.OperationalError:
            pass  # busy: this listing's answer is right; only the cache lags

    # -- writers keep it current --------------------------------------------------

    def note(self, session_id: str) -> None:
        """Re-read one session into the index now (after this process changed it)."""
        self._update(session_id, remove=False)

    def forget(self, session_id: str) -> None:
        """Drop a removed session's row."""
        self._update(session_id, remove=True)

    def _update(self, session_id: str, *, remove: bool) -> None:
        """Best effort and only if the index is in use: a failure leaves the row to the
        next listing's validation."""
        if not self.db.exists():
            return
        with self.db.lock:
            try:
                conn = self.db.connect(busy_ms=100)
                if remove:
                    with DerivedDB.transaction(conn):
                        conn.execute("DELETE FROM listing WHERE id = ?", (session_id,))
                    return
                now = now_ns()
                root = self.sessions_dir / session_id
                meta_sig = signature(str(root / "session.json"), now)
                head_sig = signature(str(root / "HEAD"), now)
                info = decode_info((root / "session.json").read_bytes(), str(root))
                row = make_row(info, meta_sig, head_sig, last_append(root / "HEAD"))
                self._write(conn, [row], [])
            except (sqlite3.Error, OSError, StoreError):
                return

    def close(self) -> None:
        """Close the SQLite connection."""
        with self.db.lock:
            self.db.close()


def make_row(info: SessionInfo, meta_sig: str, head_sig: str, appended: str) -> Row:
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
    )


def info_of(row: Row) -> SessionInfo:
    """The metadata a listing shows: ``updated_at`` is the later of session.json's
    stamp and the last append's time."""
    return SessionInfo(
        id=row[0],
        format=row[3],
        name=row[4],
        working_dir=row[5],
        model=row[6],
        created_at=row[7],
        updated_at=max(row[8], row[12]),
        parent_session=row[9],
        parent_event=row[10],
        extra=json.loads(row[11]) if row[11] else None,
    )

"""The two baseline stores infai is benchmarked against (see ``store_bench.py``).

* naive jsonl - one file per session, one full event JSON per line (first line: session
  metadata); resume parses every line and walks parents from the last line back.
* sqlite tree - stdlib sqlite3 (WAL, synchronous=FULL), an ``events`` table plus a ``head``
  row; resume is a recursive CTE from HEAD; listing reads a ``sessions`` catalog table.

For each: a fixture builder from the shared workload (``workload.py``), the resume function
timed in the child process, an append session for the durable-append workload, and the
listing function. :func:`naive_resume` and :func:`sqlite_resume` are copied verbatim into the
resume child (see ``store_bench.child_program``) next to ``EVENT_KEYS``, ``SQLITE_PATH`` and
``JSONL_DUMPS``, so they may use only those names, ``json`` and a function-local
``import sqlite3`` (which keeps sqlite3 out of the naive child's RSS).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.workload import BASE_EPOCH, Tree, iter_events

if TYPE_CHECKING:
    import sqlite3

JSONL_DUMPS = json.JSONEncoder(separators=(",", ":")).encode
EVENT_KEYS = ("id", "parent_id", "kind", "role", "timestamp", "record")


# ----------------------------------------------------------------------------- records


def event_id(i: int) -> str:
    """UUIDv7-shaped, deterministic, time-ordered id for the baselines."""
    ms = BASE_EPOCH * 1000 + i
    rand = (i * 0x9E3779B97F4A7C15) & ((1 << 62) - 1)
    return str(uuid.UUID(int=(ms << 80) | (0x7 << 76) | (0b10 << 62) | rand))


def stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def meta_line(sid: str, name: str, when: float) -> bytes:
    record = {"name": name, "working_dir": "/tmp", "model": "offline"}
    record |= {"created_at": stamp(when), "updated_at": stamp(when)}
    ev = {"id": sid, "parent_id": None, "kind": "meta", "role": "", "timestamp": stamp(when)}
    return JSONL_DUMPS(ev | {"record": record}).encode() + b"\n"


# ----------------------------------------------------------------------------- naive jsonl


def baseline_rows(tree: Tree, seed: int) -> Iterator[tuple[str, str | None, str, str, str, Any]]:
    """(id, parent_id, kind, role, timestamp, record) of every event, for both baselines."""
    for i, parent, kind, role, rec in iter_events(tree, seed):
        pid = event_id(parent) if parent >= 0 else None
        yield event_id(i), pid, kind, role, stamp(BASE_EPOCH + i), rec


def build_naive(path: Path, tree: Tree, seed: int) -> None:
    with open(path, "wb") as f:
        f.write(meta_line(event_id(-1), "bench", BASE_EPOCH))
        for row in baseline_rows(tree, seed):
            f.write(JSONL_DUMPS(dict(zip(EVENT_KEYS, row, strict=True))).encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())


def naive_resume(path: Path) -> list[dict[str, Any]]:
    by_id: dict[str, dict[str, Any]] = {}
    last: dict[str, Any] | None = None
    with open(path, "rb") as f:
        for line in f:
            ev = json.loads(line)
            if ev["kind"] != "meta":
                by_id[ev["id"]] = last = ev
    path_: list[dict[str, Any]] = []
    while last is not None:
        path_.append(last)
        if last["kind"] == "compaction" or last["parent_id"] is None:
            break
        last = by_id.get(last["parent_id"])
    return path_[::-1]


class NaiveSession:
    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self.fd, meta_line(str(uuid.uuid4()), "append", time.time()))
        self.head: str | None = None

    def _line(self, content: str, role: str) -> bytes:
        eid, now = str(uuid.uuid4()), stamp(time.time())
        row = (eid, self.head, "message", role, now, {"content": content})
        self.head = eid
        return JSONL_DUMPS(dict(zip(EVENT_KEYS, row, strict=True))).encode() + b"\n"

    def append_batch(self, items: list[tuple[str, str]]) -> None:
        """One write + one fsync for all lines; a single append is a batch of one."""
        os.write(self.fd, b"".join(self._line(c, r) for c, r in items))
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


def naive_list(root: Path) -> list[dict[str, Any]]:
    out = []
    for entry in os.scandir(root):
        with open(entry.path, "rb") as f:
            meta = json.loads(f.readline())
        out.append({"id": meta["id"], **meta["record"]})
    out.sort(key=lambda s: s["updated_at"], reverse=True)
    return out


# ----------------------------------------------------------------------------- sqlite tree

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL,
  parent_id TEXT, kind TEXT NOT NULL, role TEXT NOT NULL, timestamp TEXT NOT NULL,
  record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS head(k INTEGER PRIMARY KEY CHECK (k = 0), event_id TEXT);
INSERT OR IGNORE INTO head VALUES (0, NULL);
"""
SQLITE_INSERT = (
    "INSERT INTO events(id, parent_id, kind, role, timestamp, record) VALUES (?,?,?,?,?,?)"
)
SQLITE_PATH = """
WITH RECURSIVE path(seq, parent_id, kind) AS (
  SELECT e.seq, e.parent_id, e.kind FROM events e JOIN head h ON e.id = h.event_id
  UNION ALL
  SELECT e.seq, e.parent_id, e.kind FROM path p JOIN events e ON e.id = p.parent_id
  WHERE p.kind != 'compaction'
)
SELECT e.id, e.parent_id, e.kind, e.role, e.timestamp, e.record
FROM path p JOIN events e ON e.seq = p.seq ORDER BY e.seq
"""


def sqlite_connect(path: Path) -> sqlite3.Connection:
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(SQLITE_SCHEMA)
    return conn


def build_sqlite(path: Path, tree: Tree, seed: int) -> None:
    conn = sqlite_connect(path)
    conn.execute("BEGIN")
    rows = ((*row[:5], JSONL_DUMPS(row[5])) for row in baseline_rows(tree, seed))
    conn.executemany(SQLITE_INSERT, rows)
    conn.execute("UPDATE head SET event_id = ?", (event_id(len(tree.parents) - 1),))
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def sqlite_resume(path: Path) -> list[dict[str, Any]]:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(SQLITE_PATH).fetchall()
    finally:
        conn.close()
    return [dict(zip(EVENT_KEYS, (*row[:5], json.loads(row[5])), strict=True)) for row in rows]


class SqliteSession:
    def __init__(self, path: Path) -> None:
        self.conn = sqlite_connect(path)
        self.head: str | None = None

    def append_batch(self, items: list[tuple[str, str]]) -> None:
        """One transaction (inserts + HEAD update); a single append is a batch of one."""
        rows = []
        for content, role in items:
            eid = str(uuid.uuid4())
            rec = JSONL_DUMPS({"content": content})
            rows.append((eid, self.head, "message", role, stamp(time.time()), rec))
            self.head = eid
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(SQLITE_INSERT, rows)
        self.conn.execute("UPDATE head SET event_id = ?", (self.head,))
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def sqlite_list(path: Path) -> list[tuple[Any, ...]]:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        sql = "SELECT id, name, working_dir, model, created_at, updated_at FROM sessions"
        return conn.execute(sql + " ORDER BY updated_at DESC").fetchall()
    finally:
        conn.close()

"""Giving the space of removed objects back to the file system (``infai store gc``).

Model, in prose: SQLite keeps the pages of deleted rows inside its file (on
its free list, or as holes in half-empty pages), and in WAL mode the log file
keeps the size of the largest transaction it ever held. So a removal alone
frees nothing on disk. After gc removes objects, :func:`compact` therefore:

1. converts a database still at ``auto_vacuum = NONE`` (every database an
   older infai made) to ``INCREMENTAL`` with one ``VACUUM``, once (new
   databases are created incremental: see :mod:`.objects`);
2. runs ``PRAGMA incremental_vacuum``, which moves pages from the file's end
   into free ones and cuts the file, returning every whole free page;
3. runs a full ``VACUUM`` when what is left unused inside pages (the file less
   an estimate of the live rows) is over :data:`VACUUM_SHARE` of the file:
   rewriting the whole database costs time in proportion to it, so only when it
   pays (a database written fresh measures 0.2 to 0.3 by this estimate: B-tree
   pages are never full, so that much is never worth a rewrite);
4. checkpoints the log with ``TRUNCATE``, which copies it into the database
   (the cut takes effect there) and cuts the log file to nothing.

``VACUUM`` takes SQLite's write lock for its whole run, the lock every batch
and removal holds while it commits, so no put lands in the middle; it is
atomic (a process killed in the middle leaves the old database), needs free
disk space for a copy of the database while it runs, and a batch in another
process waits for it (up to the busy timeout). This process's own users wait
on the objects' lock, held throughout. Packs are not touched here: removal
already deleted those no object lives in and rewrote those more than half
garbage (:meth:`.objects.FileObjects.remove`); garbage in the others stays
until they cross that line.

:func:`reclaimable` is the dry run's estimate of what a removal and this would
give back, computed without changing anything.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

#: an estimate of the bytes one object's rows take beside its data (digest in the
#: table and its index, size, pack, the puts row)
ROW_BYTES = 200
#: a full VACUUM runs when more than this share of the file looks unused
VACUUM_SHARE = 0.4
#: digests per query (SQLite's variable limit is 32766)
_CHUNK = 500


def disk_bytes(path: Path, packs: Path) -> int:
    """What the objects take on disk: the database, its log and every pack file."""
    total = 0
    for name in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(FileNotFoundError):
            total += os.stat(name).st_size
    try:
        with os.scandir(packs) as found:
            total += sum(e.stat().st_size for e in found if e.name.endswith(".pack"))
    except FileNotFoundError:
        pass
    return total


def _used(conn: sqlite3.Connection) -> int:
    """An estimate of the bytes the live rows need (inline data and row overhead)."""
    inline, rows = conn.execute(
        "SELECT COALESCE(SUM(CASE WHEN data IS NOT NULL THEN size END), 0), COUNT(*) FROM objects"
    ).fetchone()
    return int(inline) + int(rows) * ROW_BYTES


def _pages(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(page_count, page_size)`` of the database as its last commit left it."""
    count = conn.execute("PRAGMA page_count").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int(count), int(size)


def compact(conn: sqlite3.Connection) -> str:
    """Return the space removed rows left to the file system (steps in the module
    docstring), on a connection in autocommit mode with no transaction open; what
    was done, in words."""
    done = []
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")  # the one-time conversion (module docstring)
        done.append("converted the database to incremental vacuum (one VACUUM)")
    else:
        conn.executescript("PRAGMA incremental_vacuum;")  # run to the end, not one step
        count, size = _pages(conn)
        slack = count * size - _used(conn)
        if slack > VACUUM_SHARE * count * size and slack > 16 * size:
            conn.execute("VACUUM")
            done.append("rewrote the database (VACUUM)")
        else:
            done.append("returned its free pages (incremental vacuum)")
    busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    done.append("a reader held the log: it is cut at the next gc" if busy else "truncated its log")
    return "objects database: " + "; ".join(done)


def reclaimable(conn: sqlite3.Connection, path: Path, digests: Iterable[str]) -> int:
    """About how many bytes removing ``digests`` and :func:`compact` would give back:
    their inline data and rows, the packs removal would drop or rewrite (less what
    stays live in them), the free pages already in the file, and the log."""
    doomed = sorted(set(digests))
    inline = rows = 0
    per_pack: dict[int, int] = {}
    for start in range(0, len(doomed), _CHUNK):
        part = doomed[start : start + _CHUNK]
        marks = ",".join("?" * len(part))
        for size, pack in conn.execute(
            f"SELECT size, pack FROM objects WHERE digest IN ({marks})", part
        ):
            rows += 1
            if pack is None:
                inline += int(size)
            else:
                per_pack[int(pack)] = per_pack.get(int(pack), 0) + int(size)
    packs = 0
    for pack, gone in per_pack.items():
        total, live = conn.execute(
            "SELECT p.size, COALESCE(SUM(o.size), 0) FROM packs p"
            " LEFT JOIN objects o ON o.pack = p.id WHERE p.id = ?",
            (pack,),
        ).fetchone()
        left = int(live) - gone
        if left * 2 < int(total):  # dropped, or rewritten with only what is left
            packs += int(total) - left
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    _count, size = _pages(conn)
    try:
        log = os.stat(path.with_name(path.name + "-wal")).st_size
    except FileNotFoundError:
        log = 0
    return inline + rows * ROW_BYTES + packs + int(free) * size + log

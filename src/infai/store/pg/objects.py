"""PostgreSQL's objects: the store-wide content-addressed objects in three tables.

Model, in prose (the contract is :mod:`infai.store.objects`; the tables are
migration 3 in :mod:`.schema`): ``infai_objects`` holds one row per object
(digest, size, data), ``infai_object_puts`` when each digest was last put (by
the server's clock, so nodes with skewed clocks agree), and
``infai_objects_generation`` one counter that every removal bumps. A batch is
one transaction on one pooled connection: its objects commit together or not
at all, and other nodes see them when it commits.

Removal (garbage collection only) first takes ``SHARE ROW EXCLUSIVE`` on
``infai_objects``. Every batch's ``INSERT`` holds ``ROW EXCLUSIVE`` until it
commits, even when the object was there already and nothing was inserted, so
the lock waits for every batch in flight and holds new ones back; the grace
check that follows therefore sees every put that will ever name an object it
removes (the same reasoning as blob removal in :mod:`.backend`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from types import TracebackType
from typing import Any

from ..codec import PREFIX, digest_of
from ..errors import BlobDigestError, ObjectNotFound
from ..objects import check_digest
from .db import Database

_INSERT = (
    "INSERT INTO infai_objects (digest, size, data) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
)
#: what "put within the last %s seconds" means, by the server's clock
_WITHIN = "clock_timestamp() - make_interval(secs => %s)"
_PUT_TIME = (
    "INSERT INTO infai_object_puts (digest, at) VALUES (%s, clock_timestamp())"
    " ON CONFLICT (digest) DO UPDATE SET at = clock_timestamp()"
)


class _Batch:
    """One transaction on a pooled connection, open for the ``with`` block."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._stack = ExitStack()
        self._conn: Any = None
        self._seen: set[str] = set()

    def __enter__(self) -> _Batch:
        with ExitStack() as stack:
            self._conn = stack.enter_context(self._db.conn())
            stack.enter_context(self._conn.transaction())
            self._stack = stack.pop_all()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # the transaction commits on a clean exit and rolls back on an exception
        self._stack.__exit__(kind, exc, tb)

    def put(self, data: bytes) -> str:
        digest = PREFIX + hashlib.sha256(data).hexdigest()
        if digest not in self._seen:
            self._seen.add(digest)
            self._conn.execute(_INSERT, (digest, len(data), data))
            self._conn.execute(_PUT_TIME, (digest,))
        return digest


class PgObjects:
    """The store's objects in its PostgreSQL database (``PgStore.objects``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def batch(self, *, durable: bool = True) -> _Batch:
        """A batch of puts: one transaction, committed when the ``with`` block exits.
        PostgreSQL's commit is durable when it returns, ``durable`` or not."""
        return _Batch(self._db)

    def sync(self) -> None:
        """Nothing to do: every batch's commit was durable already."""

    def put(self, data: bytes) -> str:
        """Add one object durably; its digest."""
        with self.batch() as batch:
            return batch.put(data)

    def get(self, digest: str) -> bytes:
        """The object's bytes, verified against ``digest``."""
        check_digest(digest)
        with self._db.conn() as conn:
            row = conn.execute(
                "SELECT data FROM infai_objects WHERE digest = %s", (digest,)
            ).fetchone()
        if row is None:
            raise ObjectNotFound(digest)
        data = bytes(row[0])
        if digest_of(data) != digest:
            where = f"{self._db.safe_url()} infai_objects"
            raise BlobDigestError(where, 0, f"object {digest} does not match its content")
        return data

    def has(self, digest: str) -> bool:
        """Whether the object is stored."""
        return not self.missing([digest])

    def missing(self, digests: Iterable[str]) -> set[str]:
        """Those of ``digests`` that are not stored (one query)."""
        wanted = {check_digest(d) for d in digests}
        if not wanted:
            return wanted
        with self._db.conn() as conn:
            rows = conn.execute(
                "SELECT digest FROM infai_objects WHERE digest = ANY(%s)", (sorted(wanted),)
            ).fetchall()
        return wanted - {row[0] for row in rows}

    def size(self, digest: str) -> int:
        """The object's length in bytes."""
        check_digest(digest)
        with self._db.conn() as conn:
            row = conn.execute(
                "SELECT size FROM infai_objects WHERE digest = %s", (digest,)
            ).fetchone()
        if row is None:
            raise ObjectNotFound(digest)
        return int(row[0])

    def digests(self) -> Iterator[str]:
        """Every digest (read in one go: gc then works on a stable list)."""
        with self._db.conn() as conn:
            rows = conn.execute("SELECT digest FROM infai_objects").fetchall()
        return iter([row[0] for row in rows])

    def remove(self, digests: Iterable[str], *, grace: float = 0.0) -> int:
        """Remove these objects in one transaction, except those put within the last
        ``grace`` seconds (checked after every batch in flight has committed: see the
        module docstring); the bytes freed."""
        doomed = sorted({check_digest(d) for d in digests})
        with self._db.conn() as conn, conn.transaction():
            conn.execute("LOCK TABLE infai_objects IN SHARE ROW EXCLUSIVE MODE")
            row = conn.execute(
                "WITH gone AS (DELETE FROM infai_objects o WHERE o.digest = ANY(%s)"
                " AND NOT EXISTS (SELECT 1 FROM infai_object_puts p WHERE p.digest = o.digest"
                f" AND p.at >= {_WITHIN}) RETURNING o.digest, o.size),"
                " forgot AS (DELETE FROM infai_object_puts p USING gone"
                " WHERE p.digest = gone.digest)"
                " SELECT coalesce(sum(size), 0) FROM gone",
                (doomed, float(grace)),
            ).fetchone()
            conn.execute("UPDATE infai_objects_generation SET value = value + 1")
        return int(row[0])

    def disk_bytes(self) -> int:
        """The objects tables' size on disk, indexes and TOAST included."""
        with self._db.conn() as conn:
            row = conn.execute(
                "SELECT pg_total_relation_size('infai_objects')"
                " + pg_total_relation_size('infai_object_puts')"
            ).fetchone()
        return int(row[0])

    def reclaimable(self, digests: Iterable[str]) -> int:
        """Nothing: PostgreSQL keeps a table's files at their size after a DELETE
        and a plain VACUUM (see :meth:`compact`)."""
        return 0

    def compact(self) -> str:
        """A plain ``VACUUM`` of the objects tables (pooled connections are in
        autocommit mode, as ``VACUUM`` needs). It takes no lock that stops reads or
        writes, and makes the space of the removed rows reusable by new objects;
        the files shrink only by empty pages at their end. Autovacuum would do the
        same soon after; ``VACUUM FULL`` would give the space back but locks the
        table while it rewrites it, so it is left to the database's owner."""
        with self._db.conn() as conn:
            conn.execute("VACUUM (ANALYZE) infai_objects, infai_object_puts")
        return (
            "PostgreSQL: VACUUM ran on infai_objects (autovacuum would soon): the removed"
            " objects' space is reusable for new ones, but the table's files keep their"
            " size; only VACUUM FULL infai_objects (it locks the table while it runs)"
            " gives it back to the file system"
        )

    def recent(self, seconds: float) -> set[str]:
        """Digests put (or put again) within the last ``seconds``, by the server's clock."""
        with self._db.conn() as conn:
            rows = conn.execute(
                f"SELECT digest FROM infai_object_puts WHERE at >= {_WITHIN}",
                (float(seconds),),
            ).fetchall()
        return {row[0] for row in rows}

    def touch(self, digests: Iterable[str]) -> set[str]:
        """Refresh the put time of the stored ones of ``digests`` in one
        transaction; those not stored. It takes ``ROW EXCLUSIVE`` on
        ``infai_objects`` as a batch's insert does, so a removal waits for it
        (and it for a removal) exactly as for a batch."""
        wanted = sorted({check_digest(d) for d in digests})
        if not wanted:
            return set()
        with self._db.conn() as conn, conn.transaction():
            conn.execute("LOCK TABLE infai_objects IN ROW EXCLUSIVE MODE")
            rows = conn.execute(
                "INSERT INTO infai_object_puts (digest, at)"
                " SELECT o.digest, clock_timestamp() FROM infai_objects o"
                " WHERE o.digest = ANY(%s)"
                " ON CONFLICT (digest) DO UPDATE SET at = clock_timestamp() RETURNING digest",
                (wanted,),
            ).fetchall()
        return set(wanted) - {row[0] for row in rows}

    def generation(self) -> int:
        """Bumped by every removal."""
        with self._db.conn() as conn:
            row = conn.execute("SELECT value FROM infai_objects_generation").fetchone()
        return int(row[0]) if row else 0

    def stats(self) -> tuple[int, int]:
        """How many objects, and their total size."""
        with self._db.conn() as conn:
            row = conn.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM infai_objects"
            ).fetchone()
        return int(row[0]), int(row[1])

"""The PostgreSQL backend: sessions shared by several machines, same guarantees.

Storage model, in prose (the tables are in :mod:`infai.store.pg.schema`): a
session is a row with its metadata and HEAD; its events are rows with the same
fields, ids and records as the file store's chunk lines; large records live
once in a content-addressed blob table. Opening a session for writing takes no
lock: several writers (one per ``infai serve`` node, say) may share it. Every
append is one transaction that locks the session row, checks that HEAD is
still the event this writer last saw (compare-and-set), inserts the events and
moves HEAD. A writer that lost the race gets :class:`HeadConflict` and has
reloaded HEAD, so it can decide again; HEAD never forks silently.

Event ids are made before the transaction, so an append whose connection drops
mid-commit is retried with the same ids and, if the first attempt did commit,
finds its events there instead of writing them twice. Each committed append
notifies the ``infai_events`` channel (``LISTEN``), which lets other nodes fan
new events out to their watchers.

Since writers share a session, one more thing keeps two processes from running
turns in it at once: a turn (or compaction) first takes the session's *lease*,
an advisory lock held by a connection of its own (:meth:`PgStore.lease`); a
second process gets :class:`SessionBusy` at once, and a process that dies
releases the lease with its connection. With ``lock_timeout`` set in the
store's options, taking a lease waits up to that long for a busy one instead.
Removing a session takes the lease too, and notifies the channel so that other
nodes close it.

Writers take no lock, so "is this session open somewhere" has no lock file to
look at: an agent session holds an *open mark* instead (:meth:`PgStore.open_mark`,
a shared advisory lock on a connection of its own, gone with the process), and
:meth:`PgStore.marked_open` answers which sessions hold one (a restore asks it
about the other sessions of its working directory). A mark naming the directory
the session works in holds a second lock on the session and that directory, which
:meth:`PgStore.marked_open_in` asks about (an imported session names none: it
works where it is opened).

Reads follow the same rule as the file store: the active context walks parents
from the tip to the nearest compaction in one recursive query, reading only
that path; listing sessions reads the session rows only; blobs are read when a
record is resolved, and their SHA-256 is checked then.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from ..codec import check_uuid, now_rfc3339
from ..contract import REMOVED
from ..errors import (
    BackendUnavailable,
    CorruptionError,
    InvalidInput,
    SessionBusy,
    SessionExists,
    SessionNotFound,
    StoreError,
    UnsupportedFormat,
)
from ..home import default_home
from ..info import (
    FORMAT_VERSION,
    SessionInfo,
    SessionSummary,
    check_changes,
    check_info,
    new_session_info,
)
from ..objcheck import check_objects
from ..options import StoreOptions
from ..report import FsckReport, Problem
from .db import Database
from .live import PgLive, keep_alive
from .objects import PgObjects
from .schema import check_current, migrate
from .session import CHANNEL, PgSessionReader, PgSessionWriter

if TYPE_CHECKING:
    from ..info import Changed
    from ..search import DamagedSession, Progress, SearchResults

#: turn leases are advisory locks on a 64-bit hash of this prefix and the session id
LEASE_PREFIX = "infai-turn:"
#: seconds between tries while waiting for a busy lease
LEASE_POLL = 0.1
#: an open agent session holds a shared advisory lock on this prefix and its id
#: (:meth:`PgStore.open_mark`): the database's answer to "is a writer open there"
OPEN_PREFIX = "infai-open:"
#: ... and one on this prefix, its id and its directory's digest when it names the
#: directory it works in (:meth:`PgStore.marked_open_in`)
OPEN_DIR_PREFIX = "infai-open-in:"


class Lease:
    """A session's turn lease, held by a connection of its own until released (or
    until the process dies and the server drops the connection)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn: psycopg.Connection[Any] | None = conn

    def release(self) -> None:
        """Close the lease's connection, which frees the advisory lock (idempotent)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            # unlocked before closing: a closed connection's backend drops its locks
            # only once it has exited, which on a loaded machine may come after the
            # next process's try (seen once as a spurious SessionBusy)
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_advisory_unlock_all()")
            conn.close()  # ends the session, and with it the advisory lock


class OpenMark:
    """One open mark (:meth:`PgStore.open_mark`), until released (idempotent): its
    advisory lock keys, the session's and, with a directory, the directory's."""

    def __init__(self, marks: _Marks, keys: tuple[str, ...]) -> None:
        self._marks: _Marks | None = marks
        self.keys = keys

    def release(self) -> None:
        """Drop this mark (others on the same session stay)."""
        marks, self._marks = self._marks, None
        if marks is not None:
            marks.drop(self.keys)


class _Marks:
    """The one connection a store holds its open marks on (made when the first is
    taken). Shared advisory locks stack, so each mark is one lock and one unlock.
    A dropped connection drops every mark with it: the next is taken on a new one
    (the question they answer is a warning, never a lock that keeps data safe)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.lock = threading.Lock()
        self.conn: psycopg.Connection[Any] | None = None

    def take(self, keys: tuple[str, ...]) -> OpenMark:
        with self.lock:
            if self.conn is None or self.conn.closed:
                self.conn = self.db.connect()
            try:
                for key in keys:
                    self.conn.execute(
                        "SELECT pg_advisory_lock_shared(hashtextextended(%s, 0))", (key,)
                    )
            except psycopg.OperationalError as exc:
                self._close()
                raise BackendUnavailable(f"{self.db.safe_url()}: {exc}") from None
        return OpenMark(self, keys)

    def drop(self, keys: tuple[str, ...]) -> None:
        with self.lock:
            if self.conn is None or self.conn.closed:
                return
            try:
                for key in keys:
                    self.conn.execute(
                        "SELECT pg_advisory_unlock_shared(hashtextextended(%s, 0))", (key,)
                    )
            except psycopg.Error:
                self._close()  # gone, and every mark with it

    def close(self) -> None:
        with self.lock:
            self._close()

    def _close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()


class PgStore:
    """Sessions in a PostgreSQL database (``postgresql://`` URL), pooled connections."""

    #: several processes may write one session (compare-and-set on HEAD, no lock)
    shared_writers = True

    def __init__(
        self,
        url: str,
        options: StoreOptions | None = None,
        *,
        pool_size: int = 8,
        auto_migrate: bool = True,
        home: str | Path | None = None,
    ) -> None:
        self.url = url
        self.options = options or StoreOptions()
        #: this machine's files (the server token): ``home``, else the default home
        self.home = Path(home) if home is not None else default_home()
        self.recovery_notes: dict[str, list[str]] = {}
        self.unreadable: list[StoreError] = []
        #: derived-index repairs (none here: the search tables are transactional)
        self.index_notes: list[str] = []
        #: the migrations this process applied when it opened the database
        self.migrated: list[str] = []
        self.db = Database(url)
        try:  # one direct connection first: a wrong URL or a down server fails at once
            with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
                if auto_migrate:
                    self.migrated = migrate(conn)
                else:
                    check_current(conn)
        except psycopg.Error as exc:
            raise BackendUnavailable(f"cannot reach {self.db.safe_url()}: {exc}") from None
        self.db.open_pool(pool_size)
        self._marks = _Marks(self.db)
        #: the store-wide content-addressed objects (see :mod:`infai.store.objects`)
        self.objects = PgObjects(self.db)
        #: this process as a server node: turns, live frames and questions shared
        #: with the other nodes (see :mod:`.live`; connects only once started)
        self.live = PgLive(self.db)

    def close(self) -> None:
        """Close the connection pool, the open marks' and the node's connections;
        open leases keep their own connections."""
        self.live.close()
        self._marks.close()
        self.db.close()

    def watch(self, callback: Callable[[str | None, int], None], stop: threading.Event) -> None:
        """Call ``callback(session_id, seq)`` for each append by any process, until ``stop``.

        Blocking: run it in a thread. It listens on :data:`CHANNEL` over a
        connection of its own; when that connection is lost it reconnects and
        calls ``callback(None, -1)``, since appends made meanwhile were not heard.
        A removed session is told as ``callback(session_id, REMOVED)``.
        """
        lost = False
        while not stop.is_set():
            try:
                with self.db.connect() as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    if lost:
                        callback(None, -1)
                    while not stop.is_set():
                        for note in conn.notifies(timeout=0.25):
                            try:
                                data = json.loads(note.payload)
                                callback(str(data["session"]), int(data["seq"]))
                            except (ValueError, KeyError, TypeError):
                                continue  # not ours to read
            except (psycopg.OperationalError, BackendUnavailable):
                lost = True
                stop.wait(0.5)

    def __enter__(self) -> PgStore:
        """The store itself; leaving the block closes its pool."""
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions -------------------------------------------------------------

    def create_session(
        self,
        *,
        name: str | None = None,
        working_dir: str | None = None,
        model: str | None = None,
        parent_session: str | None = None,
        parent_event: str | None = None,
        session_id: str | None = None,
    ) -> SessionInfo:
        """Insert the session's row (committed when this returns); a taken id raises
        :class:`SessionExists`."""
        if parent_session is not None and not self.exists(parent_session):
            raise SessionNotFound(parent_session)
        info = new_session_info(name, working_dir, model, parent_session, parent_event, session_id)
        sid, stamp = info.id, info.created_at
        with self.db.conn() as conn:
            try:
                conn.execute(
                    "INSERT INTO infai_sessions (id, info, updated_at) VALUES (%s, %s, %s)",
                    (sid, json.dumps(info.to_obj()), stamp),
                )
            except psycopg.errors.UniqueViolation:
                raise SessionExists(f"session {sid} already exists") from None
        return info

    def exists(self, session_id: str) -> bool:
        """Whether the session's row is there (one query; a malformed id is InvalidInput)."""
        sid = check_uuid(session_id, "session id")
        with self.db.conn() as conn:
            row = conn.execute("SELECT 1 FROM infai_sessions WHERE id = %s", (sid,)).fetchone()
        return row is not None

    def info(self, session_id: str) -> SessionInfo:
        """The session's metadata from its row; raises :class:`SessionNotFound`."""
        sid = check_uuid(session_id, "session id")
        with self.db.conn() as conn:
            row = conn.execute("SELECT info FROM infai_sessions WHERE id = %s", (sid,)).fetchone()
        if row is None:
            raise SessionNotFound(sid)
        return _info(row[0], sid)

    def update_info(self, session_id: str, **changes: Changed) -> SessionInfo:
        """Change metadata in one transaction holding the session row (no lock file)."""
        check_changes(changes)
        sid = check_uuid(session_id, "session id")
        with self.db.conn() as conn, conn.transaction():
            row = conn.execute(
                "SELECT info FROM infai_sessions WHERE id = %s FOR UPDATE", (sid,)
            ).fetchone()
            if row is None:
                raise SessionNotFound(sid)
            info = _info(row[0], sid).replace(updated_at=now_rfc3339(), **changes)
            check_info(info)
            conn.execute(
                "UPDATE infai_sessions SET info = %s, updated_at = %s WHERE id = %s",
                (json.dumps(info.to_obj()), info.updated_at, sid),
            )
        return info

    def restore_info(self, info: SessionInfo) -> None:
        """Overwrite the row's metadata with ``info`` as given (import); one statement,
        so atomic; raises :class:`SessionNotFound` when there is no such session."""
        check_info(info)
        with self.db.conn() as conn:
            done = conn.execute(
                "UPDATE infai_sessions SET info = %s, updated_at = %s WHERE id = %s",
                (json.dumps(info.to_obj()), info.updated_at, info.id),
            )
            if done.rowcount == 0:
                raise SessionNotFound(info.id)

    def list_sessions(self) -> list[SessionInfo]:
        """Every session's metadata, most recently updated first (session rows only)."""
        self.unreadable = []
        out = []
        with self.db.conn() as conn:
            rows = conn.execute(
                "SELECT id, info FROM infai_sessions ORDER BY updated_at DESC, id DESC"
            ).fetchall()
        for sid, obj in rows:
            try:
                out.append(_info(obj, str(sid)))
            except StoreError as exc:
                self.unreadable.append(exc)
        return out

    def list_summaries(self) -> list[SessionSummary]:
        """As :meth:`list_sessions`, each with its event count (the session row's) and
        the preview of its first user message (one index probe per session)."""
        self.unreadable = []
        out = []
        with self.db.conn() as conn:
            rows = conn.execute(
                "SELECT s.id, s.info, s.count, (SELECT e.preview FROM infai_events e"
                " WHERE e.session_id = s.id AND e.kind = 'message' AND e.role = 'user'"
                " ORDER BY e.seq LIMIT 1)"
                " FROM infai_sessions s ORDER BY s.updated_at DESC, s.id DESC"
            ).fetchall()
        for sid, obj, count, first in rows:
            try:
                out.append(SessionSummary(_info(obj, str(sid)), first, count))
            except StoreError as exc:
                self.unreadable.append(exc)
        return out

    def search(
        self,
        query: str,
        *,
        session: str | None = None,
        working_dir: str | None = None,
        kind: str | None = None,
        limit: int = 20,
    ) -> SearchResults:
        """Full-text search over every event of every session (:mod:`.search`): catches
        the index up first, then ranks by ``ts_rank``."""
        from ..search import check_kind, check_limit, parse_query
        from . import search

        parsed = parse_query(query)
        check_kind(kind)
        limit = check_limit(limit)
        if session is not None:
            session = check_uuid(session, "session id")
            if not self.exists(session):
                raise SessionNotFound(session)
        return search.search(
            self.db, parsed, session=session, working_dir=working_dir, kind=kind, limit=limit
        )

    def rebuild_search_index(self, progress: Progress | None = None) -> list[DamagedSession]:
        """Drop the derived search rows and index every event again; the sessions whose
        damaged events were left out."""
        from . import search

        return search.rebuild(self.db, progress)

    def lease(self, session_id: str, *, wait: float | None = None) -> Lease:
        """Take the session's turn lease; if another process holds it, wait up to
        ``wait`` seconds (default: the options' ``lock_timeout``; unset: not at all),
        then raise :class:`SessionBusy`. The lease's connection has TCP keepalives:
        a machine that vanishes loses its leases within seconds, not hours."""
        sid = check_uuid(session_id, "session id")
        deadline = time.monotonic() + (self.options.lock_wait(0.0) if wait is None else wait)
        conn = self.db.connect()
        try:
            keep_alive(conn)
            while not _try_lock(conn, LEASE_PREFIX + sid):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SessionBusy(
                        f"session {sid} is busy: another process is running a turn or a"
                        " compaction in it (wait for it, or cancel it where it runs)"
                    )
                time.sleep(min(LEASE_POLL, left))
        except BaseException:
            conn.close()
            raise
        return Lease(conn)

    def open_mark(self, session_id: str, workdir: str | None = None) -> OpenMark:
        """Say that ``session_id`` is open in this process until released (or until
        the process dies): a shared advisory lock, held on the store's one marks
        connection. Writers take no lock in this store, so this is what
        :meth:`marked_open` sees, as a lock file's holder is seen in the directory
        store; any number of processes may hold one. With ``workdir`` (where the
        session's tools work), a second one on the session and that directory
        (:func:`_dir_key`), which :meth:`marked_open_in` asks about."""
        sid = check_uuid(session_id, "session id")
        keys = (
            (OPEN_PREFIX + sid,) if workdir is None else (OPEN_PREFIX + sid, _dir_key(sid, workdir))
        )
        return self._marks.take(keys)

    def marked_open(self, session_ids: list[str]) -> list[str]:
        """Those of ``session_ids`` some process holds an :meth:`open_mark` on now.

        Asked by trying each mark's exclusive lock inside a transaction that is
        rolled back at once (it fails while any holder has it), so nothing stays
        held; a mark being taken meanwhile waits those few milliseconds."""
        sids = [check_uuid(sid, "session id") for sid in session_ids]
        if not sids:
            return []
        with self.db.conn() as conn, conn.transaction(force_rollback=True):
            rows = conn.execute(
                "SELECT id FROM unnest(%s::text[]) AS s(id)"
                " WHERE NOT pg_try_advisory_xact_lock(hashtextextended(%s::text || id, 0))",
                (sids, OPEN_PREFIX),
            ).fetchall()
        held = {row[0] for row in rows}
        return [sid for sid in sids if sid in held]

    def marked_open_in(self, session_ids: list[str], workdir: str) -> list[str]:
        """Those of ``session_ids`` some process holds an :meth:`open_mark` on now,
        given ``workdir``: asked as :meth:`marked_open` asks, of each session's
        directory key. A collision of two 64-bit keys could only count one more
        session (a warning), never miss one."""
        sids = [check_uuid(sid, "session id") for sid in session_ids]
        if not sids:
            return []
        keys = [_dir_key(sid, workdir) for sid in sids]
        with self.db.conn() as conn, conn.transaction(force_rollback=True):
            rows = conn.execute(
                "SELECT n FROM unnest(%s::text[]) WITH ORDINALITY AS k(key, n)"
                " WHERE NOT pg_try_advisory_xact_lock(hashtextextended(key, 0))",
                (keys,),
            ).fetchall()
        held = {int(row[0]) - 1 for row in rows}
        return [sid for n, sid in enumerate(sids) if n in held]

    def remove_session(self, session_id: str) -> None:
        """Delete the session under its turn lease, notify other nodes, and drop the blobs
        no event names any more; a busy session raises :class:`SessionBusy`."""
        sid = check_uuid(session_id, "session id")
        if not self.exists(sid):
            raise SessionNotFound(sid)
        lease = self.lease(sid)  # never under a turn running elsewhere
        try:
            self._remove(sid)
        finally:
            lease.release()

    def _remove(self, sid: str) -> None:
        with self.db.conn() as conn, conn.transaction():
            deleted = conn.execute("DELETE FROM infai_sessions WHERE id = %s", (sid,)).rowcount
            if not deleted:
                raise SessionNotFound(sid)
            payload = json.dumps({"session": sid, "seq": REMOVED})
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
            # Blobs no event names any more. They are shared by content: an append in
            # flight may have found a blob (and inserted nothing) but not committed the
            # event naming it yet. This lock waits for such appends (their INSERT holds
            # ROW EXCLUSIVE until commit) and holds new ones back, so the check below
            # sees every event that will name a blob it keeps or removes.
            conn.execute("LOCK TABLE infai_blobs IN SHARE ROW EXCLUSIVE MODE")
            conn.execute(
                "DELETE FROM infai_blobs b WHERE NOT EXISTS"
                " (SELECT 1 FROM infai_events e WHERE e.digest = b.digest)"
            )

    def open_reader(self, session_id: str) -> PgSessionReader:
        """A snapshot of the session as of now (one query; raises SessionNotFound)."""
        return PgSessionReader(self.db, self.options, check_uuid(session_id, "session id"))

    def open_writer(self, session_id: str, *, timeout: float | None = None) -> PgSessionWriter:
        """A writer that takes no lock (``timeout`` is unused): appends compare-and-set HEAD."""
        return PgSessionWriter(self.db, self.options, check_uuid(session_id, "session id"))

    def fsck(self, session_id: str, *, repair: bool = False) -> FsckReport:
        """Check every event: links, HEAD, records and blob digests (nothing to repair)."""
        report = FsckReport(check_uuid(session_id, "session id"))
        with self.open_reader(session_id) as reader:
            ids: dict[str, int] = {}
            digests: set[str] = set()  # blobs are stored once per content
            last = -1
            for entry in reader.entries():
                where = f"{self.db.safe_url()} session {report.session_id} event #{entry.seq}"
                report.events += 1
                if entry.seq != last + 1:
                    report.problems.append(Problem(where, 0, f"gap before #{entry.seq}"))
                last = entry.seq
                if entry.parent_seq >= 0 and ids.get(entry.parent_id) != entry.parent_seq:
                    report.problems.append(Problem(where, 0, "parent link is inconsistent"))
                ids[entry.id] = entry.seq
                try:
                    event = reader.event(entry.id, resolve=True)
                    if event.digest is not None:
                        digests.add(event.digest)
                except StoreError as exc:
                    report.problems.append(Problem(where, 0, str(exc)))
            report.blobs = len(digests)
            if report.events != reader.count or (last >= 0 and reader.head_seq != last):
                where = f"{self.db.safe_url()} session {report.session_id}"
                report.problems.append(Problem(where, 0, "HEAD or count disagrees with events"))
            check_objects(self.objects, reader, report)  # what its snapshots name
        return report


def _dir_key(sid: str, workdir: str) -> str:
    """The advisory lock key of session ``sid`` open in ``workdir``: the path by its
    SHA-256 (of its bytes as the OS has them: any path, even one that is not
    UTF-8, makes a key, and a long one is no longer to hash)."""
    digest = hashlib.sha256(os.fsencode(workdir)).hexdigest()
    return f"{OPEN_DIR_PREFIX}{sid}:{digest}"


def _try_lock(conn: psycopg.Connection[Any], key: str) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)).fetchone()
    return row is not None and bool(row[0])


def _info(obj: Any, sid: str) -> SessionInfo:
    where = f"database session {sid} metadata"
    version = obj.get("format") if isinstance(obj, dict) else None
    if type(version) is int and version > FORMAT_VERSION:
        raise UnsupportedFormat(
            f"{where}: session format {version}; this infai understands up to "
            f"{FORMAT_VERSION}: upgrade infai"
        )
    try:
        return SessionInfo.from_obj(obj, where)
    except InvalidInput as exc:
        raise CorruptionError(where, 0, str(exc).removeprefix(f"{where}: ")) from None

"""The store: a home directory of sessions, each a directory of its own.

A session is created whole or not at all: its files are made in a hidden
``sessions/.new-<id>`` directory, synced, and renamed into place, and
``sessions/`` is synced before the id is returned. ``session.json`` is rewritten
atomically (temp, fsync, rename, directory fsync) and is all that listing
sessions reads. Removal renames the directory out of sight first, so a crash
mid-delete never leaves a half-session that looks real.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from ..codec import check_uuid, dumps, now_rfc3339
from ..errors import (
    CorruptionError,
    SessionExists,
    SessionNotFound,
    StoreError,
    StoreIOError,
)
from ..home import default_home
from ..info import (
    SessionInfo,
    SessionSummary,
    check_changes,
    check_info,
    new_session_info,
)
from ..options import StoreOptions
from .fsio import FileIO, OsIO, atomic_write
from .layout import SessionPaths
from .meta import decode_info as _decode_info
from .reader import SessionReader
from .recovery import Recovery, analyze, apply, settle

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from ..events import Event
    from ..info import Changed
    from ..report import FsckReport
    from ..search import DamagedSession, Progress, SearchResults
    from .listing import ListingIndex
    from .lock import DirMark, WriterLock
    from .objects import FileObjects
    from .search_index import SearchIndex
    from .writer import SessionWriter


class NoLease:
    """The file store's turn lease: nothing to release."""

    def release(self) -> None:
        """Nothing held."""


class Store:
    """Sessions under ``home``: create, list, open for reading or writing, remove."""

    #: one writer per session at a time (an OS lock), so an open writer is current
    shared_writers = False

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        options: StoreOptions | None = None,
        io: FileIO | None = None,
    ) -> None:
        self.home = Path(home) if home is not None else default_home()
        self.options = options or StoreOptions()
        self.io = io or OsIO()
        #: what the last recovery did, per session id (for reporting)
        self.recovery_notes: dict[str, list[str]] = {}
        #: session.json files the last :meth:`list_sessions` could not read
        self.unreadable: list[StoreError] = []
        self._writers: dict[str, SessionWriter] = {}
        self.sessions_dir = self.home / "sessions"
        #: what the derived indexes (listing, search) had to rebuild, for shells to show
        self.index_notes: list[str] = []
        self._listing_index: ListingIndex | None = None
        self._search_index: SearchIndex | None = None
        self._objects: FileObjects | None = None
        self._index_dir = os.path.join(self.home, "index")  # a string: checked per append

    # -- derived indexes (<home>/index/: caches of the sessions, never the truth) --

    def _in_use(self, name: str, opened: object) -> bool:
        """Whether a derived index file is in use (writers update only those), checked
        without importing sqlite3 when it is not."""
        return opened is not None or os.path.exists(os.path.join(self._index_dir, name))

    def listing_index(self) -> ListingIndex:
        """The derived listing index (see :mod:`.listing`), opened on first use."""
        if self._listing_index is None:
            from .listing import ListingIndex

            self._listing_index = ListingIndex(self.home, self.sessions_dir, self.index_notes)
        return self._listing_index

    def search_index(self) -> SearchIndex:
        """The derived search index (see :mod:`.search_index`), opened on first use."""
        if self._search_index is None:
            from .search_index import SearchIndex

            self._search_index = SearchIndex(self.home, self.sessions_dir, self.index_notes)
        return self._search_index

    @property
    def objects(self) -> FileObjects:
        """The store-wide content-addressed objects (see :mod:`infai.store.objects`)."""
        if self._objects is None:
            from .objects import FileObjects

            self._objects = FileObjects(self.home)
        return self._objects

    def _noted(self, session_id: str, *, removed: bool = False) -> None:
        """Tell the listing index (if in use) that this process changed a session."""
        if self._in_use("sessions.sqlite", self._listing_index):
            if removed:
                self.listing_index().forget(session_id)
            else:
                self.listing_index().note(session_id)

    def _appended(self, session_id: str, events: list[Event]) -> None:
        """The writer's hook after a durable append: index the events if search is in use,
        and tell the listing index (if in use) that HEAD moved."""
        if self._in_use("search.sqlite", self._search_index):
            self.search_index().appended(session_id, events)
        if self._in_use("sessions.sqlite", self._listing_index):
            self.listing_index().head_moved(session_id, events[-1].id, events[-1].seq + 1)

    def search(
        self,
        query: str,
        *,
        session: str | None = None,
        working_dir: str | None = None,
        kind: str | None = None,
        limit: int = 20,
    ) -> SearchResults:
        """Full-text search over every event of every session, best hits first.

        Catches the index up first (sessions appended to, made or removed by any
        process); see :mod:`infai.store.search` for the query syntax.
        """
        from ..search import check_kind, check_limit, dir_matches, parse_query

        parsed = parse_query(query)
        check_kind(kind)
        limit = check_limit(limit)
        if session is not None:
            session = self.paths(session).root.name
        rows = self.listing_index().rows()
        wanted = None
        if working_dir is not None:
            wanted = {r[0] for r in rows if dir_matches(r[3], working_dir)}
        return self.search_index().search(
            parsed,
            rows,
            self.open_reader,
            session=session,
            sessions=wanted,
            kind=kind,
            limit=limit,
        )

    def rebuild_search_index(self, progress: Progress | None = None) -> list[DamagedSession]:
        """Delete the search index and build it again from every session; the sessions
        whose damaged events (or whole session) it had to leave out."""
        return self.search_index().rebuild(self.listing_index().rows(), self.open_reader, progress)

    # -- sessions -----------------------------------------------------------

    def paths(self, session_id: str) -> SessionPaths:
        """The files of an existing session; raises :class:`SessionNotFound`."""
        session_id = check_uuid(session_id, "session id")
        paths = SessionPaths(self.sessions_dir / session_id)
        if not paths.meta.is_file():
            raise SessionNotFound(session_id)
        return paths

    def _ensure_home(self) -> None:
        if self.sessions_dir.is_dir():
            return
        self.sessions_dir.mkdir(parents=True, exist_ok=True)
        self.io.fsync_dir(str(self.sessions_dir))
        self.io.fsync_dir(str(self.sessions_dir.parent))

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
        """Create an empty session durably and return its metadata."""
        if parent_session is not None:
            self.paths(parent_session)
        info = new_session_info(name, working_dir, model, parent_session, parent_event, session_id)
        sid = info.id
        self._ensure_home()
        final = self.sessions_dir / sid
        if final.exists():
            raise SessionExists(f"session {sid} already exists")
        tmp = self.sessions_dir / f".new-{sid}"
        io = self.io
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)  # left by a creation that crashed
        try:
            io.mkdir(str(tmp))
            for sub in ("chunks", "blobs"):
                io.mkdir(str(tmp / sub))
                io.fsync_dir(str(tmp / sub))
            for empty in ("index.jsonl", "HEAD"):
                fd = io.open(str(tmp / empty), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                io.fsync(fd)
                io.close(fd)
            atomic_write(io, str(tmp / "session.json"), dumps(info.to_obj()) + b"\n")
            io.rename(str(tmp), str(final))
            io.fsync_dir(str(self.sessions_dir))
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise StoreIOError(exc.errno, f"cannot create session {sid}: {exc}") from exc
        self._noted(sid)
        return info

    def info(self, session_id: str) -> SessionInfo:
        """The session's session.json; its ``updated_at`` may lag the last append
        (:meth:`list_sessions` corrects it from HEAD)."""
        return self._read_info(self.paths(session_id))

    def exists(self, session_id: str) -> bool:
        """Whether a session by that id is here (a malformed id is InvalidInput)."""
        try:
            self.paths(session_id)
        except SessionNotFound:
            return False
        return True

    def close(self) -> None:
        """Close the derived indexes' files (sessions' files are opened per reader and
        writer)."""
        for index in (self._listing_index, self._search_index, self._objects):
            if index is not None:
                index.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lease(self, session_id: str) -> NoLease:
        """A turn lease that holds nothing: the writer's lock already keeps other
        processes from writing the session (checks only that it exists)."""
        self.paths(session_id)
        return NoLease()

    def open_mark(self, session_id: str, workdir: str | None = None) -> NoLease | DirMark:
        """Nothing to take: a session open for writing holds its writer lock, which
        is what :meth:`marked_open` looks at. With ``workdir`` (where the session's
        tools work) while this store has the session's writer open, the directory
        is recorded in the lock file (see :mod:`.lock`) for :meth:`marked_open_in`,
        until released or the writer is closed; without the writer, nothing is."""
        paths = self.paths(session_id)
        sid = paths.root.name
        writer = self._writers.get(sid)
        if workdir is None or writer is None:
            return NoLease()
        from .lock import DirMark

        return DirMark(paths.lock, workdir, lambda: self._writers.get(sid) is writer)

    def marked_open(self, session_ids: list[str]) -> list[str]:
        """Those of ``session_ids`` whose writer lock some process holds now."""
        from .lock import lock_held

        return [sid for sid in session_ids if lock_held(self.paths(sid).lock)]

    def marked_open_in(self, session_ids: list[str], workdir: str) -> list[str]:
        """Those of ``session_ids`` whose writer lock some process holds now, having
        recorded ``workdir`` (:meth:`open_mark`) as where it works; a lock file is
        read only while held."""
        from .lock import held_dir

        return [sid for sid in session_ids if held_dir(self.paths(sid).lock) == (True, workdir)]

    def watch(self, callback: Callable[[str | None, int], None], stop: threading.Event) -> None:
        """Return at once: a session's one writer is the only process appending to
        it, so there is nothing to hear from others."""

    def _read_info(self, paths: SessionPaths) -> SessionInfo:
        return _decode_info(paths.meta.read_bytes(), str(paths.meta))

    def update_info(self, session_id: str, **changes: Changed) -> SessionInfo:
        """Change name, working_dir, model or extra (atomically, under the writer lock).

        If this store has the session open for writing, its writer's lock is used.
        """
        check_changes(changes)
        paths = self.paths(session_id)
        if paths.root.name in self._writers:
            info = self._write_info(paths, **changes)
        else:
            lock = self._lock(paths)
            try:
                info = self._write_info(paths, **changes)
            finally:
                lock.release()
        self._noted(info.id)
        return info

    def _lock(self, paths: SessionPaths, timeout: float | None = None) -> WriterLock:
        """Take the session's writer lock; the session must still exist once we hold it
        (a removal may have won the race)."""
        from .lock import WriterLock

        wait = self.options.lock_wait(StoreOptions.DEFAULT_LOCK_TIMEOUT)
        lock = WriterLock(
            paths.lock, wait if timeout is None else timeout, on_wait=self.options.on_wait
        )
        if not paths.meta.is_file():
            lock.release()
            raise SessionNotFound(paths.root.name)
        return lock

    def restore_info(self, info: SessionInfo) -> None:
        """Write ``info`` as the session's metadata, unchanged (import uses it), under
        the writer lock as :meth:`update_info` (this store's writer's, if it has the
        session open); raises :class:`SessionNotFound`."""
        check_info(info)
        paths = self.paths(info.id)
        lock = None if paths.root.name in self._writers else self._lock(paths)
        try:
            atomic_write(self.io, str(paths.meta), dumps(info.to_obj()) + b"\n")
        finally:
            if lock is not None:
                lock.release()
        self._noted(info.id)

    def _touch(self, paths: SessionPaths) -> None:
        self._write_info(paths)

    def _raise_format(self, paths: SessionPaths, needed: int) -> None:
        """Before a session's first event of a newer format's kinds (snapshot or
        restore: 2; gap: 3): its metadata says that format, which an older infai
        refuses instead of misreading."""
        info = self._read_info(paths)
        if info.format < needed:
            upgraded = info.replace(format=needed, updated_at=now_rfc3339())
            atomic_write(self.io, str(paths.meta), dumps(check_info(upgraded).to_obj()) + b"\n")

    def _write_info(self, paths: SessionPaths, **changes: Changed) -> SessionInfo:
        info = self._read_info(paths).replace(updated_at=now_rfc3339(), **changes)
        check_info(info)
        atomic_write(self.io, str(paths.meta), dumps(info.to_obj()) + b"\n")
        return info

    def list_sessions(self) -> list[SessionInfo]:
        """Every session's metadata, most recently active first.

        Answered from the listing index (:mod:`.listing`), which re-reads only the
        sessions whose ``session.json`` or ``HEAD`` changed since it last looked.
        session.json is rewritten on a session's first append after it is opened,
        not on every one, so ``updated_at`` here is the later of its stamp and the
        time in HEAD's event id (a UUIDv7: the last append, to the millisecond).

        A session.json this infai cannot read (damaged, or from a newer format) does
        not hide the others: it is left out and its error kept in :attr:`unreadable`.
        """
        index = self.listing_index()
        infos = index.sessions()
        self.unreadable = list(index.unreadable)
        return self._with_open_writers(infos) if self._writers else infos

    def list_summaries(self) -> list[SessionSummary]:
        """As :meth:`list_sessions`, each with its first prompt and event count (kept
        in the listing index beside the metadata: no event is read)."""
        index = self.listing_index()
        summaries = index.summaries()
        self.unreadable = list(index.unreadable)
        if not self._writers:
            return summaries
        counts = {sid: w.count for sid, w in self._writers.items()}
        infos = self._with_open_writers([s.info for s in summaries])
        by_id = {s.info.id: s for s in summaries}
        return [
            SessionSummary(
                info,
                by_id[info.id].first_prompt,
                max(by_id[info.id].events, counts.get(info.id, 0)),
            )
            for info in infos
        ]

    def _with_open_writers(self, infos: list[SessionInfo]) -> list[SessionInfo]:
        """The listing with this process's open writers' last appends counted (the index
        hears of them at most a second late: see :mod:`.listing`)."""
        from .meta import id_time

        latest = {sid: id_time(w.head) for sid, w in self._writers.items() if w.head}
        out, moved = [], False
        for info in infos:
            at = latest.get(info.id, "")
            if at > info.updated_at:
                info, moved = info.replace(updated_at=at), True
            out.append(info)
        if moved:
            out.sort(key=lambda i: (i.updated_at, i.id), reverse=True)
        return out

    def remove_session(self, session_id: str) -> None:
        """Delete a session (waits for its writer lock, so never under a live writer)."""
        paths = self.paths(session_id)
        lock = self._lock(paths)
        # A unique name: an earlier removal of the same id may have left its trash.
        trash = self.sessions_dir / f".trash-{paths.root.name}-{os.getpid()}-{time.time_ns()}"
        try:
            self.io.rename(str(paths.root), str(trash))
            self.io.fsync_dir(str(self.sessions_dir))
        except OSError as exc:
            raise StoreIOError(
                exc.errno, f"cannot remove session {paths.root.name}: {exc}"
            ) from exc
        finally:
            lock.release()
        self._noted(paths.root.name, removed=True)
        if self._in_use("search.sqlite", self._search_index):
            self.search_index().forget(paths.root.name)
        import shutil

        shutil.rmtree(trash)
        with contextlib.suppress(FileNotFoundError):  # a removed session's damage note
            os.unlink(paths.damaged)

    # -- opening ------------------------------------------------------------

    def _checked_paths(self, session_id: str) -> SessionPaths:
        """Paths of a session whose on-disk format this version understands."""
        paths = self.paths(session_id)
        self._read_info(paths)  # raises UnsupportedFormat for a newer one
        return paths

    def open_reader(self, session_id: str) -> SessionReader:
        """Read the session's committed events without taking the lock."""
        return SessionReader(self._checked_paths(session_id))

    def open_writer(self, session_id: str, *, timeout: float | None = None) -> SessionWriter:
        """Take the session's writer lock, run recovery, and return its writer."""
        # Writing needs modules a reader does not: a resume stays small without them.
        from .writer import SessionWriter

        paths = self._checked_paths(session_id)
        lock = self._lock(paths, timeout)
        try:
            _refuse_if_damaged(paths)
            plan = self.recover(paths)
        except BaseException:
            lock.release()
            raise
        sid = paths.root.name
        writer = SessionWriter(
            paths,
            plan,
            self.io,
            self.options,
            lock,
            on_first_append=lambda: self._touch(paths),
            on_format=lambda needed: self._raise_format(paths, needed),
            on_close=lambda: self._closed_writer(sid),
            on_commit=lambda events: self._appended(sid, events),
        )
        self._writers[sid] = writer
        return writer

    def _closed_writer(self, session_id: str) -> None:
        self._writers.pop(session_id, None)
        if self._search_index is not None:
            self._search_index.flush(session_id)
        self._noted(session_id)  # HEAD moved: the listing shows the last append

    def fsck(self, session_id: str, *, repair: bool = False) -> FsckReport:
        """Verify the whole session; with ``repair``, first do what is provably safe."""
        from .fsck import fsck
        from .fsck import repair as repair_session

        paths = self.paths(session_id)
        repaired: list[str] = []
        if repair:
            lock = self._lock(paths)
            try:
                repaired = repair_session(self.io, paths)
            finally:
                lock.release()
        report = fsck(paths)
        report.repaired = repaired
        _mark_damage(self.io, paths, report)
        if report.ok:  # objects its snapshots name: reported, never a damage mark
            from ..objcheck import check_objects

            with self.open_reader(session_id) as view:
                check_objects(self.objects, view, report)
        return report

    def recover(self, paths: SessionPaths) -> Recovery:
        """Analyse and apply recovery (caller holds the lock); returns the plan."""
        plan = analyze(paths)
        # Settle first: applying the plan may write a HEAD that calls the log clean.
        settle(self.io, paths, plan)
        if not plan.empty or plan.index_durable < plan.count:
            apply(self.io, paths, plan)
        self.recovery_notes[paths.root.name] = plan.notes
        return plan


def _mark_damage(io: FileIO, paths: SessionPaths, report: FsckReport) -> None:
    """Leave a damage note (``<home>/damaged/<id>.json``) when the check found
    damage (so appending is refused until it is dealt with), and take it away
    once a check finds none."""
    if report.problems:
        first = report.problems[0]
        note = {
            "path": first.path,
            "offset": first.offset,
            "detail": first.detail,
            "problems": len(report.problems),
        }
        data = json.dumps(note).encode()
        with contextlib.suppress(OSError):  # a read-only store can still be checked
            if paths.damaged.is_file() and paths.damaged.read_bytes() == data:
                return  # said already
            paths.damaged.parent.mkdir(exist_ok=True)
            # a hint, not the truth (a later check says it again): no fsync needed
            atomic_write(io, str(paths.damaged), data, sync=False)
    elif paths.damaged.exists():
        with contextlib.suppress(FileNotFoundError):
            os.unlink(paths.damaged)


def _refuse_if_damaged(paths: SessionPaths) -> None:
    """Appending to a session a check found damaged would bury the damage under new
    events; say so instead, with what to do."""
    try:
        note = json.loads(paths.damaged.read_bytes())
    except FileNotFoundError:
        return
    except ValueError:
        note = {}
    sid = paths.root.name
    raise CorruptionError(
        note.get("path", str(paths.damaged)),
        int(note.get("offset", 0)),
        f"{note.get('detail', 'damage found by a check')}; the session is damaged and "
        f"takes no more events: 'infai session fsck {sid}' says what is wrong, "
        f"'infai session salvage {sid}' copies what verifies into a new session",
    )

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
    InvalidInput,
    SessionExists,
    SessionNotFound,
    StoreError,
    StoreIOError,
    UnsupportedFormat,
)
from ..home import default_home
from ..info import (
    FORMAT_VERSION,
    SessionInfo,
    check_changes,
    check_info,
    new_session_info,
)
from ..options import StoreOptions
from .format import decode_head
from .fsio import FileIO, OsIO, atomic_write
from .layout import SessionPaths
from .reader import SessionReader
from .recovery import Recovery, analyze, apply, settle

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from ..info import Changed
    from ..report import FsckReport
    from .lock import WriterLock
    from .writer import SessionWriter


def _last_append(head_file: Path) -> str:
    """When HEAD's event was made, from its UUIDv7 id ("" if unknown: a hint only)."""
    try:
        head = decode_head(head_file.read_bytes())
    except OSError:
        return ""
    if head is None or len(head.id) != 36 or head.id[14] != "7":
        return ""
    try:
        millis = int(head.id[:8] + head.id[9:13], 16)
    except ValueError:
        return ""
    return now_rfc3339(millis / 1000)


def _decode_info(data: bytes, where: str) -> SessionInfo:
    """Parse a session.json read from disk: newer formats and damage are told apart."""
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise CorruptionError(where, 0, f"malformed JSON: {exc}") from None
    version = obj.get("format") if isinstance(obj, dict) else None
    if type(version) is int and version > FORMAT_VERSION:
        raise UnsupportedFormat(
            f"{where}: store format {version}; this infai understands up to "
            f"{FORMAT_VERSION}: upgrade infai"
        )
    try:
        return SessionInfo.from_obj(obj, where)
    except InvalidInput as exc:
        raise CorruptionError(where, 0, str(exc).removeprefix(f"{where}: ")) from None


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
        """Nothing to release: files are opened per reader and writer."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lease(self, session_id: str) -> NoLease:
        """A turn lease that holds nothing: the writer's lock already keeps other
        processes from writing the session (checks only that it exists)."""
        self.paths(session_id)
        return NoLease()

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
            return self._write_info(paths, **changes)
        lock = self._lock(paths)
        try:
            return self._write_info(paths, **changes)
        finally:
            lock.release()

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
        """Write ``info`` as the session's metadata, unchanged (import uses it)."""
        check_info(info)
        paths = self.paths(info.id)
        atomic_write(self.io, str(paths.meta), dumps(info.to_obj()) + b"\n")

    def _touch(self, paths: SessionPaths) -> None:
        self._write_info(paths)

    def _write_info(self, paths: SessionPaths, **changes: Changed) -> SessionInfo:
        info = self._read_info(paths).replace(updated_at=now_rfc3339(), **changes)
        check_info(info)
        atomic_write(self.io, str(paths.meta), dumps(info.to_obj()) + b"\n")
        return info

    def list_sessions(self) -> list[SessionInfo]:
        """Every session's metadata, most recently active first.

        Reads each session.json and HEAD: session.json is rewritten on a session's
        first append after it is opened, not on every one, so ``updated_at`` here is
        the later of its stamp and the time in HEAD's event id (a UUIDv7: the last
        append, to the millisecond).

        A session.json this infai cannot read (damaged, or from a newer format) does
        not hide the others: it is left out and its error kept in :attr:`unreadable`.
        """
        out = []
        self.unreadable = []
        try:
            names = os.listdir(self.sessions_dir)
        except FileNotFoundError:
            return []
        for name in names:
            if name.startswith("."):
                continue
            try:
                data = (self.sessions_dir / name / "session.json").read_bytes()
            except (FileNotFoundError, NotADirectoryError):
                continue
            try:
                info = _decode_info(data, str(self.sessions_dir / name / "session.json"))
            except StoreError as exc:
                self.unreadable.append(exc)
                continue
            appended = _last_append(self.sessions_dir / name / "HEAD")
            out.append(info.replace(updated_at=appended) if appended > info.updated_at else info)
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
            on_close=lambda: self._writers.pop(sid, None),
        )
        self._writers[sid] = writer
        return writer

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
        with contextlib.suppress(OSError):  # a read-only store can still be checked
            paths.damaged.parent.mkdir(exist_ok=True)
            atomic_write(io, str(paths.damaged), json.dumps(note).encode())
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

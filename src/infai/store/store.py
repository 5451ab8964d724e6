"""The store: a home directory of sessions, each a directory of its own.

A session is created whole or not at all: its files are made in a hidden
``sessions/.new-<id>`` directory, synced, and renamed into place, and
``sessions/`` is synced before the id is returned. ``session.json`` is rewritten
atomically (temp, fsync, rename, directory fsync) and is all that listing
sessions reads. Removal renames the directory out of sight first, so a crash
mid-delete never leaves a half-session that looks real.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .errors import InvalidInput, SessionExists, SessionNotFound, StoreError, StoreIOError
from .format import FORMAT_VERSION, dumps, now_rfc3339
from .fsio import FileIO, OsIO, atomic_write
from .layout import SessionPaths, check_uuid, default_home
from .reader import SessionReader
from .recovery import Recovery, analyze, apply, settle

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal

    from .fsck import FsckReport
    from .writer import SessionWriter


class StoreOptions:
    """Tunables; the defaults suit an interactive agent on a local disk.

    - ``chunk_size``: a chunk is closed and the next one started at this size
    - ``blob_threshold``: records whose JSON exceeds this many bytes become blobs
    - ``durability``: "fast", one fsync per append; "strict", the design's four
    - ``index_sync_interval``: fsync the index after this many unsynced entries
      (bounds the work of recovery)
    - ``lock_timeout``: seconds a writer waits for another writer's lock
    """

    __slots__ = (
        "blob_threshold",
        "chunk_size",
        "durability",
        "index_sync_interval",
        "lock_timeout",
    )

    def __init__(
        self,
        *,
        chunk_size: int = 4 * 1024 * 1024,
        blob_threshold: int = 16 * 1024,
        durability: Literal["fast", "strict"] = "fast",
        index_sync_interval: int = 64,
        lock_timeout: float = 10.0,
    ) -> None:
        if durability not in ("fast", "strict"):
            raise InvalidInput(f"durability must be 'fast' or 'strict', not {durability!r}")
        if chunk_size < 1 or blob_threshold < 0 or index_sync_interval < 1:
            raise InvalidInput("chunk_size and index_sync_interval must be positive")
        self.chunk_size = chunk_size
        self.blob_threshold = blob_threshold
        self.durability = durability
        self.index_sync_interval = index_sync_interval
        self.lock_timeout = lock_timeout


_INFO_FIELDS = (
    "id",
    "format",
    "name",
    "working_dir",
    "model",
    "created_at",
    "updated_at",
    "parent_session",
    "parent_event",
    "extra",
)


class SessionInfo:
    """The contents of ``session.json``."""

    __slots__ = _INFO_FIELDS

    def __init__(
        self,
        *,
        id: str,
        created_at: str,
        updated_at: str,
        format: int = FORMAT_VERSION,
        name: str | None = None,
        working_dir: str | None = None,
        model: str | None = None,
        parent_session: str | None = None,
        parent_event: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.format = format
        self.name = name
        self.working_dir = working_dir
        self.model = model
        self.created_at = created_at
        self.updated_at = updated_at
        self.parent_session = parent_session
        self.parent_event = parent_event
        self.extra = extra or {}

    def to_obj(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in _INFO_FIELDS}

    @classmethod
    def from_obj(cls, obj: object, where: str) -> SessionInfo:
        """Build from parsed JSON, checking every field's type (errors name it)."""
        if not isinstance(obj, dict):
            raise InvalidInput(f"{where}: expected an object")
        for key, value in obj.items():
            if key not in _INFO_FIELDS:
                raise InvalidInput(f"{where}: unknown field {key!r}")
            want = int if key == "format" else dict if key == "extra" else str
            required = key in ("id", "created_at", "updated_at", "format")
            if not isinstance(value, want) and (required or value is not None):
                raise InvalidInput(f"{where}: field {key!r} must be {want.__name__}")
        for key in ("id", "created_at", "updated_at"):
            if key not in obj:
                raise InvalidInput(f"{where}: missing field {key!r}")
        return cls(**obj)

    def replace(self, **changes: Any) -> SessionInfo:
        return SessionInfo(**{**self.to_obj(), **changes})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionInfo) and self.to_obj() == other.to_obj()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SessionInfo({self.to_obj()!r})"


def _decode_info(data: bytes, where: str) -> SessionInfo:
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise InvalidInput(f"{where}: malformed JSON: {exc}") from None
    return SessionInfo.from_obj(obj, where)


class Store:
    """Sessions under ``home``: create, list, open for reading or writing, remove."""

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
        if parent_event is not None:
            parent_event = check_uuid(parent_event, "parent event id")
        if session_id:
            sid = check_uuid(session_id, "session id")
        else:
            import uuid_utils

            sid = str(uuid_utils.uuid7())
        stamp = now_rfc3339()
        info = SessionInfo(
            id=sid,
            name=name,
            working_dir=working_dir,
            model=model,
            created_at=stamp,
            updated_at=stamp,
            parent_session=parent_session,
            parent_event=parent_event,
        )
        SessionInfo.from_obj(info.to_obj(), "session metadata")  # readable back?
        self._ensure_home()
        final = self.sessions_dir / sid
        if final.exists():
            raise SessionExists(f"session {sid} already exists")
        tmp = self.sessions_dir / f".new-{sid}"
        io = self.io
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp)
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
        return info

    def info(self, session_id: str) -> SessionInfo:
        return self._read_info(self.paths(session_id))

    def _read_info(self, paths: SessionPaths) -> SessionInfo:
        return _decode_info(paths.meta.read_bytes(), str(paths.meta))

    def update_info(self, session_id: str, **changes: str | None) -> SessionInfo:
        """Change name, working_dir or model (atomically, under the writer lock)."""
        allowed = {"name", "working_dir", "model"}
        if not set(changes) <= allowed:
            raise InvalidInput(f"cannot change {sorted(set(changes) - allowed)}")
        from .lock import WriterLock

        paths = self.paths(session_id)
        lock = WriterLock(paths.lock, self.options.lock_timeout)
        try:
            return self._write_info(paths, **changes)
        finally:
            lock.release()

    def _touch(self, paths: SessionPaths) -> None:
        self._write_info(paths)

    def _write_info(self, paths: SessionPaths, **changes: str | None) -> SessionInfo:
        info = self._read_info(paths).replace(updated_at=now_rfc3339(), **changes)
        SessionInfo.from_obj(info.to_obj(), "session metadata")  # readable back?
        atomic_write(self.io, str(paths.meta), dumps(info.to_obj()) + b"\n")
        return info

    def list_sessions(self) -> list[SessionInfo]:
        """Every session's metadata, most recently updated first (reads session.json only)."""
        out = []
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
            out.append(_decode_info(data, str(self.sessions_dir / name / "session.json")))
        out.sort(key=lambda i: (i.updated_at, i.id), reverse=True)
        return out

    def remove_session(self, session_id: str) -> None:
        """Delete a session (waits for its writer lock, so never under a live writer)."""
        from .lock import WriterLock

        paths = self.paths(session_id)
        lock = WriterLock(paths.lock, self.options.lock_timeout)
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

    # -- opening ------------------------------------------------------------

    def _checked_paths(self, session_id: str) -> SessionPaths:
        """Paths of a session whose on-disk format this version understands."""
        paths = self.paths(session_id)
        version = self._read_info(paths).format
        if version > FORMAT_VERSION:
            raise StoreError(
                f"session {paths.root.name} uses store format {version}; "
                f"this infai understands up to {FORMAT_VERSION}: upgrade infai"
            )
        return paths

    def open_reader(self, session_id: str) -> SessionReader:
        """Read the session's committed events without taking the lock."""
        return SessionReader(self._checked_paths(session_id))

    def open_writer(self, session_id: str, *, timeout: float | None = None) -> SessionWriter:
        """Take the session's writer lock, run recovery, and return its writer."""
        # Writing needs modules a reader does not: a resume stays small without them.
        from .lock import WriterLock
        from .writer import SessionWriter, WriteOptions

        paths = self._checked_paths(session_id)
        lock = WriterLock(paths.lock, self.options.lock_timeout if timeout is None else timeout)
        try:
            plan = self.recover(paths)
        except BaseException:
            lock.release()
            raise
        opts = self.options
        write_opts = WriteOptions(
            chunk_size=opts.chunk_size,
            blob_threshold=opts.blob_threshold,
            strict=opts.durability == "strict",
            index_sync_interval=opts.index_sync_interval,
        )
        return SessionWriter(
            paths,
            plan,
            self.io,
            write_opts,
            lock,
            on_first_append=lambda: self._touch(paths),
        )

    def fsck(self, session_id: str, *, repair: bool = False) -> FsckReport:
        """Verify the whole session; with ``repair``, first do what is provably safe."""
        from .fsck import fsck
        from .fsck import repair as repair_session
        from .lock import WriterLock

        paths = self.paths(session_id)
        repaired: list[str] = []
        if repair:
            lock = WriterLock(paths.lock, self.options.lock_timeout)
            try:
                repaired = repair_session(self.io, paths)
            finally:
                lock.release()
        report = fsck(paths)
        report.repaired = repaired
        return report

    def recover(self, paths: SessionPaths) -> Recovery:
        """Analyse and apply recovery (caller holds the lock); returns the plan."""
        plan = analyze(paths)
        if not plan.empty or plan.index_durable < plan.count:
            apply(self.io, paths, plan)
        settle(self.io, paths, plan)
        self.recovery_notes[paths.root.name] = plan.notes
        return plan

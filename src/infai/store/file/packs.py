"""Pack files: where the directory store keeps its large objects' bytes.

Model, in prose: putting 200 MB of file contents through SQLite's B-tree costs
five to ten times what writing the same bytes to one file does (every row is
cut into pages, every page goes through the write-ahead log and then into the
database). So an object of :data:`PACK_MIN` bytes or more is appended to the
batch's own pack file, ``<home>/objects/packs/<name>.pack``, and its row in
the objects database says where (pack id, offset). A pack is written by one
batch only, start to end, then synced once (the file, then its directory)
*before* the batch's transaction commits: a row never points at bytes that
could be lost. A batch that fails or a process killed mid-batch leaves at most a
pack file no row names; garbage collection removes such files (under the
database's write lock, which every batch holds from its first put, so no
batch's pack is ever mistaken for one).

A pack starts with :data:`MAGIC`; the objects follow, raw, back to back. Reads
``pread`` the span the row names and check its digest, so a truncated or
damaged pack is reported (:class:`~infai.store.errors.BlobDigestError` naming
the file and offset), never returned.
"""

from __future__ import annotations

import os
import queue
import secrets
import threading
import time
from collections import OrderedDict
from pathlib import Path

#: objects this large or larger live in packs, smaller ones inline in SQLite
PACK_MIN = 4096
#: the first bytes of every pack file
MAGIC = b"infai-pack 1\n"
#: read descriptors kept open (a removed pack's bytes stay readable through one)
_OPEN_MAX = 32
#: a writer syncs what it wrote so far after this many new bytes (see PackWriter)
EARLY_SYNC = 16 << 20
#: bytes a writer lets wait for its thread before ``append`` blocks
BUDGET = 32 << 20
#: buffers per ``writev`` (Linux's IOV_MAX is 1024)
_IOV = 512


def new_name() -> str:
    """A pack name no other batch (of any process) picks."""
    return f"{time.time_ns():x}-{os.getpid()}-{secrets.token_hex(4)}"


def pack_path(folder: Path, name: str) -> Path:
    """Where the pack ``name`` lives."""
    return folder / f"{name}.pack"


def sync_dir(folder: Path) -> None:
    """Make a new name in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PackWriter:
    """One batch's pack, appended to as the batch puts large objects.

    The bytes are written by a thread of the writer's own (``os.writev``
    releases the GIL), so the disk takes them while the batch goes on reading
    and hashing; at most :data:`BUDGET` bytes wait for it. The batch hands over
    objects in groups (:meth:`append_many`): a hand-over per object made the
    two threads trade the GIL ten thousand times a snapshot, which cost more
    than the writing. Every :data:`EARLY_SYNC` bytes the thread runs
    ``fdatasync``, so the final sync, which the commit waits for, has little
    left to do. A write error is raised by the next append or by :meth:`sync`.
    """

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.name = new_name()
        self.path = pack_path(folder, self.name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        self._fd = os.open(self.path, flags, 0o644)
        self.size = 0
        self._queue: queue.SimpleQueue[list[bytes] | None] = queue.SimpleQueue()
        self._room = threading.Condition()
        self._waiting = 0
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="infai-pack", daemon=True)
        self._thread.start()
        self._stopped = False
        self.append(MAGIC)

    def append(self, data: bytes) -> int:
        """Queue ``data`` for writing; the offset it starts at."""
        return self.append_many([data])[0]

    def append_many(self, datas: list[bytes]) -> list[int]:
        """Queue ``datas`` for writing, back to back; the offset each starts at."""
        if self._error is not None:
            raise self._error
        total = sum(len(d) for d in datas)
        with self._room:
            while self._waiting > BUDGET and self._error is None:
                self._room.wait()
            self._waiting += total
        self._queue.put(datas)
        offsets = []
        at = self.size
        for data in datas:
            offsets.append(at)
            at += len(data)
        self.size = at
        return offsets

    def _write(self, datas: list[bytes]) -> None:
        for start in range(0, len(datas), _IOV):
            views = [memoryview(d) for d in datas[start : start + _IOV] if d]
            while views:
                done = os.writev(self._fd, views)
                while views and done >= len(views[0]):
                    done -= len(views[0])
                    views.pop(0)
                if views and done:
                    views[0] = views[0][done:]

    def _run(self) -> None:
        written = synced = 0
        while (datas := self._queue.get()) is not None:
            total = sum(len(d) for d in datas)
            if self._error is None:
                try:
                    self._write(datas)
                    written += total
                    if written - synced >= EARLY_SYNC:
                        os.fdatasync(self._fd)
                        synced = written
                except OSError as exc:
                    self._error = exc
            with self._room:
                self._waiting -= total
                self._room.notify()

    def _stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._queue.put(None)
            self._thread.join()

    def sync(self) -> None:
        """Wait for the writes, then fsync the pack and its directory (before the commit)."""
        self._stop()
        if self._error is not None:
            raise self._error
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1
        sync_dir(self.folder)

    def discard(self) -> None:
        """The batch failed: stop, close and delete the pack (best effort)."""
        try:
            self._stop()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        finally:
            self.path.unlink(missing_ok=True)


class PackReader:
    """``pread`` of pack spans through a small cache of open descriptors."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, name: str, offset: int, size: int) -> bytes:
        """The ``size`` bytes at ``offset`` of pack ``name`` (fewer if it is short);
        ``FileNotFoundError`` if the pack is gone."""
        with self._lock:
            fd = self._fds.get(name)
            if fd is None:
                fd = os.open(pack_path(self.folder, name), os.O_RDONLY | os.O_CLOEXEC)
                self._fds[name] = fd
                while len(self._fds) > _OPEN_MAX:
                    os.close(self._fds.popitem(last=False)[1])
            else:
                self._fds.move_to_end(name)
            return os.pread(fd, size, offset)

    def forget(self, name: str) -> None:
        """Close the descriptor of a pack being removed."""
        with self._lock:
            fd = self._fds.pop(name, None)
            if fd is not None:
                os.close(fd)

    def close(self) -> None:
        """Close every descriptor."""
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

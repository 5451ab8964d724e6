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
import secrets
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import BinaryIO

#: objects this large or larger live in packs, smaller ones inline in SQLite
PACK_MIN = 4096
#: the first bytes of every pack file
MAGIC = b"infai-pack 1\n"
#: read descriptors kept open (a removed pack's bytes stay readable through one)
_OPEN_MAX = 32


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
    """One batch's pack, appended to as the batch puts large objects."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.name = new_name()
        self.path = pack_path(folder, self.name)
        self._file: BinaryIO = open(self.path, "xb")  # noqa: SIM115 (closed by sync/discard)
        self._file.write(MAGIC)
        self.size = len(MAGIC)

    def append(self, data: bytes) -> int:
        """Write ``data``; the offset it starts at."""
        at = self.size
        self._file.write(data)
        self.size += len(data)
        return at

    def sync(self) -> None:
        """Flush and fsync the pack and its directory (before the commit)."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        sync_dir(self.folder)

    def discard(self) -> None:
        """The batch failed: close and delete the pack (best effort)."""
        try:
            self._file.close()
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

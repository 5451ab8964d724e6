"""The narrow seam between the store and the operating system's write path.

Every byte the store writes, every fsync, rename, truncate and directory change
goes through one :class:`FileIO` object. The default, :class:`OsIO`, calls ``os``
directly. Tests plug in their own: one that records the operation sequence to
replay every power-cut state (the ALICE/SQLite method), one that fails the Nth
fsync with ``EIO``. Reads do not go through the seam: they cannot lose data.

Helpers here (:func:`write_all`, :func:`atomic_write`) encode the two durable
write patterns the store uses: append-and-sync, and temp-file, fsync, rename,
fsync the directory.
"""

from __future__ import annotations

import os


class FileIO:
    """Write-path operations; override methods to observe or fail them."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """``os.open``: a descriptor for the write path (files are created 0644)."""
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        """``os.close``."""
        os.close(fd)

    def write(self, fd: int, data: bytes) -> int:
        """``os.write``: may write less than ``data`` (see :func:`write_all`)."""
        return os.write(fd, data)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        """``os.pwrite`` at ``offset``: may write less than ``data``."""
        return os.pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        """``os.fsync``: data and metadata are durable when it returns."""
        os.fsync(fd)

    def fdatasync(self, fd: int) -> None:
        """``os.fdatasync``: the commit point of an append (data and size, not times)."""
        os.fdatasync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        """``os.ftruncate``: cuts a failed write back out of a chunk."""
        os.ftruncate(fd, length)

    def rename(self, src: str, dst: str) -> None:
        """``os.replace``: atomically replaces ``dst``; durable only after :meth:`fsync_dir`."""
        os.replace(src, dst)

    def unlink(self, path: str) -> None:
        """``os.unlink``."""
        os.unlink(path)

    def mkdir(self, path: str) -> None:
        """``os.mkdir`` (mode 0755; the parent must exist)."""
        os.mkdir(path, 0o755)

    def fsync_dir(self, path: str) -> None:
        """Make the directory's entries durable (creations, renames, removals in it)."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.fsync(fd)
        finally:
            os.close(fd)


OsIO = FileIO
"""The default implementation: plain ``os`` calls."""


def write_all(io: FileIO, fd: int, data: bytes, offset: int | None = None) -> None:
    """Write every byte, looping over short writes (``offset``: use pwrite)."""
    done = 0
    while done < len(data):
        rest = data[done:] if done else data  # no copy unless a write came up short
        n = io.write(fd, rest) if offset is None else io.pwrite(fd, rest, offset + done)
        if n <= 0:
            raise OSError(f"write returned {n}")
        done += n


def write_file(io: FileIO, path: str, data: bytes, *, sync: bool = True) -> None:
    """Create or replace ``path`` with ``data`` and (by default) fsync it."""
    fd = io.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        write_all(io, fd, data)
        if sync:
            io.fsync(fd)
    finally:
        io.close(fd)


def atomic_write(io: FileIO, path: str, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically: temp file, fsync, rename, fsync dir.

    With ``sync=False`` only the rename's atomicity for concurrent readers is kept
    (used for hints that recovery can rebuild).
    """
    tmp = path + ".tmp"
    write_file(io, tmp, data, sync=sync)
    io.rename(tmp, path)
    if sync:
        io.fsync_dir(os.path.dirname(path))

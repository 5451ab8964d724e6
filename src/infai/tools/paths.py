"""Paths a tool is given: resolved once, then acted on through file descriptors.

A tool never trusts a path as given. :func:`resolve` joins it to the working
directory, makes it absolute and resolves every symlink, and only then compares
it with the working directory (itself resolved): ``..``, absolute paths and
symlinks that lead elsewhere are all seen for what they are, outside, which is
a permission question for the policy, not a silent success.

Resolving a path and then opening it by name would leave a window: a symlink
planted in place of a directory between the check and the use would redirect
the read or write. So a tool acts only on *what was resolved*, and never by
name from the filesystem root: it opens the anchor (the working directory for a
path inside it, ``/`` for one the policy allowed outside) and walks the resolved
components below it with ``O_NOFOLLOW`` and ``dir_fd`` (or, where the kernel
has it, one ``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``). The
resolved path has no symlinks left in it, so a symlink met on the way is a
change made since the check: the walk refuses it (:class:`PathChanged`) rather
than follow it. What is read or written then goes through the descriptors:
a file is opened without following a link, non-blocking, and checked with
``fstat`` to be a regular file (:class:`NotRegularFile`: a FIFO, a device or a
socket would hang a read or never end), and a write lands in a temporary file
in the directory already opened and is renamed there (:func:`replace_at`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
#: openat2(2): resolve beneath the directory given, and follow no symlink at all
_RESOLVE_NO_MAGICLINKS, _RESOLVE_NO_SYMLINKS, _RESOLVE_BENEATH = 0x02, 0x04, 0x08
#: the syscall's number where it is known (the generic table: x86-64 and arm64 agree)
_SYS_OPENAT2 = 437 if platform.machine() in ("x86_64", "aarch64") else None


@dataclass(frozen=True, slots=True)
class Resolved:
    """A tool's path made absolute with symlinks resolved, and whether it is inside."""

    path: Path
    inside: bool

    def shown(self, root: Path) -> str:
        """The path as the model should see it: relative when inside."""
        if self.inside:
            return str(self.path.relative_to(root.resolve())) or "."
        return str(self.path)

    def anchored(self, root: Path) -> tuple[Path, tuple[str, ...]]:
        """The directory to start from (the working directory, or ``/`` for a path
        outside it) and the resolved components below it."""
        if self.inside:
            return root.resolve(), self.path.relative_to(root.resolve()).parts
        return Path(self.path.anchor), self.path.parts[1:]


class NulInPath(ValueError):
    """A path with a NUL byte: no file has such a name, and the OS refuses it."""


def resolve(working_dir: Path, given: str) -> Resolved:
    """Resolve ``given`` against ``working_dir``; ``inside`` is False if it leaves it.

    Raises :class:`NulInPath` (a ValueError) for a path with a NUL byte in it.
    """
    if "\0" in given:
        raise NulInPath(f"the path {given!r} has a NUL byte in it")
    root = working_dir.resolve()
    path = (root / given).resolve()  # follows symlinks, collapses ".."
    return Resolved(path, path == root or root in path.parents)


def relative_name(working_dir: Path, path: Path) -> str:
    """How a read predicate names ``path``: relative POSIX inside the working
    directory (``src/app.py``, ``.`` for itself), absolute POSIX outside it."""
    root = working_dir.resolve()
    if path == root:
        return "."
    if root in path.parents:
        return path.relative_to(root).as_posix()
    return path.as_posix()


class PathChanged(OSError):
    """A symlink was met where the resolved path had a directory or a file: the
    path changed after it was checked, and nothing was done through it."""

    def __init__(self, name: str) -> None:
        super().__init__(
            errno.ELOOP,
            f"a symbolic link appeared at {name!r} after the path was checked; not followed",
        )


class NotRegularFile(OSError):
    """The path names a FIFO, a device, a socket or a directory, not a file to read."""

    def __init__(self, kind: str) -> None:
        super().__init__(errno.EINVAL, f"it is {kind}, not a regular file; not read")


def kind_of(mode: int) -> str | None:
    """What a file of this mode is, in words, when it is not a regular file."""
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) else "not a regular file"


# -- openat2, where the kernel has it -------------------------------------------------------


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


_openat2_works: bool | None = None if _SYS_OPENAT2 is not None else False


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _openat2(dir_fd: int, relative: str, flags: int) -> int | None:
    """``openat2`` beneath ``dir_fd`` following no symlink; None where it is missing
    (an old kernel, a seccomp filter, another architecture) or where it met
    something the walk must explain (a symlink, a file where a directory was)."""
    global _openat2_works
    if _openat2_works is False or _SYS_OPENAT2 is None:
        return None
    libc = _libc()
    how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    fd = int(
        libc.syscall(
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(os.fsencode(relative)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
    )
    if fd >= 0:
        _openat2_works = True
        return fd
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) and not _openat2_works:
        _openat2_works = False
        return None
    if err in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR):
        return None  # a symlink, a way out, or a file on the way: the walk says which
    raise OSError(err, os.strerror(err), relative)


# -- walking the resolved components ---------------------------------------------------------


def _step(dir_fd: int, name: str, *, create: bool) -> int:
    """Open directory ``name`` in ``dir_fd`` without following a link (made if asked)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=dir_fd)
        return _step(dir_fd, name, create=False)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(dir_fd, name):
            raise PathChanged(name) from None
        raise


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_dir(anchor: Path, parts: Sequence[str], *, create: bool = False) -> int:
    """A descriptor of directory ``anchor/parts...``, reached without following any
    symlink below ``anchor`` (missing directories made when ``create``)."""
    fd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    if not parts:
        return fd
    try:
        if not create and (found := _openat2(fd, "/".join(parts), _DIR_FLAGS)) is not None:
            return found
        for name in parts:
            step = _step(fd, name, create=create)
            os.close(fd)
            fd = step
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_parent(target: Resolved, root: Path, *, create: bool = False) -> tuple[int, str]:
    """The directory holding ``target`` (opened as :func:`open_dir` does) and its name."""
    anchor, parts = target.anchored(root)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "it is a directory, not a file", str(target.path))
    return open_dir(anchor, parts[:-1], create=create), parts[-1]


def open_regular_at(dir_fd: int, name: str) -> int:
    """Open ``name`` in ``dir_fd`` for reading: not through a link, never blocking,
    and only if it is a regular file (checked before and after opening)."""
    before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    if stat.S_ISLNK(before):
        raise PathChanged(name)
    if (kind := kind_of(before)) is not None:
        raise NotRegularFile(kind)
    fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    try:
        if (kind := kind_of(os.fstat(fd).st_mode)) is not None:
            raise NotRegularFile(kind)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(target: Resolved, root: Path) -> int:
    """A read-only descriptor of the regular file ``target`` names (see :func:`open_regular_at`)."""
    dir_fd, name = open_parent(target, root)
    try:
        return open_regular_at(dir_fd, name)
    finally:
        os.close(dir_fd)


def replace_at(dir_fd: int, name: str, data: bytes) -> None:
    """Replace (or create) ``name`` in ``dir_fd`` with ``data``, atomically.

    The bytes go to a new temporary file in the same directory, are flushed to
    disk, and the temporary file is renamed over ``name`` (both through
    ``dir_fd``), then the directory itself is flushed: a crash at any moment
    leaves the old file or the new one, never a mix, and a symlink put in
    ``name``'s place is replaced, never followed. The old file's permission
    bits are kept; a new file gets the usual ones (after the umask).
    """
    try:
        old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        mode: int | None = stat.S_IMODE(old.st_mode) if stat.S_ISREG(old.st_mode) else None
    except FileNotFoundError:
        mode = None
    temp = f".{name[:200]}.{secrets.token_hex(4)}.tmp"
    # An existing file's bits are set below; until then only its owner may read the text.
    created = 0o600 if mode is not None else 0o666
    fd = os.open(
        temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, created,
        dir_fd=dir_fd,
    )  # fmt: skip
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    with contextlib.suppress(OSError):  # the rename itself is durable once its directory is
        os.fsync(dir_fd)

"""Changing the working directory's paths for a restore, safely, in any direction.

Why a module of its own: :mod:`.restore` decides *what* a restore does (the
plan, the journal, rolling back on recovery); this module is *how* one path is
changed on disk, and the rules that keep that safe whichever way it runs
(applying, undoing a failed step, recovering after a kill):

- every path is reached through directory descriptors opened with
  ``O_NOFOLLOW``: a symlink swapped in for a directory cannot redirect a write
  outside the working directory;
- a file is written to a temporary name beside it, fsynced and renamed over
  the path, never written in place. The name is derived from the path (so
  recovery can find it) and from the restore's *tag*, a random token its
  journal holds before the first change (so no user file plausibly has it);
  and a file by that name is removed only when it is the restore's own: it
  holds a prefix of the bytes the restore was writing there (a link: their
  target), which are in the store. Anything else by that name is not the
  restore's: it is kept and reported, and the path it stands beside is left
  as it is (its temporary name is taken). A mode change of a file with
  other hard links is such a copy too (``fchmod`` would change every link,
  perhaps one outside the working directory);
- before a path is changed, it is checked to still hold what the step expects
  (``now``): a file's ``lstat`` key against the one the last snapshot cached,
  and its bytes hashed again when that key differs or none was cached. A path
  holding something else was changed during the restore (an editor saving, a
  build writing): it is *left as it is* and reported, never overwritten or
  removed; its bytes are on disk and the next snapshot records them. A path
  that already holds what the step wants is done (so every step is
  idempotent, and an undo or a recovery puts back only what the restore
  itself changed).

The window left: the check may hash the file and a write fsyncs its
temporary file first, so right before the rename (or unlink, or ``fchmod``,
on the open file) the path's ``lstat`` key is compared once more with the one
the check saw; a change found then leaves the path too. Only a save landing
between that last ``lstat`` and the rename, two system calls apart, is still
replaced, and its bytes are in no snapshot; closing that would need every
writer to take a lock, and editors take none. (The key is the stat cache's: a
rewrite in place that keeps the size within one tick of the filesystem's
clock looks unchanged to it; a save by rename, as most editors do, is a new
inode and never does.)
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterable
from typing import Literal

from infai.errors import InfaiError
from infai.store.codec import PREFIX
from infai.store.errors import CorruptionError, ObjectNotFound
from infai.store.objects import ObjectStore

from .diff import FileInfo
from .walk import GIT_DIR

Op = Literal["write", "link", "remove", "chmod", "mkdir"]
#: a file's ``lstat`` key as the stat cache keeps it: (mode, size, mtime_ns, ino, ctime_ns)
StatKey = tuple[int, int, int, int, int]
#: what the last snapshot saw at a path: its ``lstat`` key and digest (``None``: not cached)
Known = Callable[[str], tuple[StatKey, str] | None]
#: why a path was left as it is
CHANGED = "changed during the restore"
#: why a file named like one of the restore's temporary files was left
FOREIGN_TMP = "named like a restore's temporary file, but not made by the restore"
#: why a path was left: its temporary name is held by such a file
TMP_TAKEN = "not changed: a file the restore did not make holds its temporary name"
#: one path of a convergence: (path, the state it should hold now, the state wanted)
State = tuple[str, FileInfo | None, FileInfo | None]


class RestoreError(InfaiError):
    """A restore could not be planned or applied (names the path and why)."""


class _TmpTaken(RestoreError):
    """A path's temporary name is held by a file not the restore's (see :data:`TMP_TAKEN`)."""


class _Changed(RestoreError):
    """A path changed after its check, found by the last look before the change
    (see :meth:`_Disk.unchanged`): left as it is (see :data:`CHANGED`)."""


def _op(before: FileInfo | None, after: FileInfo | None) -> Op:
    if after is None:
        return "remove"
    if after.type == "dir":
        return "mkdir"
    if before is not None and before.type == after.type == "file" and before.digest == after.digest:
        return "chmod"
    return "link" if after.type == "link" else "write"


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


#: errors opening a parent that mean the path below it cannot exist
_ABSENT = (errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG)


def _tmp_name(name: str, tag: str = "") -> str:
    """The temporary name beside ``name`` of the restore tagged ``tag`` (``""``:
    a journal written before restores had tags)."""
    hashed = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    return f".infai-restore-{tag}-{hashed}.tmp" if tag else f".infai-restore-{hashed}.tmp"


def _fsync_dir(fd: int) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot sync a directory
        os.fsync(fd)


class _Disk:
    """Writes under one root through directory descriptors, never following links.

    ``known``: what the last snapshot saw at a path (see :data:`Known`), so
    checking that an unchanged file still holds it costs an ``lstat``; ``tag``:
    the restore's, in its temporary names (see :func:`_tmp_name`).
    """

    def __init__(
        self, root: str, objects: ObjectStore, known: Known | None = None, tag: str = ""
    ) -> None:
        self.root = root
        self.objects = objects
        self.known = known
        self.tag = tag
        self.umask = _umask()
        self.dirty: set[str] = set()  # directories whose entries changed, synced once
        #: the ``lstat`` key each path had at its last :meth:`holds` (None: absent)
        self.checked: dict[str, StatKey | None] = {}

    def sync(self) -> None:
        """Make the renames and unlinks durable: fsync each changed directory once."""
        for d in sorted(self.dirty):
            try:
                fd = os.open(os.path.join(self.root, d), os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                continue  # pruned since
            try:
                _fsync_dir(fd)
            finally:
                os.close(fd)
        self.dirty.clear()

    def _parent(self, path: str, create: bool) -> int | None:
        """An fd of ``path``'s directory (the caller closes it); ``None`` if it is
        missing and not ``create``."""
        parts = path.split("/")
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts[:-1]:
                if part in ("", ".", "..", GIT_DIR):
                    raise RestoreError(f"{self.root}: refusing the path {path!r}")
                flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                try:
                    nxt = os.open(part, flags, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        return None
                    os.mkdir(part, 0o777, dir_fd=fd)
                    nxt = os.open(part, flags, dir_fd=fd)
                except (NotADirectoryError, OSError) as exc:
                    if not create and exc.errno in _ABSENT:
                        # a file or link stands where a directory was, or no
                        # directory can have that name: nothing below it exists
                        # (removing it is done; an undo can go on)
                        os.close(fd)
                        return None
                    raise RestoreError(
                        f"{self.root}: {path!r}: {part!r} is not a directory ({exc.strerror})"
                    ) from exc
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def holds(self, path: str, info: FileInfo | None) -> bool:
        """Whether ``path`` holds ``info`` now: the same type, executable bit and
        bytes (``None``: nothing is there, or nothing can be, its parent being
        no directory; a ``dir``: a directory, empty or not)."""
        self.checked[path] = None
        pfd = self._parent(path, create=False)
        if pfd is None:
            return info is None
        name = path.rsplit("/", 1)[-1]
        try:
            try:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENAMETOOLONG):
                    return info is None
                raise
            self.checked[path] = _key(st)
            if info is None:
                return False
            if info.type == "dir":
                return stat.S_ISDIR(st.st_mode)
            if info.type == "link":
                if not stat.S_ISLNK(st.st_mode):
                    return False
                target = os.readlink(os.fsencode(name), dir_fd=pfd)
                return PREFIX + hashlib.sha256(target).hexdigest() == info.digest
            if not stat.S_ISREG(st.st_mode) or bool(st.st_mode & 0o100) != info.executable:
                return False
            # (not info.size: a tree's sizes are its word, only digests are checked)
            seen = self.known(path) if self.known is not None else None
            if seen is not None and seen[0] == _key(st):
                return seen[1] == info.digest
            return _digest(pfd, name) == info.digest
        finally:
            os.close(pfd)

    def unchanged(self, pfd: int, name: str, path: str, st: os.stat_result | None = None) -> bool:
        """Whether ``path`` (``name`` in ``pfd``; ``st``: its ``fstat`` if open) has
        the ``lstat`` key its last :meth:`holds` saw (or is still absent): the last
        look before it is changed, after the slow part (hashing it, writing and
        syncing the temporary file), so a save landing meanwhile is left, not
        replaced. A path never checked is taken as unchanged."""
        if path not in self.checked:
            return True
        if st is None:
            try:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENAMETOOLONG):
                    return self.checked[path] is None
                raise
        return self.checked[path] == _key(st)

    def put(self, info: FileInfo) -> None:
        """Make ``info.path`` hold ``info`` (temp + fsync + rename); raises
        :class:`_Changed` (the temp removed) if the path changed since its check."""
        data = self.objects.get(info.digest)
        pfd = self._parent(info.path, create=True)
        assert pfd is not None
        name = info.path.rsplit("/", 1)[-1]
        tmp = _tmp_name(name, self.tag)
        try:
            if info.type == "link" and (not data or b"\0" in data):
                # no snapshot makes one: a crafted tree
                raise RestoreError(
                    f"{self.root}: {info.path!r}: the snapshot's link target "
                    f"{data[:80]!r} is not a valid target"
                )
            try:  # never over a file by that name: :func:`converge` removed the restore's own
                if info.type == "link":
                    os.symlink(data, tmp, dir_fd=pfd)
                else:
                    self._write(pfd, name, tmp, data, info.executable)
            except FileExistsError:
                raise _TmpTaken(f"{self.root}: {info.path!r}: {TMP_TAKEN}") from None
            try:
                if not self.unchanged(pfd, name, info.path):
                    raise _Changed(f"{self.root}: {info.path!r}: {CHANGED}")
                try:
                    os.replace(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
                except IsADirectoryError:
                    os.rmdir(name, dir_fd=pfd)  # an empty directory left in the way
                    os.replace(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
            except Exception:
                with contextlib.suppress(OSError):  # ours: made just now
                    os.unlink(tmp, dir_fd=pfd)
                self.dirty.add(info.path.rpartition("/")[0])
                raise
            self.dirty.add(info.path.rpartition("/")[0])
        finally:
            os.close(pfd)

    def _mode(self, pfd: int, name: str, executable: bool) -> int:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            perm = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
        except FileNotFoundError:
            perm = None
        if perm is None:
            perm = 0o666 & ~self.umask
        if executable:
            return perm | ((perm & 0o444) >> 2) | 0o100
        return perm & ~0o111

    def _write(self, pfd: int, name: str, tmp: str, data: bytes, executable: bool) -> None:
        mode = self._mode(pfd, name, executable)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o600, dir_fd=pfd)  # (one by that name: FileExistsError)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
        except Exception:
            with contextlib.suppress(OSError):  # ours, made just now (a full disk)
                os.unlink(tmp, dir_fd=pfd)
            raise

    def chmod(self, info: FileInfo) -> None:
        """Set the executable bit of ``info.path`` as ``info`` says: in place, or,
        if the file has other hard links, by a fresh copy renamed over it (so the
        other links, perhaps outside the working directory, keep their mode)."""
        pfd = self._parent(info.path, create=False)
        if pfd is None:
            raise RestoreError(f"{self.root}: {info.path!r} vanished before its mode was set")
        name = info.path.rsplit("/", 1)[-1]
        try:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(name, flags, dir_fd=pfd)
            try:
                st = os.fstat(fd)
                if not self.unchanged(pfd, name, info.path, st):
                    raise _Changed(f"{self.root}: {info.path!r}: {CHANGED}")
                linked = st.st_nlink > 1
                if not linked:
                    os.fchmod(fd, self._mode(pfd, name, info.executable))
            finally:
                os.close(fd)
        finally:
            os.close(pfd)
        if linked:
            self.put(info)  # its bytes are info's: the caller checked them

    def remove(self, path: str) -> None:
        """Remove the file or link at ``path``; absent is fine."""
        pfd = self._parent(path, create=False)
        if pfd is None:
            return
        name = path.rsplit("/", 1)[-1]
        try:
            if not self.unchanged(pfd, name, path):
                raise _Changed(f"{self.root}: {path!r}: {CHANGED}")
            try:
                os.unlink(name, dir_fd=pfd)
            except FileNotFoundError:
                pass
            except IsADirectoryError:
                pass  # a directory is not a planned file: left alone
            except OSError as exc:
                if exc.errno != errno.ENAMETOOLONG:
                    raise  # (a name no file can have, from a crafted tree: absent)
            self.dirty.add(path.rpartition("/")[0])
        finally:
            os.close(pfd)

    def mkdir(self, path: str) -> None:
        """Make the empty directory ``path`` (and its parents); one there is fine."""
        pfd = self._parent(path, create=True)
        assert pfd is not None
        name = path.rsplit("/", 1)[-1]
        try:
            try:
                os.mkdir(name, 0o777, dir_fd=pfd)
                self.dirty.add(path.rpartition("/")[0])
            except FileExistsError:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    raise RestoreError(
                        f"{self.root}: {path!r}: something that is not a directory is in the way"
                    ) from None
        finally:
            os.close(pfd)

    def rmdir(self, path: str) -> None:
        """Remove the directory ``path`` if it is empty (one holding something,
        or gone, is left as it is)."""
        pfd = self._parent(path, create=False)
        if pfd is None:
            return
        try:
            os.rmdir(path.rsplit("/", 1)[-1], dir_fd=pfd)
            self.dirty.add(path.rpartition("/")[0])
        except OSError:
            pass
        finally:
            os.close(pfd)

    def drop_tmp(self, path: str, sides: Iterable[FileInfo | None] = ()) -> str | None:
        """Remove the temporary file a killed write of this restore may have left
        beside ``path``, if it is the restore's own: a prefix of the bytes of one
        of ``sides`` (the states the path goes between), or a link to one's
        target. Anything else by that name is kept: its path is returned."""
        try:
            pfd = self._parent(path, create=False)
        except RestoreError:
            return None
        if pfd is None:
            return None
        tmp = _tmp_name(path.rsplit("/", 1)[-1], self.tag)
        try:
            try:
                st = os.stat(tmp, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                return None
            if not any(self._ours(pfd, tmp, st, side) for side in sides if side is not None):
                parent = path.rpartition("/")[0]
                return f"{parent}/{tmp}" if parent else tmp
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=pfd)
            self.dirty.add(path.rpartition("/")[0])
            return None
        finally:
            os.close(pfd)

    def _ours(self, pfd: int, tmp: str, st: os.stat_result, side: FileInfo) -> bool:
        """Whether the temporary file ``tmp`` (``st``: its ``lstat``) holds what a
        write of ``side`` puts there: all its bytes or their first part (a killed
        write), or, for a link, its target. Its bytes are then in the store."""
        if side.type == "dir":
            return False
        try:
            data = self.objects.get(side.digest)
        except (ObjectNotFound, CorruptionError):
            return False  # nothing to compare with: not known to be the restore's
        if side.type == "link":
            return stat.S_ISLNK(st.st_mode) and os.readlink(os.fsencode(tmp), dir_fd=pfd) == data
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size > len(data):
            return False
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, dir_fd=pfd)
        except OSError:
            return False
        try:
            got = bytearray()
            while len(got) <= len(data) and (chunk := os.read(fd, 1 << 20)):
                got += chunk
        finally:
            os.close(fd)
        return data.startswith(got)

    def prune(self, paths: Iterable[str]) -> None:
        """Remove directories above ``paths`` that are empty now (deepest first)."""
        dirs: set[str] = set()
        for path in paths:
            parts = path.split("/")[:-1]
            dirs.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
        for d in sorted(dirs, key=lambda p: -p.count("/")):
            pfd = self._parent(d, create=False)
            if pfd is None:
                continue
            try:
                os.rmdir(d.rsplit("/", 1)[-1], dir_fd=pfd)
                self.dirty.add(d.rpartition("/")[0])
            except OSError:
                pass  # not empty (or gone): kept
            finally:
                os.close(pfd)


def _key(st: os.stat_result) -> StatKey:
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def _digest(pfd: int, name: str) -> str:
    """The digest of the regular file ``name`` in ``pfd`` ("" if it is no longer one)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=pfd)
    except OSError:
        return ""  # swapped for a link (or gone) since its lstat
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return PREFIX + h.hexdigest()
    finally:
        os.close(fd)


def _ancestors(paths: Iterable[str]) -> set[str]:
    """Every directory above ``paths`` (``a/b/c`` → ``a``, ``a/b``)."""
    out: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        out.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
    return out


def converge(
    disk: _Disk, states: list[State], left: dict[str, str] | None = None
) -> dict[str, str]:
    """Make each path hold its wanted state: ``(path, now, wanted)``, ``None`` for
    absent; the paths left as they are, path to why (also added to ``left``).

    A path is changed only if it holds ``now``; one already holding ``wanted``
    is done; one holding anything else changed during the restore and is left
    (see the module docstring). Removals first and empty directories pruned, so
    a file may replace a directory and back; then writes and recorded empty
    directories made, in path order; every step is idempotent.
    """
    left = {} if left is None else left
    for path, now, wanted in states:
        foreign = disk.drop_tmp(path, (now, wanted))
        if foreign is not None:
            left[foreign] = FOREIGN_TMP
    gone = {path: now for path, now, wanted in states if wanted is None}
    # directories something is written below (one in the way of its removal is not news)
    filled = _ancestors(path for path, _, wanted in states if wanted is not None)
    for path in sorted(gone, reverse=True):
        now = gone[path]
        if now is not None and now.type == "dir":
            disk.rmdir(path)  # only if empty: a directory holding files stays
            if path not in filled and not disk.holds(path, None):
                left[path] = CHANGED  # filled, or replaced, meanwhile
        elif disk.holds(path, now):
            _change(disk, path, now, None, left)
        elif not disk.holds(path, None):
            left[path] = CHANGED
    disk.prune(gone)
    for path, now, wanted in sorted(states, key=lambda s: s[0]):
        if wanted is None:
            continue
        if not disk.holds(path, now):
            if not disk.holds(path, wanted):
                left[path] = CHANGED
            continue
        _change(disk, path, now, wanted, left)
    disk.sync()
    return left


def _change(
    disk: _Disk, path: str, now: FileInfo | None, wanted: FileInfo | None, left: dict[str, str]
) -> None:
    """Make ``path``, checked to hold ``now``, hold ``wanted``; or leave it (in
    ``left``, why) if its temporary name is taken or it changed since the check."""
    op = _op(now, wanted)
    try:
        if wanted is None:
            disk.remove(path)
        elif op == "chmod":
            disk.chmod(wanted)
        elif op == "mkdir":
            disk.mkdir(wanted.path)
        else:
            disk.put(wanted)
    except _TmpTaken:
        left[path] = TMP_TAKEN
    except _Changed:
        left[path] = CHANGED

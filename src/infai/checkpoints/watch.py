"""A change watcher: which directories may have changed since the last snapshot.

Model, in prose: walking ten thousand files with ``lstat`` to learn that one
changed costs far more than a warm snapshot's budget, so, like git's fsmonitor,
the :class:`~.snapshot.Snapshotter` keeps a Linux inotify instance for its
lifetime. Every directory a walk enters is watched *before* it is listed, so any
change after the listing queues an event naming that directory (a file created,
deleted, written, chmod-ed or renamed in it). A snapshot drains the queue and
re-examines only the directories with events (and their ancestors, whose trees
embed theirs); every other directory keeps its cached tree without a syscall.
Events also name the entry they are about: in a re-examined directory, a cached
file no event names keeps its cache entry without an ``lstat`` (an event about
the directory itself, with no name, has every entry looked at).

Anything that makes the answer doubtful turns the watcher's answer into "walk
everything": the kernel's queue overflowed (``IN_Q_OVERFLOW``), a directory was
renamed (its watch would follow it to a path it no longer names), a watch could
not be added (``ENOSPC``: the user's ``max_user_watches`` limit), one inode seen
under two paths (a bind mount inside the tree), or no inotify at all (not Linux).
Events are only about the paths through which a change was made: a write through
a hard link outside the tree, or into a shared ``mmap``, is not seen (as with
git's fsmonitor). Commands run under bubblewrap write to the same inodes through
bind mounts, so their changes are seen.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import sys

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

#: what a watched directory reports: any change to its entries or their contents
MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
_HEADER = struct.Struct("iIII")
_NO_NAMES: set[str] = set()


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


class Watcher:
    """One inotify instance over a working directory's directories (by prefix:
    ``""`` the root, ``"a/b/"`` below it, as the stat cache names them).

    ``ok`` is false once the watcher can no longer vouch for anything (it is
    then closed and every snapshot walks everything).
    """

    def __init__(self) -> None:
        self._libc = _libc()
        self._fd = -1
        if self._libc is not None:
            self._fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        self.ok = self._fd >= 0
        self._by_wd: dict[int, str] = {}
        self.watched: dict[str, int] = {}
        #: per directory with events at the last :meth:`drain`, the names they
        #: were about (``None``: an event about the directory itself)
        self.names: dict[str, set[str] | None] = {}

    def close(self) -> None:
        """Stop watching (idempotent); the watcher vouches for nothing afterwards."""
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = -1
        self.ok = False
        self._by_wd.clear()
        self.watched.clear()

    def watch(self, path: str, prefix: str) -> None:
        """Watch the directory ``path`` (named ``prefix``) before it is listed."""
        if not self.ok or prefix in self.watched:
            return
        assert self._libc is not None
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), MASK)
        if wd < 0:
            # ENOSPC: the watch limit; ENOENT/ENOTDIR: gone or swapped meanwhile
            # (the walk copes with that itself); either way, trust nothing.
            self.close()
            return
        if self._by_wd.get(wd, prefix) != prefix:
            self.close()  # one directory under two names (a bind mount): doubt
            return
        self._by_wd[wd] = prefix
        self.watched[prefix] = wd

    def drain(self) -> set[str] | None:
        """The prefixes of directories with events since the last drain, or
        ``None`` if the answer is "anything may have changed" (see the module)."""
        self.names = {}
        if not self.ok:
            return None
        dirty: set[str] = set()
        doubt = False
        while True:
            try:
                buf = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self.close()
                return None
            if not buf:
                break
            doubt = self._parse(buf, dirty) or doubt
        if doubt:
            return None
        return dirty

    def _parse(self, buf: bytes, dirty: set[str]) -> bool:
        """Mark each event's directory dirty and note the name it is about;
        whether any event means doubt."""
        doubt = False
        at = 0
        names = self.names
        while at + _HEADER.size <= len(buf):
            wd, mask, _cookie, length = _HEADER.unpack_from(buf, at)
            name = buf[at + _HEADER.size : at + _HEADER.size + length].rstrip(b"\0")
            at += _HEADER.size + length
            if mask & IN_Q_OVERFLOW:
                doubt = True
                continue
            prefix = self._by_wd.get(wd)
            if mask & IN_IGNORED:
                if prefix is not None:
                    del self._by_wd[wd]
                    if self.watched.get(prefix) == wd:
                        del self.watched[prefix]
                continue
            if prefix is None:
                continue  # a watch already dropped
            if mask & IN_MOVE_SELF or (mask & IN_ISDIR and mask & (IN_MOVED_FROM | IN_MOVED_TO)):
                doubt = True  # a renamed directory's watches name its old path
            dirty.add(prefix)
            known = names.get(prefix, _NO_NAMES)
            if not name:
                names[prefix] = None
            elif known is not None:
                if known is _NO_NAMES:
                    known = names[prefix] = set()
                known.add(os.fsdecode(name))
        return doubt

    def forget_all(self) -> None:
        """Drop every watch but keep the instance (after doubt: the next walk
        watches every directory it enters afresh)."""
        if not self.ok:
            return
        assert self._libc is not None
        for wd in list(self._by_wd):
            self._libc.inotify_rm_watch(self._fd, wd)
        self._by_wd.clear()
        self.watched.clear()
        self.drain()  # the IN_IGNORED events of the removals

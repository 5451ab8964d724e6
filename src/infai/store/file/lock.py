"""One writer per session across processes: an exclusive ``flock`` on ``LOCK``.

The lock is held by an open file description, so the kernel releases it when the
writer's process dies, even by SIGKILL: a crash never leaves a stale lock. The
holder writes its pid into the file so a waiting writer can say who it waits for.
Readers never take the lock.

The file's content while held (:func:`encode_holder`): the holder's pid on the
first line and, once the session is open for an agent (the store's open mark,
:func:`record_dir`), a second line: the directory its tools work in, as a JSON
string (escaped, so any path is one ASCII line), the pid line then padded with
spaces to 32 bytes (what an older infai reads as the pid). It answers "which open
sessions may be writing in this directory" for a session that names no working
directory (an imported one works where it is opened). An older infai wrote the
pid line only: that reads as a holder recording no directory. The content is a
live hint for a warning, not data: a line that does not parse (read while the
holder rewrites it) reads as none recorded.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import WriterLocked

POLL_SECONDS = 0.02
#: the pid line's length before a directory line (what an older infai reads as the pid)
PID_LINE = 32
#: how much of the file :func:`held_dir` reads (a path of PATH_MAX bytes, escaped)
HOLDER_READ = 64 * 1024


def encode_holder(pid: int, workdir: str | None = None) -> bytes:
    """The lock file's content: ``pid`` and, if given, ``workdir`` as a JSON line;
    the pid line then padded with spaces to :data:`PID_LINE` bytes, since an older
    infai takes the file's first 32 bytes, stripped, for the holder's pid."""
    if workdir is None:
        return f"{pid}\n".encode()
    return f"{pid:<{PID_LINE - 1}}\n{json.dumps(workdir)}\n".encode()


def decode_dir(content: bytes) -> str | None:
    """The directory the holder recorded in ``content`` (None: none, as an older
    infai's pid-only file, or a line that does not parse: see the module's prose)."""
    lines = content.split(b"\n")
    if len(lines) < 3 or not lines[1]:  # a recorded line ends with its newline
        return None
    try:
        found = json.loads(lines[1])
    except ValueError:
        return None
    return found if isinstance(found, str) else None


class WriterLock:
    """An acquired writer lock; :meth:`release` (or process exit) frees it."""

    def __init__(
        self, path: Path, timeout: float, on_wait: Callable[[str], None] | None = None
    ) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + max(0.0, timeout)
        told = on_wait is None
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                busy = f"session {path.parent.name} is being written by another process"
                if time.monotonic() >= deadline:
                    why = f"{busy}{self._holder()}; gave up after {timeout:g}s"
                    os.close(self._fd)
                    raise WriterLocked(why) from None
                if not told and on_wait is not None:
                    on_wait(f"{busy}{self._holder()}; waiting up to {timeout:g}s")
                    told = True
                time.sleep(POLL_SECONDS)
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, encode_holder(os.getpid()), 0)

    def _holder(self) -> str:
        """`` (pid N)`` of the holder, as it wrote it (its first line), or nothing."""
        first = os.pread(self._fd, 32, 0).split(b"\n", 1)[0]
        holder = first.decode(errors="replace").strip()
        return f" (pid {holder})" if holder else ""

    def release(self) -> None:
        """Clear the pid and unlock (idempotent); a waiting writer may then take it."""
        if self._fd >= 0:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def lock_held(path: Path) -> bool:
    """Whether some process holds the writer lock at ``path`` now (asked with a
    shared try-lock that is dropped at once; a missing file: no)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops a lock we may have taken
    return False


def record_dir(path: Path, workdir: str | None) -> None:
    """Write the holder's pid and ``workdir`` (None: none) into the lock file at
    ``path``, which this process holds (the caller's to know): one write of the
    whole content at the start, then the file cut to its length (never cut to
    nothing first), so a reader in between sees at worst the old directory a
    moment longer, or a line that does not parse (:func:`decode_dir`: none)."""
    data = encode_holder(os.getpid(), workdir)
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def held_dir(path: Path) -> tuple[bool, str | None]:
    """Whether some process holds the lock at ``path`` now, and the directory it
    recorded (:func:`record_dir`; None: none). The content is read only when held."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False, None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True, decode_dir(os.pread(fd, HOLDER_READ, 0))
        except OSError:
            return False, None
        return False, None
    finally:
        os.close(fd)  # closing drops a lock we may have taken


class DirMark:
    """The directory store's open mark with a directory: ``workdir`` recorded in
    the lock file its writer holds (:func:`record_dir`), until :meth:`release`
    writes the pid alone again, if that writer (``still_held`` says) still holds
    it; once released, the next holder's own content replaces it anyway."""

    def __init__(self, path: Path, workdir: str, still_held: Callable[[], bool]) -> None:
        self._path: Path | None = path
        self._still_held = still_held
        record_dir(path, workdir)

    def release(self) -> None:
        """Clear the recorded directory (idempotent)."""
        path, self._path = self._path, None
        if path is not None and self._still_held():
            record_dir(path, None)

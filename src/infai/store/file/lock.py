"""One writer per session across processes: an exclusive ``flock`` on ``LOCK``.

The lock is held by an open file description, so the kernel releases it when the
writer's process dies, even by SIGKILL: a crash never leaves a stale lock. The
holder writes its pid into the file so a waiting writer can say who it waits for.
Readers never take the lock.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import WriterLocked

POLL_SECONDS = 0.02


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
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def _holder(self) -> str:
        """`` (pid N)`` of the holder, as it wrote it, or nothing."""
        holder = os.pread(self._fd, 32, 0).decode(errors="replace").strip()
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

"""Words for a long snapshot: what the user sees while a first snapshot hashes.

Model, in prose: the first snapshot of a large working directory reads and
hashes every file (seconds for a few hundred megabytes), and a session that
says nothing meanwhile looks hung. :class:`SnapshotNotices` is the progress
callback a snapshot takes (:meth:`.Snapshotter.snapshot`, called with files
seen and bytes hashed a few times a second): it stays silent for the first
:data:`QUIET_S` seconds (a warm snapshot takes milliseconds and must not chatter),
then says where the snapshot is at most every :data:`EVERY_S` seconds through
``say`` (the agent session publishes it as a notice). It runs in the
snapshot's thread: ``say`` must be safe to call from there.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: a snapshot running this long starts to say where it is
QUIET_S = 1.0
#: and says it again at most this often
EVERY_S = 1.0


def progress_text(workdir: str, files: int, hashed: int) -> str:
    """``files: snapshot of /path: 4,000 files, 80 MB read…`` (the path as text,
    made inert by whoever prints it)."""
    return f"files: snapshot of {workdir}: {files:,} files, {hashed / 1e6:,.0f} MB read…"


class SnapshotNotices:
    """A snapshot's progress callback that says, through ``say``, where a long
    snapshot is (see the module docstring); ``clock`` is for tests."""

    def __init__(
        self,
        workdir: str,
        say: Callable[[str], object],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.workdir = workdir
        self._say = say
        self._clock = clock
        self._next = clock() + QUIET_S
        #: how many notices were said
        self.said = 0

    def __call__(self, files: int, hashed: int) -> None:
        """Told by the snapshot; says a notice if it is time to."""
        now = self._clock()
        if now < self._next:
            return
        self._next = now + EVERY_S
        self.said += 1
        self._say(progress_text(self.workdir, files, hashed))

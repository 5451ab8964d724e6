"""Where things live under the infai home, and which names are acceptable.

::

    <home>/sessions/<session-id>/
        chunks/000000.jsonl ...   append-only event lines (the truth)
        blobs/<sha256-hex>        large records, content-addressed
        index.jsonl               fixed-width entries, one per event, by sequence number
        session.json              metadata, rewritten atomically
        HEAD                      the active tip, a fixed-width hint rebuilt from the log
        LOCK                      the writer's OS lock (flock); holds the writer's pid

``<home>/damaged/<session-id>.json``, beside the sessions and never inside one
(a check changes nothing of what it checks), is left by a check that found
damage: appending to that session is then refused.

``<home>`` is the directory the store was opened on (see :mod:`infai.store.home`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_CHUNK_RE = re.compile(r"^(\d{6})\.jsonl$")


def chunk_name(number: int) -> str:
    """The file name of chunk ``number`` (zero-padded, so names sort in order)."""
    return f"{number:06d}.jsonl"


def chunk_number(name: str) -> int | None:
    """The number in a chunk file name; None for any other name (temp files, strays)."""
    match = _CHUNK_RE.match(name)
    return int(match.group(1)) if match else None


class SessionPaths:
    """The files of one session directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.chunks = root / "chunks"
        self.blobs = root / "blobs"
        self._blobs = str(self.blobs)
        self.index = root / "index.jsonl"
        self.meta = root / "session.json"
        self.head = root / "HEAD"
        self.head_tmp = root / "HEAD.tmp"
        self.lock = root / "LOCK"
        #: the note a check leaves on finding damage (outside the session's own files)
        self.damaged = root.parent.parent / "damaged" / f"{root.name}.json"

    def chunk(self, number: int) -> Path:
        """Where chunk ``number`` lives (whether or not it exists)."""
        return self.chunks / chunk_name(number)

    def blob(self, digest: str) -> Path:
        """Where the blob of ``digest`` (``sha256:`` prefix optional) lives."""
        return self.blobs / digest.removeprefix("sha256:")

    def blob_file(self, digest: str) -> str:
        """:meth:`blob` as a plain string (cheaper on the resume path)."""
        return os.path.join(self._blobs, digest.removeprefix("sha256:"))

    def chunk_numbers(self) -> list[int]:
        """Chunk numbers present on disk, in order."""
        try:
            names = os.listdir(self.chunks)
        except FileNotFoundError:
            return []
        return sorted(n for n in map(chunk_number, names) if n is not None)

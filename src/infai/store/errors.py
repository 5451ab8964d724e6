"""Every error the session store raises, in one tree.

::

    InfaiError (infai.errors)           the root of everything infai raises on purpose
    └── StoreError                      base class; catch this to catch them all
        ├── InvalidInput (ValueError)   bad id, unknown kind, malformed record; nothing written
        ├── SessionNotFound (KeyError)  no session with that id under this home
        ├── EventNotFound (KeyError)    no event with that id in the session
        ├── SessionExists               import or create would overwrite a session
        ├── WriterLocked                another process holds the session's writer lock
        ├── HeadConflict                (database) another writer moved HEAD first; retry
        ├── SessionBusy                 (database) another process runs a turn in the session
        ├── BackendUnavailable          (database) the server cannot be reached or refuses
        ├── UnsupportedFormat           a session written by a newer infai (upgrade to open it)
        ├── StoreIOError (OSError)      a write or fsync failed; the writer refuses more writes
        └── CorruptionError             bytes on disk fail their checksum or do not parse
            └── BlobDigestError         a blob's content does not match its SHA-256 name

Corruption always names the file and the byte offset where it was found.

``InvalidInput`` stays a ``ValueError``, ``SessionNotFound`` and ``EventNotFound``
``KeyError``s and ``StoreIOError`` an ``OSError`` for callers (and tests) that
catch the builtin; shells catch :class:`StoreError` (or ``InfaiError``), never
the builtins, as "bad input".
"""

from __future__ import annotations

from pathlib import Path

from infai.errors import InfaiError


class StoreError(InfaiError):
    """Base class of all session store errors."""


class InvalidInput(StoreError, ValueError):
    """The caller passed something the store cannot accept; nothing was changed."""


class SessionNotFound(StoreError, KeyError):
    """No session with this id exists under the store's home."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = session_id

    def __str__(self) -> str:
        return f"no session {self.session_id}"


class EventNotFound(StoreError, KeyError):
    """No event with this id exists in the session."""

    def __init__(self, event_id: str, session_id: str = "") -> None:
        super().__init__(event_id)
        self.event_id = event_id
        self.session_id = session_id

    def __str__(self) -> str:
        where = f" in session {self.session_id}" if self.session_id else ""
        return f"no event {self.event_id}{where}"


class ObjectNotFound(StoreError, KeyError):
    """No store-wide object (file content, tree, manifest) has this digest."""

    def __init__(self, digest: str) -> None:
        super().__init__(digest)
        self.digest = digest

    def __str__(self) -> str:
        return f"no object {self.digest} in the store (removed by gc, or never written)"


class SessionExists(StoreError):
    """A session with this id already exists."""


class WriterLocked(StoreError):
    """Another writer holds the session's lock and did not release it in time."""


class HeadConflict(StoreError):
    """Another writer appended to the session first: this append changed nothing.

    The writer has reloaded HEAD; deciding again and retrying is safe.
    """


class SessionBusy(StoreError):
    """Another process holds the session's turn lease (a turn or a compaction runs
    there); nothing was started. Wait for it to finish, or cancel it where it runs."""


class BackendUnavailable(StoreError):
    """The database cannot be reached, or refused what was asked of it."""


class GcRefused(StoreError):
    """Garbage collection removed nothing: a session or a snapshot tree it would
    have to read cannot be read, so what it reaches cannot be known."""


class UnsupportedFormat(StoreError):
    """The session's format version is newer than this infai understands."""


class StoreIOError(StoreError, OSError):
    """A write, fsync or rename failed.

    The writer that saw it is poisoned: it refuses every further write until the
    session is reopened from disk, because after a failed fsync the page cache
    may no longer match the disk (an fsync is never retried).
    """


class CorruptionError(StoreError):
    """Bytes on disk are not what the store wrote: named by file and byte offset."""

    def __init__(self, path: Path | str, offset: int, detail: str) -> None:
        self.path = str(path)
        self.offset = offset
        self.detail = detail
        super().__init__(f"{self.path}: offset {offset}: {detail}")


class BlobDigestError(CorruptionError):
    """A blob's bytes do not hash to the digest that names them."""

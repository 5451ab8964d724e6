"""Store tunables, shared by the store and its writers."""

from __future__ import annotations

from .errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Literal


class StoreOptions:
    """Tunables; the defaults suit an interactive agent on a local disk.

    - ``chunk_size``: a chunk is closed and the next one started at this size
    - ``blob_threshold``: records whose JSON exceeds this many bytes become blobs
    - ``durability``: "fast", one fsync per append; "strict", the design's four
    - ``index_sync_interval``: fsync the index after this many unsynced entries
      (bounds the work of recovery)
    - ``lock_timeout``: seconds to wait for a session another process holds: the
      directory store's writer lock (unset: :data:`DEFAULT_LOCK_TIMEOUT`), a
      database's turn lease (unset: none, a busy session answers at once)
    - ``on_wait``: told at once, in words, when a writer starts waiting for a lock
      another process holds (whom it waits for, for how long), so a command that
      waits is never silent
    """

    __slots__ = (
        "blob_threshold",
        "chunk_size",
        "durability",
        "index_sync_interval",
        "lock_timeout",
        "on_wait",
    )

    #: seconds a directory store's writer waits for another's lock, unless told
    DEFAULT_LOCK_TIMEOUT = 10.0

    def __init__(
        self,
        *,
        chunk_size: int = 4 * 1024 * 1024,
        blob_threshold: int = 16 * 1024,
        durability: Literal["fast", "strict"] = "fast",
        index_sync_interval: int = 64,
        lock_timeout: float | None = None,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        if durability not in ("fast", "strict"):
            raise InvalidInput(f"durability must be 'fast' or 'strict', not {durability!r}")
        if chunk_size < 1 or blob_threshold < 0 or index_sync_interval < 1:
            raise InvalidInput("chunk_size and index_sync_interval must be positive")
        self.chunk_size = chunk_size
        self.blob_threshold = blob_threshold
        self.durability = durability
        self.index_sync_interval = index_sync_interval
        if lock_timeout is not None and lock_timeout < 0:
            raise InvalidInput(f"lock_timeout must not be negative, not {lock_timeout!r}")
        self.lock_timeout = lock_timeout
        self.on_wait = on_wait

    def lock_wait(self, default: float) -> float:
        """Seconds to wait for a lock: ``lock_timeout`` if set, else the backend's ``default``."""
        return default if self.lock_timeout is None else self.lock_timeout

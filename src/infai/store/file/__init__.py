"""The directory backend: a home directory of sessions, each a directory of its own.

Storage model, in prose: a session is a directory. Events are appended as
checksummed JSON lines to numbered chunk files (:mod:`.format`, :mod:`.chunks`);
a record larger than the blob threshold is stored once under ``blobs/`` by its
SHA-256 (:mod:`.blobs`); a fixed-width index finds any event by sequence number
and HEAD names the newest event. One writer holds a session at a time
(:mod:`.lock`), appending on the durable path of :mod:`.writer`; readers
(:mod:`.reader`) take no lock. The chunks are the truth: :mod:`.recovery`
rebuilds the index and HEAD from them after a crash, and :mod:`.fsck` checks
every byte. All file system calls on the write path go through :mod:`.fsio`
so tests can inject faults. See ``docs/store-format.md``.

This package imports nothing of :mod:`infai.store.pg`.
"""

from .fsio import FileIO, OsIO
from .reader import SessionReader
from .store import NoLease, Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .writer import SessionWriter

# Imported on first use: a reader (a resume) never loads the write path.
_LAZY = {"SessionWriter": "writer"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)


__all__ = ["FileIO", "NoLease", "OsIO", "SessionReader", "SessionWriter", "Store"]

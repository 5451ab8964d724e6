"""The durable session store: an append-only event tree per session.

Storage model, in prose: a session is a directory. Events are appended as
checksummed JSON lines to numbered chunk files; each carries a UUIDv7 id, its
parent's id (the nil UUID for a root), ``branch_from`` when it deliberately
forks from an older event, a kind, a role, a timestamp and a typed record. A
record larger than the blob threshold is stored once under ``blobs/`` by its
SHA-256 and loaded only when asked for. A fixed-width index lets any event be
found by sequence number and the active path be walked from HEAD to the nearest
compaction event in one read per event. HEAD names the newest event, which is
always the tip of the active branch. The chunks are the truth: the index and
HEAD are rebuilt from them after a crash. See ``docs/store-format.md``.

Typical use::

    store = Store(home)
    info = store.create_session(name="demo")
    with store.open_writer(info.id) as w:
        first = w.append(MessageRecord(content="hi"), role="user")
        w.append(MessageRecord(content="hello"), role="assistant")
        w.select(first.id)                    # two-phase: HEAD has not moved yet
        w.append(MessageRecord(content="again"), role="user")  # a branch; HEAD moves
        context = w.context()
"""

from .backend import SessionLog, SessionStore, SessionView, open_store
from .errors import (
    BlobDigestError,
    CorruptionError,
    EventNotFound,
    HeadConflict,
    InvalidInput,
    SessionBusy,
    SessionExists,
    SessionNotFound,
    StoreError,
    StoreIOError,
    UnsupportedFormat,
    WriterLocked,
)
from .events import Context, Entry, Event
from .format import FORMAT_VERSION, NIL_ID
from .fsio import FileIO, OsIO
from .layout import default_home
from .options import StoreOptions
from .reader import SessionReader
from .records import (
    KINDS,
    KINDS_VERSION,
    RECORD_TYPES,
    BranchSummaryRecord,
    CompactionRecord,
    MessageRecord,
    Record,
    ToolCallRecord,
    ToolResultRecord,
    Usage,
    decode_record,
    record_from_obj,
    record_to_obj,
)
from .store import SessionInfo, Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .fsck import FsckReport, Problem
    from .writer import SessionWriter

# Imported on first use: a reader (a resume) never loads the write or check paths.
_LAZY = {"SessionWriter": "writer", "FsckReport": "fsck", "Problem": "fsck"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)


__all__ = [
    "FORMAT_VERSION",
    "KINDS",
    "KINDS_VERSION",
    "NIL_ID",
    "RECORD_TYPES",
    "BlobDigestError",
    "BranchSummaryRecord",
    "CompactionRecord",
    "Context",
    "CorruptionError",
    "Entry",
    "Event",
    "EventNotFound",
    "FileIO",
    "FsckReport",
    "HeadConflict",
    "InvalidInput",
    "MessageRecord",
    "OsIO",
    "Problem",
    "Record",
    "SessionBusy",
    "SessionExists",
    "SessionInfo",
    "SessionLog",
    "SessionNotFound",
    "SessionReader",
    "SessionStore",
    "SessionView",
    "SessionWriter",
    "Store",
    "StoreError",
    "StoreIOError",
    "StoreOptions",
    "ToolCallRecord",
    "ToolResultRecord",
    "UnsupportedFormat",
    "Usage",
    "WriterLocked",
    "decode_record",
    "default_home",
    "open_store",
    "record_from_obj",
    "record_to_obj",
]

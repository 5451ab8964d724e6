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

The package is a neutral core and two sibling backends: the contract
(:mod:`.contract`), session metadata (:mod:`.info`), events (:mod:`.events`),
records, errors, options, the shared encodings (:mod:`.codec`), check reports
(:mod:`.report`), import/export (:mod:`.transfer`) and the importers of other
tools' sessions (:mod:`.imports`) are common; the directory
store lives in :mod:`.file` and PostgreSQL in :mod:`.pg`, which never import
each other; :mod:`.open` alone knows both. Backend classes are loaded on first
use, so ``import infai.store`` loads neither backend.

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

from .codec import NIL_ID, now_rfc3339
from .errors import (
    BackendUnavailable,
    BlobDigestError,
    CorruptionError,
    EventNotFound,
    GcRefused,
    HeadConflict,
    InvalidInput,
    ObjectNotFound,
    SessionBusy,
    SessionExists,
    SessionNotFound,
    StoreError,
    StoreIOError,
    UnsupportedFormat,
    WriterLocked,
)
from .events import Context, Entry, Event, EventSpec
from .home import default_home
from .info import FORMAT_VERSION, SessionInfo, SessionSummary
from .options import StoreOptions
from .records import (
    CHECKPOINT_KINDS,
    HOOK_KINDS,
    KINDS,
    KINDS_VERSION,
    RECORD_TYPES,
    BranchSummaryRecord,
    CompactionRecord,
    GapRecord,
    HookRecord,
    MessageRecord,
    Record,
    RestoreRecord,
    SnapshotRecord,
    ToolCallRecord,
    ToolResultRecord,
    Usage,
    decode_record,
    record_from_obj,
    record_to_obj,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .contract import REMOVED, Lease, SessionLog, SessionStore, SessionView
    from .file import FileIO, OsIO, SessionReader, SessionWriter, Store
    from .gc import DEFAULT_GRACE as GC_GRACE
    from .gc import GcReport, objects_reached
    from .gc import collect as collect_garbage
    from .open import is_database_url, open_store
    from .pg import LATEST as SCHEMA_VERSION
    from .pg import PgStore
    from .report import FsckReport, Problem
    from .salvage import SalvageReport, salvage_session
    from .search import DamagedSession, SearchHit, SearchResults
    from .transfer import export_lines, import_session

# Imported on first use: ``import infai.store`` loads neither backend, a reader (a
# resume) never loads the write path, and a database user never loads the directory
# store (nor the reverse). Nor does a resume load what only the layers above use: the
# contract's protocols (and with them ``typing``), the check reports, open_store.
# name -> (module, attribute)
_LAZY = {
    "DamagedSession": ("search", "DamagedSession"),
    "FileIO": ("file", "FileIO"),
    "FsckReport": ("report", "FsckReport"),
    "GC_GRACE": ("gc", "DEFAULT_GRACE"),
    "GcReport": ("gc", "GcReport"),
    "Lease": ("contract", "Lease"),
    "OsIO": ("file", "OsIO"),
    "PgStore": ("pg", "PgStore"),
    "Problem": ("report", "Problem"),
    "REMOVED": ("contract", "REMOVED"),
    "SCHEMA_VERSION": ("pg.schema", "LATEST"),
    "SalvageReport": ("salvage", "SalvageReport"),
    "SearchHit": ("search", "SearchHit"),
    "SearchResults": ("search", "SearchResults"),
    "SessionLog": ("contract", "SessionLog"),
    "SessionReader": ("file", "SessionReader"),
    "SessionStore": ("contract", "SessionStore"),
    "SessionView": ("contract", "SessionView"),
    "SessionWriter": ("file", "SessionWriter"),
    "Store": ("file", "Store"),
    "collect_garbage": ("gc", "collect"),
    "export_lines": ("transfer", "export_lines"),
    "import_session": ("transfer", "import_session"),
    "is_database_url": ("open", "is_database_url"),
    "objects_reached": ("gc", "objects_reached"),
    "open_store": ("open", "open_store"),
    "salvage_session": ("salvage", "salvage_session"),
}


def __getattr__(name: str) -> object:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{where[0]}"), where[1])


__all__ = [
    "CHECKPOINT_KINDS",
    "FORMAT_VERSION",
    "GC_GRACE",
    "HOOK_KINDS",
    "KINDS",
    "KINDS_VERSION",
    "NIL_ID",
    "RECORD_TYPES",
    "REMOVED",
    "SCHEMA_VERSION",
    "BackendUnavailable",
    "BlobDigestError",
    "BranchSummaryRecord",
    "CompactionRecord",
    "Context",
    "CorruptionError",
    "DamagedSession",
    "Entry",
    "Event",
    "EventNotFound",
    "EventSpec",
    "FileIO",
    "FsckReport",
    "GapRecord",
    "GcRefused",
    "GcReport",
    "HeadConflict",
    "HookRecord",
    "InvalidInput",
    "Lease",
    "MessageRecord",
    "ObjectNotFound",
    "OsIO",
    "PgStore",
    "Problem",
    "Record",
    "RestoreRecord",
    "SalvageReport",
    "SearchHit",
    "SearchResults",
    "SessionBusy",
    "SessionExists",
    "SessionInfo",
    "SessionLog",
    "SessionNotFound",
    "SessionReader",
    "SessionStore",
    "SessionSummary",
    "SessionView",
    "SessionWriter",
    "SnapshotRecord",
    "Store",
    "StoreError",
    "StoreIOError",
    "StoreOptions",
    "ToolCallRecord",
    "ToolResultRecord",
    "UnsupportedFormat",
    "Usage",
    "WriterLocked",
    "collect_garbage",
    "decode_record",
    "default_home",
    "export_lines",
    "import_session",
    "is_database_url",
    "now_rfc3339",
    "objects_reached",
    "open_store",
    "record_from_obj",
    "record_to_obj",
    "salvage_session",
]

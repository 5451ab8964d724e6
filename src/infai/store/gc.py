"""Garbage collection of the store's objects: remove what no event can reach.

Model, in prose: objects (:mod:`.objects`) are shared by every session of a
store and never change, so they are removed by marking, not by counting
references. The *roots* are, for every event on every branch of every session:

- the ``tree`` of a ``snapshot`` or ``restore`` record, walked with
  :func:`.trees.reachable` (subtrees, file contents, link targets);
- any string under the metadata key :data:`ROOT_KEY` (``tool_manifest``) of any
  record, a leaf object (the tool manifest a turn was offered);

plus every object put within the grace period (:data:`DEFAULT_GRACE`): a
snapshot puts its objects first and appends its event afterwards, so an object
put a moment ago may be about to become reachable. The grace is checked again
inside the transaction that removes (see :meth:`.objects.ObjectStore.remove`),
after every batch in flight has committed. A writer that names an object
without putting it again (the snapshot stat cache reusing a file's digest)
touches it (:meth:`.objects.ObjectStore.touch`) once its last put is older than
half the grace, so the grace covers it too (see ``checkpoints/snapshot``).
Half the *default* grace: a gc asked for a shorter one first moves the
objects' generation (a snapshot checking its cache after that drops it and
puts its objects again) and keeps the default grace while a session is open
(see :func:`_short_grace`).

Everything else is removed. gc never guesses: if a session cannot be listed or
read, or a tree reached from a root is missing or damaged, it removes nothing
and raises :class:`~.errors.GcRefused` naming the session (and event), since
what that session or tree reaches cannot be known. Being over the contract, it
works the same on both backends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .contract import SessionStore, SessionView
from .errors import GcRefused, InvalidInput, ObjectNotFound, StoreError
from .objects import ObjectStore, check_digest
from .records import Record, RestoreRecord, SnapshotRecord
from .trees import reachable

#: the metadata key whose value names an object to keep (the turn's tool manifest)
ROOT_KEY = "tool_manifest"
#: seconds an object is kept after its last put, whatever references it
DEFAULT_GRACE = 3600.0
#: ``progress(done, total)`` in sessions read
Progress = Callable[[int, int], None]


@dataclass
class GcReport:
    """What gc found and did (``dry_run``: what it would do)."""

    dry_run: bool
    sessions: int = 0
    #: objects in the store before, and their bytes
    objects: int = 0
    bytes: int = 0
    reachable: int = 0
    #: unreachable objects kept because they were put within the grace period
    recent: int = 0
    removed: int = 0
    freed: int = 0
    #: the digests removed (or to be removed, on a dry run)
    digests: list[str] = field(default_factory=list)
    #: the grace period used, in seconds: the default one, not a shorter one
    #: asked for, while a session is open (see :func:`collect`)
    grace: float = DEFAULT_GRACE
    #: bytes the objects took on disk before, and after (None on a dry run)
    disk_before: int = 0
    disk_after: int | None = None
    #: bytes of disk given back (measured), or on a dry run about how many would be
    reclaimed: int = 0
    #: what the backend did to give space back, or leaves to its own maintenance
    space_note: str | None = None

    def to_obj(self) -> dict[str, object]:
        """JSON-ready (digests left out: they can be many)."""
        return {
            "dry_run": self.dry_run,
            "sessions": self.sessions,
            "objects": self.objects,
            "bytes": self.bytes,
            "reachable": self.reachable,
            "recent": self.recent,
            "removed": self.removed,
            "freed": self.freed,
            "grace": self.grace,
            "disk_before": self.disk_before,
            "disk_after": self.disk_after,
            "reclaimed": self.reclaimed,
            "space_note": self.space_note,
        }


def record_roots(record: Record) -> tuple[str | None, str | None]:
    """The root tree a record names (snapshot, restore) and the object its metadata
    names under :data:`ROOT_KEY` (None where there is none or it is no digest)."""
    tree = record.tree if isinstance(record, SnapshotRecord | RestoreRecord) else None
    named = getattr(record, "metadata", {}).get(ROOT_KEY)
    leaf = None
    if isinstance(named, str):
        try:
            leaf = check_digest(named)
        except InvalidInput:
            leaf = None
    return tree, leaf


def session_roots(view: SessionView) -> tuple[dict[str, str], dict[str, str]]:
    """A session's root trees and leaf objects, each mapped to the first event (id)
    naming it; every event of every branch is read."""
    trees: dict[str, str] = {}
    leaves: dict[str, str] = {}
    for entry in view.entries():
        record = view.event(entry.id, resolve=True).record
        assert record is not None
        tree, leaf = record_roots(record)
        if tree is not None:
            trees.setdefault(tree, entry.id)
        if leaf is not None:
            leaves.setdefault(leaf, entry.id)
    return trees, leaves


def objects_reached(store: SessionStore, session_id: str) -> set[str]:
    """Every object the session's events reach (trees walked); raises if one of its
    trees cannot be read."""
    with store.open_reader(session_id) as view:
        trees, leaves = session_roots(view)
    return reachable(store.objects, sorted(trees)) | set(leaves)


def _walk(store: SessionStore, trees: dict[str, tuple[str, str]]) -> set[str]:
    """Everything the root trees reach; a tree that cannot be read refuses gc,
    naming the session and event that named its root."""
    try:
        return reachable(store.objects, sorted(trees))
    except StoreError:
        pass
    for root, (sid, eid) in sorted(trees.items()):  # find which root it was
        try:
            reachable(store.objects, [root])
        except StoreError as exc:
            raise GcRefused(
                f"session {sid} event {eid}: its snapshot tree {root} cannot be read ({exc});"
                " gc cannot know what it reaches, so it removes nothing"
            ) from None
    raise GcRefused("a snapshot tree could not be read; gc removes nothing")  # pragma: no cover


def marked(store: SessionStore, progress: Progress | None = None) -> tuple[int, set[str]]:
    """How many sessions were read, and every object reachable from their events.

    Raises :class:`GcRefused` if any session cannot be listed or read.
    """
    infos = store.list_sessions()
    if store.unreadable:
        raise GcRefused(
            f"a session cannot be read ({store.unreadable[0]}); gc cannot know what it"
            " reaches, so it removes nothing (fsck or salvage it first)"
        )
    trees: dict[str, tuple[str, str]] = {}
    keep: set[str] = set()
    for done, info in enumerate(infos, start=1):
        try:
            with store.open_reader(info.id) as view:
                roots, leaves = session_roots(view)
        except StoreError as exc:
            raise GcRefused(
                f"session {info.id} cannot be read ({exc}); gc cannot know what it"
                " reaches, so it removes nothing (fsck or salvage it first)"
            ) from None
        for root, eid in roots.items():
            trees.setdefault(root, (info.id, eid))
        keep.update(leaves)
        if progress is not None:
            progress(done, len(infos))
    return len(infos), keep | _walk(store, trees)


def collect(
    store: SessionStore,
    *,
    dry_run: bool = False,
    grace: float = DEFAULT_GRACE,
    progress: Progress | None = None,
) -> GcReport:
    """Mark what every session reaches, then remove every other object not put
    within ``grace`` seconds (``dry_run``: only say what would go)."""
    if grace < 0:
        raise InvalidInput(f"gc grace period must not be negative (got {grace})")
    report = GcReport(dry_run)
    if grace < DEFAULT_GRACE and not dry_run:
        grace = _short_grace(store, grace)
    report.grace = grace
    report.sessions, live = marked(store, progress)
    objects = store.objects
    every = set(objects.digests())  # listed before the recent puts are asked for
    recent = objects.recent(grace)
    report.reachable = len(every & live)
    doomed = every - live - recent
    report.recent = len((every - live) & recent)
    report.objects, report.bytes = objects.stats()
    report.disk_before = objects.disk_bytes()
    if dry_run:
        report.digests = sorted(doomed)
        report.removed = len(doomed)
        report.freed = sum(_size(objects, digest) for digest in doomed)
        report.reclaimed = objects.reclaimable(doomed)
        return report
    report.freed = objects.remove(doomed, grace=grace) if doomed else 0
    gone = objects.missing(doomed)
    report.digests = sorted(gone)
    report.removed = len(gone)
    report.space_note = objects.compact()
    report.disk_after = objects.disk_bytes()
    report.reclaimed = max(report.disk_before - report.disk_after, 0)
    return report


def _short_grace(store: SessionStore, grace: float) -> float:
    """The grace a gc asked for one shorter than :data:`DEFAULT_GRACE` may use.

    A snapshot's stat-cache hits were put (or touched) within half the default
    grace, not within ``grace``: a hit named by no event yet would be removed
    if its snapshot's event were appended after this gc read the session. So,
    before reading anything: move the objects' generation (an empty removal), so
    any snapshot checking its cache from now on drops it and puts what it names
    again; then, if a session is open (its process may hold a snapshot of cache
    hits taken before, its event not appended yet), keep the default grace."""
    store.objects.remove((), grace=grace)
    if store.marked_open([info.id for info in store.list_sessions()]):
        return DEFAULT_GRACE
    return grace


def _size(objects: ObjectStore, digest: str) -> int:
    try:
        return objects.size(digest)
    except ObjectNotFound:
        return 0  # removed meanwhile by another gc


__all__ = [
    "DEFAULT_GRACE",
    "ROOT_KEY",
    "GcReport",
    "Progress",
    "collect",
    "marked",
    "objects_reached",
    "record_roots",
    "session_roots",
]

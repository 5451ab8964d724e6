"""Snapshots: the working directory's files as one root tree in the store's objects.

Model, in prose: a snapshot walks the working directory with ``os.scandir``
(never following a symlink: a link is recorded as a link, its target's bytes
being the object), never entering a directory named ``.git`` (the user's
repository is neither read nor written), not entering directories git would
ignore (:mod:`.ignore`; the repository's rules above the working directory come
from :mod:`.repo`), and leaving out files over the size cap and special files.
What is left out is reported, path to reason, an ignored directory as one
entry. Every directory becomes a tree object (:mod:`infai.store.trees`), every
file or link a content object; all of them go into the store in one
:meth:`~infai.store.objects.ObjectStore.batch`, opened only if something is new.

What makes it cheap is the :mod:`.statcache`: a file whose ``lstat`` key is the
one cached is not read, and a directory whose entries are all such hits keeps
its cached tree digest, so a snapshot of an unchanged tree is a walk of
``lstat`` calls that writes nothing. An empty directory is recorded (unlike
git) as an entry naming the empty tree, so a restore recreates or removes it;
one whose every entry is left out (ignored, over the cap) is not: its skipped
paths say it is there, and a restore leaves it alone.

What makes it cheap when little changed is the :mod:`.watch`er: once a walk
has watched every directory it entered, the next snapshot re-examines only the
directories with change events since (and their ancestors); the others keep
their cached trees, and the skipped paths found in them, without a syscall;
and in a re-examined directory only the files events name are ``lstat``-ed.
Doubt (a lost event, a renamed directory, no inotify) means a full walk.

If garbage collection removed objects while a snapshot ran (the store's
generation moved), the cache's promise "this digest is stored" may be broken
for this snapshot: it is taken again with the cache dropped.

A cache hit is not put again, so by itself it would not be protected by gc's
grace period (objects put within the last hour are kept: a snapshot's event is
appended after its objects are put, and a gc that read the session before that
append must not remove them). A cached digest may be reachable from no event
at all (an unrecorded snapshot, such as ``session diff``'s, put it; or its
session was removed), so a gc running between this walk and the append of its
event could remove it. Hence: when the cache's digests were last put more than
:data:`TOUCH_INTERVAL_S` (half the grace) ago, the snapshot first touches them
all (one transaction) — then every object a snapshot's tree names was put
within half the grace when its walk began, and only a gc slower than that
between its marking and its removal could miss the event.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from infai.errors import InfaiError
from infai.store.gc import DEFAULT_GRACE
from infai.store.objects import ObjectStore
from infai.store.records import SnapshotRecord

from .repo import RepoRules
from .statcache import DirEntry, StatCache, cache_path
from .walk import GIT_DIR, Progress, _LazyBatch, _Walk, with_ancestors
from .watch import Watcher

__all__ = ["DEFAULT_SIZE_CAP", "GIT_DIR", "Progress", "SnapshotResult", "Snapshotter"]

#: files larger than this are left out of snapshots unless configured otherwise
DEFAULT_SIZE_CAP = 10 * 1024 * 1024
#: at most this many skipped paths are listed; the rest are counted
SKIPPED_LIST_CAP = 1000
#: the stat cache file is rewritten at most this often by snapshots (see ``flush``)
SAVE_INTERVAL_S = 5.0


#: the cache's digests are touched again once their last put is this old (seconds)
TOUCH_INTERVAL_S = DEFAULT_GRACE / 2

#: the wall clock the cache's ``touched`` time is read from (a seam for tests)
_wall = time.time


class SnapshotError(InfaiError):
    """The working directory itself could not be read (gone, or not a directory):
    no snapshot of it can be taken. Names the path and why."""


@dataclass(frozen=True, slots=True)
class SnapshotResult:
    """What a snapshot recorded.

    ``changed`` counts paths that differ from the ``previous`` tree (``None`` if
    none was given); ``hashed`` counts files and links read and hashed (0 when
    the stat cache covered everything); ``skipped`` maps at most
    :data:`SKIPPED_LIST_CAP` left-out paths (a directory ends in ``/``) to why,
    ``skipped_more`` counts the rest.
    """

    tree: str
    files: int
    bytes: int
    changed: int | None
    skipped: dict[str, str] = field(default_factory=dict)
    skipped_more: int = 0
    hashed: int = 0
    hashed_bytes: int = 0
    #: every skipped path, uncapped: what a restore must leave alone
    every_skipped: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def record(self, reason: str) -> SnapshotRecord:
        """The timeline record of this snapshot (``reason``: "turn start", "after bash"...)."""
        metadata = {"skipped_more": self.skipped_more} if self.skipped_more else {}
        return SnapshotRecord(
            tree=self.tree,
            reason=reason,
            files=self.files,
            bytes=self.bytes,
            changed=self.changed or 0,
            skipped=dict(self.skipped),
            metadata=metadata,
        )


class Snapshotter:
    """Takes snapshots of one working directory into a store's objects.

    Keep one per working directory for the life of a process (it holds the stat
    cache in memory; another process's snapshots of the same directory are fine,
    each cache is only a cache). ``home`` is the store's home, where the stat
    cache file lives; ``None`` keeps the cache in memory only. ``watch``: keep a
    change :class:`~.watch.Watcher` (one inotify instance, closed by
    :meth:`close`), so snapshots after the first re-examine only directories
    with changes.
    """

    def __init__(
        self,
        objects: ObjectStore,
        workdir: str | Path,
        *,
        home: str | Path | None = None,
        size_cap: int = DEFAULT_SIZE_CAP,
        clock: Callable[[], int] = time.time_ns,
        watch: bool = True,
    ) -> None:
        self.objects = objects
        self.workdir = os.path.abspath(os.fspath(workdir))
        self.size_cap = size_cap
        self._clock = clock
        where = cache_path(Path(home), self.workdir) if home is not None else None
        self.cache = StatCache(where or Path(os.devnull), self.workdir)
        self._persist = where is not None
        self._unsaved = False
        self._saved_at = -SAVE_INTERVAL_S
        if not self._persist:
            self.cache.load(-1)
        self.watcher = Watcher() if watch else None
        #: a full walk watched every directory it entered: events now say what changed
        self._armed = False
        #: the repository's pattern files above the walk (see :mod:`.repo`) and
        #: the fingerprint of what they held at the last snapshot
        self.repo_rules = RepoRules(self.workdir)
        self._base = ""
        #: the store's generation checked at the end of the last walk
        self._generation: int | None = None
        #: the last walk's recorded subdirectories and skipped paths per
        #: directory, valid for the cache dict they go with (see ``_Walk``)
        self._carry: (
            tuple[object, dict[str, Sequence[str]], dict[str, list[tuple[str, str]]]] | None
        ) = None

    def close(self) -> None:
        """Write the stat cache and stop watching (idempotent)."""
        self.flush()
        if self.watcher is not None:
            self.watcher.close()
        self._armed = False

    def __del__(self) -> None:
        # an inotify instance is a scarce per-user resource (128 by default)
        watcher = getattr(self, "watcher", None)
        if watcher is not None:
            watcher.close()

    def _needs(self) -> set[str] | None:
        """What the watcher says to re-examine (``None``: everything)."""
        if self.watcher is None:
            return None
        dirty = self.watcher.drain()
        if dirty is None:
            self.watcher.forget_all()
            self._armed = False
        if dirty is None or not self._armed:
            return None
        # A directory with racy files (not in the stat cache) and no event since
        # it was read keeps its tree: the watch predates the read, so a rewrite
        # in the same clock tick would have queued an event. With one, the walk
        # finds those files missing from the cache and hashes them again.
        return with_ancestors(dirty)

    def flush(self) -> None:
        """Write the stat cache to its file if it changed since the last write.

        Snapshots write it at most every :data:`SAVE_INTERVAL_S` seconds (a
        warm snapshot should not pay for serialising ten thousand entries each
        time); call this when the session closes. A cache never written costs
        only re-hashing in the next process, never a wrong answer.
        """
        if self._persist and self._unsaved:
            self.cache.save(self.cache.dirs, self.cache.generation)
        self._unsaved = False
        self._saved_at = time.monotonic()

    def _keep_alive(self, old: dict[str, DirEntry]) -> dict[str, DirEntry]:
        """``old`` (the cache), its digests touched first if their last put is
        over :data:`TOUCH_INTERVAL_S` old (see the module docstring); an empty
        cache if one of them is gone (removed without the generation moving:
        nothing in it is to be trusted then)."""
        now = _wall()
        if now - self.cache.touched < TOUCH_INTERVAL_S:
            return old
        if self.objects.touch(self.cache.digests()):
            self.cache.dirs = {}
            self._carry = None
            return self.cache.dirs
        self.cache.touched = now
        self._unsaved = True
        return old

    def snapshot(
        self,
        previous: str | None = None,
        *,
        durable: bool = True,
        progress: Progress | None = None,
    ) -> SnapshotResult:
        """Record the working directory now; ``previous`` (a root tree) is what
        ``changed`` is counted against.

        ``durable=False`` returns once the new objects are committed (safe
        against a killed process) without waiting for the disk: the caller
        must call ``objects.sync()`` before it records the tree anywhere
        durable (a snapshot nobody records never pays for that sync).
        ``progress`` is called with (files seen, bytes read and hashed) at most
        every :data:`PROGRESS_INTERVAL_S` seconds while the walk runs.
        """
        needs = self._needs()
        # the events just drained live in ``needs`` alone: a walk that fails (or
        # is stopped) loses them, so until one ends the next walks everything
        self._armed = False
        rules, base = self.repo_rules.rules()
        if base != self._base or self.repo_rules.nested_changed():
            needs = None  # the repository's patterns changed: no cached tree stands
            self._base = base
        if needs is None:
            self.repo_rules.forget_nested()
        for attempt in (0, 1):
            # The generation the last walk ended with saves a read: the cache is
            # valid for it, and a removal since is caught by the check below.
            known = self._generation if attempt == 0 else None
            generation = known if known is not None else self.objects.generation()
            old = self.cache.load(generation) if attempt == 0 else {}
            if old:
                old = self._keep_alive(old)
            started = _wall()
            children, skips = None, None
            if self._carry is not None and self._carry[0] is old:
                _, children, skips = self._carry
            with ExitStack() as stack:
                walk = _Walk(
                    _LazyBatch(self.objects, stack, durable),
                    old,
                    self.size_cap,
                    self._clock(),
                    self.watcher,
                    needs,
                    skips,
                    children,
                )
                walk.progress = progress
                walk.nested = self.repo_rules.nested
                if walk.reusable(""):
                    root = walk.reuse("")
                    got: tuple[str, int, int, bool] | None = (
                        root.tree,
                        root.size,
                        root.files,
                        True,
                    )
                else:
                    got = walk.directory(self.workdir, "", rules, base)
            checked = self.objects.generation()
            if checked == generation:
                break
        if got is None:  # only a root that cannot be listed yields no tree
            why = walk.skipped[-1][1] if walk.skipped else "unreadable"
            raise SnapshotError(f"{self.workdir}: the working directory is {why}")
        self._generation = generation if checked == generation else None
        self._armed = self.watcher is not None and self.watcher.ok
        tree, size, files, clean = got
        if not clean:
            if not old:  # every digest of the new cache was put by this walk
                self.cache.touched = started
            self.cache.dirs, self.cache.generation = walk.new, generation
        # a clean walk records what the cache holds: its maps go with it too
        self._carry = (self.cache.dirs, walk.new_children, walk.new_skips)
        if not clean:
            self._unsaved = True
            if time.monotonic() - self._saved_at >= SAVE_INTERVAL_S:
                self.flush()
        changed = None
        if previous is not None:
            from .diff import diff_trees

            changed = len(diff_trees(self.objects, previous, tree))
        listed = sorted(walk.every_skipped())
        return SnapshotResult(
            tree=tree,
            files=files,
            bytes=size,
            changed=changed,
            skipped=dict(listed[:SKIPPED_LIST_CAP]),
            skipped_more=max(0, len(listed) - SKIPPED_LIST_CAP),
            hashed=walk.hashed,
            hashed_bytes=walk.hashed_bytes,
            every_skipped=dict(listed),
        )

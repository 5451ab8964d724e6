"""One working directory's checkpoints in one store: the object the agent holds.

Model, in prose: :class:`Checkpoints` ties the three parts together for one
working directory: :class:`~.snapshot.Snapshotter` (files → root tree, with a
stat cache), :mod:`.diff` (trees → files and changes) and
:class:`~.restore.Restorer` (plan, journaled apply, recovery). It owns no
timeline: the caller (the agent session) records what it returns
(:meth:`~.snapshot.SnapshotResult.record` gives the ``SnapshotRecord``) and
decides which trees to compare or restore. The order of a restore is fixed
here so that nothing on disk can be lost: :meth:`plan` snapshots the disk
first, :meth:`apply` checks the disk still is that snapshot, then writes, each
path only if it still is what that snapshot saw (a file saved meanwhile is
left as it is and reported: see :mod:`.disk`, and the window it leaves).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from infai.store.objects import ObjectStore

from .diff import DiffReport, FileInfo, diff_trees, render_diff, tree_files
from .disk import StatKey
from .restore import (
    Applied,
    PlanStale,
    Recovery,
    RestorePending,
    RestorePlan,
    Restorer,
    plan_restore,
)
from .snapshot import DEFAULT_SIZE_CAP, Progress, SnapshotResult, Snapshotter


class Checkpoints:
    """Snapshots, diffs and restores of ``workdir`` in a store (``objects``, ``home``).

    Keep one per working directory for the life of the process (it holds the
    stat cache and, with ``watch``, an inotify change watcher: snapshots after the
    first then look only at directories with changes). Call :meth:`recover` once
    when a session opens, before the first snapshot.
    """

    def __init__(
        self,
        objects: ObjectStore,
        workdir: str | Path,
        home: str | Path,
        *,
        size_cap: int = DEFAULT_SIZE_CAP,
        watch: bool = True,
    ) -> None:
        self.objects = objects
        self.workdir = os.path.abspath(os.fspath(workdir))
        self.snapshotter = Snapshotter(
            objects, self.workdir, home=home, size_cap=size_cap, watch=watch
        )
        self.restorer = Restorer(objects, self.workdir, home)

    def recover(self, record: Callable[[Recovery], None] | None = None) -> Recovery | None:
        """Roll back (or report complete) a restore a kill interrupted; ``None`` if none.
        ``record``: called with a completed one before its journal is deleted (see
        :meth:`.Restorer.recover`)."""
        return self.restorer.recover(record)

    def snapshot(
        self,
        previous: str | None = None,
        *,
        durable: bool = True,
        progress: Progress | None = None,
    ) -> SnapshotResult:
        """The files now, as a root tree (``previous``: the tree ``changed`` counts
        from). ``durable=False``: committed but not yet synced, so call
        :meth:`sync` before recording the tree; ``progress``: see
        :meth:`.Snapshotter.snapshot`."""
        return self.snapshotter.snapshot(previous, durable=durable, progress=progress)

    def sync(self) -> None:
        """Make the objects of every ``durable=False`` snapshot durable (before
        an event names their tree)."""
        self.objects.sync()

    def files(self, tree: str) -> dict[str, FileInfo]:
        """Every file and link of a snapshot, by path."""
        return tree_files(self.objects, tree)

    def diff(self, old: str, new: str | None = None, context: int = 3) -> DiffReport:
        """What changed from tree ``old`` to tree ``new`` (``None``: the files now,
        which takes a snapshot: its objects stay in the store until gc)."""
        if new is None:
            new = self.snapshot(durable=False).tree  # named by nothing durable
        return render_diff(self.objects, diff_trees(self.objects, old, new), context)

    def plan(
        self,
        target: str,
        *,
        last: str | None = None,
        target_skipped: Mapping[str, str] | None = None,
        foreign: bool = False,
    ) -> tuple[SnapshotResult, RestorePlan]:
        """Snapshot the files now, then plan going to ``target``.

        Returns the snapshot (record it on the branch being left, as the
        "before restore" snapshot, so going back gives these files again) and
        the plan. ``last`` is the tree of the last snapshot recorded on the
        timeline: planned paths changed since are the plan's conflicts.
        ``foreign``: the target came from outside (an imported session): nothing
        inside ``.infai`` is planned (:func:`~.restore.plan_restore`).
        """
        self._no_pending()
        now = self.snapshot(previous=last)
        plan = plan_restore(
            self.objects,
            self.workdir,
            target,
            now.tree,
            last=last,
            target_skipped=target_skipped,
            current_skipped=now.every_skipped,
            foreign=foreign,
        )
        return now, plan

    def apply(self, plan: RestorePlan, metadata: Mapping[str, Any] | None = None) -> Applied:
        """Apply ``plan`` if the disk still holds ``plan.current``; the paths touched,
        and (``.left``) those changed during the restore, left as they are.

        Raises :class:`~.restore.PlanStale` (nothing changed) if files changed since
        the plan. Afterwards: record the restore, then call :meth:`finish`. A path
        left holds neither side of the plan: the next snapshot records it.
        """
        self._no_pending()
        if plan.actions and self.snapshot().tree != plan.current:
            raise PlanStale(f"{self.workdir}: files changed since the restore was planned")
        self.sync()  # whatever a restore overwrites is durable in the store first
        return self.restorer.apply(plan, metadata, self._known)

    def _known(self, path: str) -> tuple[StatKey, str] | None:
        """What the last snapshot's stat cache saw at ``path``: its key and digest
        (``None``: not cached, e.g. modified too recently to trust its key)."""
        prefix, _, name = path.rpartition("/")
        entry = self.snapshotter.cache.dirs.get(prefix + "/" if prefix else "")
        hit = entry.entries.get(name) if entry is not None else None
        return (hit[0], hit[1]) if hit is not None else None

    def close(self) -> None:
        """Write the stat cache if snapshots left it unsaved and stop watching for
        changes (call when the session closes; skipping it only costs re-hashing in
        the next process)."""
        self.snapshotter.close()

    def _no_pending(self) -> None:
        if self.restorer.pending() is not None:
            raise RestorePending(
                f"{self.restorer.journal}: an interrupted restore must be recovered first"
            )

    def finish(self) -> None:
        """The restore is recorded: drop its journal."""
        self.restorer.finish()

    def note(self, metadata: Mapping[str, Any]) -> None:
        """Add to the pending restore journal's metadata, durably (see
        :meth:`.Restorer.note`)."""
        self.restorer.note(metadata)

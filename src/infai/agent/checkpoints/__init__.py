"""Workspace checkpoints: the working directory's files on the event tree.

Snapshots store the files of a working directory as content-addressed objects
and trees in the store (unchanged files cost a ``stat``); diffs compare two
snapshots or a snapshot and the disk; restores put a snapshot back, planned
first, journaled, and recoverable after a kill. :class:`Checkpoints` is the
one object the agent holds per working directory; the modules say how each
part works: :mod:`.snapshot`, :mod:`.statcache`, :mod:`.ignore`, :mod:`.diff`,
:mod:`.restore` (what a restore does), :mod:`.disk` (how one path is changed,
and why a file saved during a restore is left as it is).
"""

from .diff import Change, DiffReport, FileInfo, diff_trees, render_diff, tree_files
from .facade import Checkpoints
from .progress import SnapshotNotices, progress_text
from .restore import (
    Action,
    PlanStale,
    Recovery,
    RestoreError,
    RestorePending,
    RestorePlan,
    Restorer,
    plan_restore,
)
from .snapshot import DEFAULT_SIZE_CAP, Progress, SnapshotError, SnapshotResult, Snapshotter

__all__ = [
    "DEFAULT_SIZE_CAP",
    "Action",
    "Change",
    "Checkpoints",
    "DiffReport",
    "FileInfo",
    "PlanStale",
    "Progress",
    "Recovery",
    "RestoreError",
    "RestorePending",
    "RestorePlan",
    "Restorer",
    "SnapshotError",
    "SnapshotNotices",
    "SnapshotResult",
    "Snapshotter",
    "diff_trees",
    "plan_restore",
    "progress_text",
    "render_diff",
    "tree_files",
]

"""Files on the timeline: the working directory's files on the event tree.

One package, one name. This layer sits between the tools and the agent: it
knows the store (objects, snapshot and restore records) and nothing of the
loop, the hub or the configuration files (the agent passes its
:class:`CheckpointSettings` in).

Snapshots store the files of a working directory as content-addressed objects
and trees in the store (unchanged files cost a ``stat``); diffs compare two
snapshots or a snapshot and the disk; restores put a snapshot back, planned
first, journaled, and recoverable after a kill. :class:`Checkpoints` is the
one object the agent holds per working directory; the modules say how each
part works: :mod:`.snapshot`, :mod:`.statcache`, :mod:`.ignore`, :mod:`.diff`,
:mod:`.restore` (what a restore does), :mod:`.disk` (how one path is changed,
and why a file saved during a restore is left as it is). A session's files
are :class:`SessionCheckpoints` (:mod:`.session`: when to snapshot, what a
restore must ask first, recovery of an interrupted restore, recorded by
:mod:`.recovered`); :mod:`.notes` names the files a restore changed.
"""

from .diff import (
    Change,
    DiffReport,
    FileInfo,
    diff_header,
    diff_trees,
    render_diff,
    tree_files,
)
from .facade import Checkpoints
from .listing import working_files
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
from .session import (
    FilesState,
    OnRestore,
    Restored,
    RestoreRefused,
    SessionCheckpoints,
    changes_files,
    checkout,
    diff_at,
    files_at,
    too_wide,
    workdir_of,
)
from .settings import CheckpointSettings
from .snapshot import DEFAULT_SIZE_CAP, Progress, SnapshotError, SnapshotResult, Snapshotter

__all__ = [
    "DEFAULT_SIZE_CAP",
    "Action",
    "Change",
    "CheckpointSettings",
    "Checkpoints",
    "DiffReport",
    "FileInfo",
    "FilesState",
    "OnRestore",
    "PlanStale",
    "Progress",
    "Recovery",
    "RestoreError",
    "RestorePending",
    "RestorePlan",
    "RestoreRefused",
    "Restored",
    "Restorer",
    "SessionCheckpoints",
    "SnapshotError",
    "SnapshotNotices",
    "SnapshotResult",
    "Snapshotter",
    "changes_files",
    "checkout",
    "diff_at",
    "diff_header",
    "diff_trees",
    "files_at",
    "plan_restore",
    "progress_text",
    "render_diff",
    "too_wide",
    "tree_files",
    "workdir_of",
    "working_files",
]

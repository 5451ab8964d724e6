"""The session's files on its timeline: when to snapshot, how a continue restores.

Model, in prose: the checkpoint engine (:mod:`.checkpoints`) knows how to take
a snapshot and put one back; this module decides *when*, and records each on
the session's timeline. A session's files at an event are those of the nearest
``snapshot`` or ``restore`` event at or before it on its path. Snapshots are
taken at the start of every turn and after every tool call that may change
files (a tool says it does not with a ``changes_files = False`` attribute; any
other tool, an MCP tool or the ``task`` tool included, may), and recorded only
when the tree differs from that nearest one (the first of a session always).

Continuing from an older event E first puts E's files back: the files now are
snapshotted and, if they differ from the timeline's last word, recorded on the
branch being left ("before restore"), so going back there gives them again;
the restore is planned, its conflicts (paths changed outside the agent since
the last snapshot, and those whose last recorded change was made outside it:
:func:`~.restorenotes.hand_made`) refuse it unless the caller forces or keeps
them (:class:`OnRestore`), and only then applied and recorded as a ``restore``
event after E, which the prompt then follows; what it changed is named, path
by path, in a notice (:func:`~.restorenotes.restored`). ``checkout`` does the same with the
restore recorded at HEAD (files only, the conversation stays). Every call here
blocks on the disk: async callers run them in a worker thread.

A session naming no working directory (an imported one) works in the current
one; ``checkout`` and a ``diff_at`` against the files now refuse in the home
directory or ``/`` (:func:`too_wide`: the snapshot would hash every file the
user has, a restore write among them), as opening a session there snapshots
nothing; reading the store (``files_at``, a diff of two events) works anywhere.
Open there, it counts among the other writers of that directory
(:func:`other_writers`): its open mark records the directory it works in.
A path in a message is quoted when it holds a newline (:func:`_quoted`), so a
file name cannot print a line of its choosing.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infai.store import (
    CHECKPOINT_KINDS,
    Event,
    InvalidInput,
    RestoreRecord,
    SessionLog,
    SessionStore,
    SessionView,
    SnapshotRecord,
)

from .facade import Checkpoints
from .notes import hand_made, restored
from .notes import quoted as _quoted
from .recovered import JOURNAL, record_recovered
from .restore import Recovery, RestoreError, RestorePlan
from .settings import CheckpointSettings
from .snapshot import DEFAULT_SIZE_CAP


class RestoreRefused(RestoreError):
    """A restore was not done (nothing on disk or in the session changed): files
    changed outside the agent, or another session may be writing in the directory.

    ``plan`` is the plan as data, ``conflicts`` the paths, ``others`` the other
    sessions whose writers are open in the same directory.
    """

    def __init__(self, message: str, plan: dict[str, Any], others: list[str]) -> None:
        super().__init__(message)
        self.plan = plan
        self.conflicts: list[str] = list(plan.get("conflicts", []))
        self.others = others

    def to_obj(self) -> dict[str, Any]:
        """The refusal as data (the server's 409, ``--json``)."""
        return {"error": str(self), "plan": self.plan, "others": self.others}


@dataclass(frozen=True)
class OnRestore:
    """What to do with conflicts: ``force`` takes the snapshot's files, ``keep``
    leaves those paths as they are on disk, ``keep_files`` skips the restore."""

    force: bool = False
    keep: tuple[str, ...] = ()
    keep_files: bool = False


@dataclass
class Restored:
    """A restore done: its event, the plan as data, and warnings to show."""

    event_id: str | None
    plan: dict[str, Any]
    touched: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    #: the "before restore" snapshot recorded on the branch left (None: none needed)
    before_id: str | None = None
    #: the events appended (the "before restore" snapshot, the restore), oldest first
    events: list[Event] = field(default_factory=list)
    #: every path changed, with what happened to it (``path``, ``change``, and
    #: ``added``/``removed`` lines of a text file modified), as
    #: :func:`~.restorenotes.restored` says it (also in ``notices``)
    changed: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class FilesState:
    """Whether the files on disk are those of HEAD (the nearest snapshot or
    restore on HEAD's path): what a status bar shows. ``head_tree`` is None when
    nothing was recorded yet; ``changed`` counts paths that differ."""

    head_tree: str | None
    disk_tree: str
    changed: int

    @property
    def differs(self) -> bool:
        """The files on disk are not HEAD's."""
        return self.disk_tree != self.head_tree


def changes_files(tool: object) -> bool:
    """Whether a call of ``tool`` may change files (only a tool that says
    ``changes_files = False`` may not)."""
    return getattr(tool, "changes_files", True) is not False


def nearest(view: SessionView, at: str | None) -> tuple[str, SnapshotRecord | RestoreRecord] | None:
    """The nearest snapshot or restore event at or before ``at`` (None: HEAD) on its path."""
    if at is None and view.head is None:
        return None
    for entry in reversed(view.path(at, to_boundary=False)):
        if entry.kind in CHECKPOINT_KINDS:
            record = view.event(entry.id, resolve=True).record
            assert isinstance(record, SnapshotRecord | RestoreRecord)
            return entry.id, record
    return None


def imported(store: SessionStore, session_id: str) -> bool:
    """Whether the session may have come from outside: imported
    (``extra["import"]``), or naming no working directory (an export's is dropped
    on import; a session an agent starts always names one, ``session new`` may
    not, and is taken as foreign too). Its snapshots may be someone else's files:
    a restore of them leaves ``.infai/`` alone, as it leaves ``.git/``."""
    info = store.info(session_id)
    return info.working_dir is None or "import" in info.extra


def other_writers(store: SessionStore, session_id: str, workdir: str) -> list[str]:
    """Other sessions open now that may be writing in ``workdir``: those naming it
    as their working directory (the store's
    :meth:`~infai.store.SessionStore.marked_open`: writer locks held, or open
    marks), and those naming none (imported ones work where they are opened)
    whose open mark gave ``workdir`` (:meth:`~infai.store.SessionStore.marked_open_in`).
    Reads the listing and, of each candidate, its lock file or mark only."""
    named: set[str] = set()
    unnamed: set[str] = set()
    order = []
    for info in store.list_sessions():
        if info.id == session_id:
            continue
        if not info.working_dir:
            unnamed.add(info.id)
        elif os.path.abspath(info.working_dir) == workdir:
            named.add(info.id)
        else:
            continue
        order.append(info.id)
    held = set(store.marked_open(sorted(named))) if named else set()
    if unnamed:
        held |= set(store.marked_open_in(sorted(unnamed), workdir))
    return [sid for sid in order if sid in held]


class SessionCheckpoints:
    """One session directory's checkpoints, recorded on a session's timeline."""

    def __init__(
        self,
        store: SessionStore,
        workdir: str | Path,
        settings: CheckpointSettings | None = None,
        *,
        watch: bool = True,
    ) -> None:
        """``watch``: keep an inotify change watcher (a session's snapshots after
        the first look only where something changed); a one-off command that takes
        one snapshot has no use for one."""
        self.store = store
        self.settings = settings or CheckpointSettings()
        self.cp = Checkpoints(
            store.objects,
            workdir,
            getattr(store, "home", workdir),
            size_cap=self.settings.size_cap,
            watch=watch,
        )
        self.workdir = self.cp.workdir
        #: one checkpoint operation at a time (a turn's snapshot, a restore, a
        #: shell's :meth:`state` check may run in different worker threads)
        self.lock = threading.RLock()

    # -- opening ---------------------------------------------------------------

    def recover(self, writer: SessionLog) -> str | None:
        """Finish or roll back a restore a kill interrupted; what to tell the user.

        The journal names the session that started the restore, perhaps another
        session of the directory (``writer`` is the one opening now). Rolled
        back, it is recorded nowhere, whoever started it: the disk agrees again
        with that timeline's last word, the snapshot taken before it. Completed
        (applied, killed before its record), it is recorded on the starting
        session's timeline, after the event it followed: ``writer`` itself, or
        the other session through its own writer, opened for that one append
        when that session is not open anywhere. When it is open (another process
        is writing it, so an append here would race that process) or was
        removed since, the restore is recorded on ``writer``'s timeline instead,
        at its HEAD (its files changed too), the record's metadata naming the
        other session and its event, and the notice says so. Exactly once: the
        journal is deleted only after the record, and a record a killed
        recovery (or restore) appended is found by the restore's tag
        (:mod:`.recovered`).
        """
        said: list[str] = []

        def record(done: Recovery) -> None:
            said.append(record_recovered(self.store, self.cp, writer, done))

        rec = self.cp.recover(record)  # records before the journal goes: see .recovered
        if rec is None:
            return None
        also = "".join("; " + n for n in _left_notices(rec.left))
        sid, source = rec.metadata.get("session"), rec.metadata.get("source")
        whose = ""
        if isinstance(sid, str) and sid != writer.session_id:
            whose = f" (session {sid}'s restore of its event {source})"
        done = f"an interrupted restore{whose} of files in {_quoted(self.workdir)} was"
        if rec.action == "rolled back":
            return f"{done} rolled back{also}"
        return f"{done} completed{''.join(said)}{also}"

    # -- snapshots ---------------------------------------------------------------

    def snapshot_record(
        self,
        view: SessionView,
        at: str | None,
        reason: str,
        progress: Callable[[int, int], None] | None = None,
    ) -> SnapshotRecord | None:
        """The snapshot to record after ``at`` (None: HEAD), or None if the files
        are those of the nearest snapshot on its path. Its objects are durable
        when a record is returned (synced only then: an unchanged tree waits for
        no disk). ``progress``: (files seen, bytes hashed), a few times a second."""
        last = nearest(view, at)
        previous = last[1].tree if last else None
        with self.lock:
            result = self.cp.snapshot(previous=previous, durable=False, progress=progress)
            if result.tree == previous:
                return None
            self.cp.sync()
        return result.record(reason)

    def state(self, view: SessionView) -> FilesState:
        """Compare the files now with HEAD's (takes a snapshot; records nothing)."""
        last = nearest(view, None)
        head_tree = last[1].tree if last else None
        with self.lock:
            now = self.cp.snapshot(previous=head_tree)
        changed = now.changed if now.changed is not None else now.files
        return FilesState(head_tree, now.tree, changed)

    # -- restores ----------------------------------------------------------------

    def plan(
        self, view: SessionView, event_id: str, left: str | None = None
    ) -> tuple[Any, RestorePlan, str | None, str | None]:
        """(the snapshot now, the plan to ``event_id``'s files, the last tree on the
        branch left (``left``'s; None: HEAD's), the target's event); a plan of
        nothing when no snapshot is at or before it."""
        target = nearest(view, event_id)
        last = nearest(view, left)
        last_tree = last[1].tree if last else None
        if target is None:
            now = self.cp.snapshot(previous=last_tree)
            empty = RestorePlan(self.workdir, now.tree, now.tree, ())
            return now, empty, last_tree, None
        skipped = target[1].skipped if isinstance(target[1], SnapshotRecord) else None
        foreign = imported(self.store, view.session_id)
        now, plan = self.cp.plan(
            target[1].tree, last=last_tree, target_skipped=skipped, foreign=foreign
        )
        unseen = {a.path for a in plan.actions} - set(plan.conflicts)
        if unseen:  # edits recorded, but made outside the agent: asked about too
            plan = plan.with_hand_made(hand_made(view, self.cp.objects, unseen, event_id, left))
        return now, plan, last_tree, target[0]

    def restore(
        self,
        writer: SessionLog,
        event_id: str,
        choice: OnRestore,
        *,
        attach: str | None,
        dry_run: bool = False,
        left: str | None = None,
    ) -> Restored:
        """Put ``event_id``'s files back; the restore event follows ``attach``
        (None: HEAD). The files now are recorded on the branch left, after ``left``
        (None: HEAD), if they differ from its last snapshot. Raises
        :class:`RestoreRefused` with nothing changed."""
        with self.lock:
            return self._restore(writer, event_id, choice, attach, dry_run, left)

    def before_switch(self, writer: SessionLog, event_id: str, choice: OnRestore) -> Event | None:
        """Before a summarised switch to ``event_id``: refuse as its restore would
        (:class:`RestoreRefused`, nothing changed), else record the files now at HEAD
        (the tip of the branch left) if they differ from its last snapshot, so the
        branch keeps them. The snapshot appended, if any."""
        with self.lock:
            now, plan, last_tree, target = self.plan(writer, event_id)
            if target is None:
                return None  # nothing will be restored: nothing to keep
            self._check(writer, plan.without(choice.keep) if choice.keep else plan, choice)
            if now.tree == last_tree:
                return None
            return writer.append(now.record("before switch"), "system", parent=writer.head)

    def _check(self, writer: SessionLog, plan: RestorePlan, choice: OnRestore) -> list[str]:
        """The other open sessions here; raises :class:`RestoreRefused` if the plan's
        conflicts or those sessions refuse it (``choice.force`` overrides)."""
        others = other_writers(self.store, writer.session_id, self.workdir)
        if (plan.conflicts or others) and not choice.force:
            raise RestoreRefused(_refusal(plan, others), plan.to_obj(), others)
        return others

    def _restore(
        self,
        writer: SessionLog,
        event_id: str,
        choice: OnRestore,
        attach: str | None,
        dry_run: bool,
        left: str | None,
    ) -> Restored:
        now, plan, last_tree, target = self.plan(writer, event_id, left)
        notices = []
        if target is None:
            notices.append(f"no files were recorded at or before event {event_id}: none restored")
            return Restored(None, plan.to_obj(), notices=notices)
        if choice.keep:
            plan = plan.without(choice.keep)
        if dry_run:
            others = other_writers(self.store, writer.session_id, self.workdir)
            return Restored(None, plan.to_obj(), notices=_others_notice(others))
        notices += _others_notice(self._check(writer, plan, choice))
        if plan.kept:
            notices.append("kept as they are: " + ", ".join(_quoted(p) for p in plan.kept))
        before, appended = None, []
        if now.tree != last_tree:
            parent = left or writer.head
            appended.append(writer.append(now.record("before restore"), "system", parent=parent))
            before = appended[0].id
        if not plan.actions:  # the files are the picked event's already
            if appended and attach is not None:
                # the snapshot on the branch left moved HEAD there: what follows
                # still continues from the event picked
                writer.select(attach)
            return Restored(None, plan.to_obj(), [], notices, before, appended)
        metadata: dict[str, Any] = {"source": event_id, "before": before}
        metadata.update(session=writer.session_id, parent=attach or writer.head)
        metadata["seq"] = writer.count  # the record will be at or after it: recovery looks there
        touched = self.cp.apply(plan, metadata=metadata)
        found: dict[str, Any] = {JOURNAL: touched.tag}
        if touched.left:
            found["left"] = touched.left
        record = RestoreRecord(
            tree=plan.target,
            source=event_id,
            before=before,
            touched=list(touched),
            kept=list(plan.kept),
            metadata=found,
        )
        event = writer.append(record, "system", parent=metadata["parent"])
        self.cp.finish()  # after the record: a kill between leaves the journal to find it
        said, changed = restored(self.cp.objects, plan.actions, touched)
        notices += [said] if said else []
        notices += _left_notices(touched.left)
        if plan.not_restorable:
            notices.append(
                f"{len(plan.not_restorable)} path(s) cannot be restored (not recorded): "
                + ", ".join(_quoted(p) for p in sorted(plan.not_restorable)[:10])
            )
        appended.append(event)
        return Restored(event.id, plan.to_obj(), touched, notices, before, appended, changed)

    def close(self) -> None:
        """Save the stat cache (best effort: it only spares hashing next time)."""
        with contextlib.suppress(OSError):
            self.cp.close()


# -- what the commands and the server ask ----------------------------------------


def too_wide() -> set[Path]:
    """Directories whose files are never snapshotted nor restored: ``/``, the
    user's home and every directory above it (``/home`` holds ``/home/me``): a
    session started there would read every file the user has, on its first
    turn; a checkout there would write among them."""
    wide = {Path("/")}
    with contextlib.suppress(RuntimeError):  # no home directory known: / only
        home = Path.home().resolve()
        wide.update((home, *home.parents))
    return wide


def _left_notices(left: dict[str, str]) -> list[str]:
    """One notice per path a restore left as it was (at most ten, then a count);
    a name holding a newline or a quote is quoted, so it stays one line."""
    notices = [f"left as it is: {why}: {_quoted(p)}" for p, why in sorted(left.items())]
    if len(notices) > 10:
        notices[10:] = [f"... and {len(notices) - 10} more path(s) left as they are"]
    return notices


def _workdir(store: SessionStore, session_id: str) -> str:
    """The session's working directory (the current one when it names none: an
    imported session works where it is continued from)."""
    return os.path.abspath(store.info(session_id).working_dir or ".")


def _narrow_workdir(store: SessionStore, session_id: str, doing: str) -> str:
    """:func:`_workdir`, refused (:class:`InvalidInput`, before anything is read or
    written) when it is ``/`` or the home directory, as opening a session there
    snapshots nothing: ``doing`` would hash, or write among, every file the user has."""
    workdir = _workdir(store, session_id)
    if Path(workdir).resolve() in too_wide():
        raise InvalidInput(
            f"session {session_id}: {doing} refused in {_quoted(workdir)} (your home "
            "directory, one above it, or /): files there are never snapshotted nor "
            "restored; run it from the project's directory"
        )
    return workdir


def workdir_of(store: SessionStore, session_id: str) -> str:
    """The session's working directory (the one its configuration is read in)."""
    return _workdir(store, session_id)


def _at(view: SessionView, session_id: str, event_id: str | None) -> tuple[str, Any]:
    found = nearest(view, event_id)
    if found is None:
        where = f"event {event_id}" if event_id else "HEAD"
        raise InvalidInput(f"session {session_id}: no files were recorded at or before {where}")
    return found


def files_at(store: SessionStore, session_id: str, event_id: str | None = None) -> dict[str, Any]:
    """The files recorded at ``event_id`` (None: HEAD): the snapshot's event, its
    tree, every file (path, type, size, digest, executable) and what was skipped."""
    with store.open_reader(session_id) as view:
        found_id, record = _at(view, session_id, event_id)
    home = getattr(store, "home", ".")
    cp = Checkpoints(store.objects, _workdir(store, session_id), home, watch=False)
    try:
        listed = cp.files(record.tree)
    finally:
        cp.close()
    skipped = record.skipped if isinstance(record, SnapshotRecord) else {}
    return {
        "event": event_id,
        "snapshot": found_id,
        "tree": record.tree,
        "files": [listed[p].to_obj() for p in sorted(listed)],
        "skipped": dict(skipped),
    }


def diff_at(
    store: SessionStore,
    session_id: str,
    old: str,
    new: str | None = None,
    *,
    size_cap: int = DEFAULT_SIZE_CAP,
) -> dict[str, Any]:
    """What changed from the files at event ``old`` to those at ``new`` (None: the
    working directory now): ``changes``, unified ``text`` diffs, ``binary`` paths."""
    with store.open_reader(session_id) as view:
        old_tree = _at(view, session_id, old)[1].tree
        new_tree = _at(view, session_id, new)[1].tree if new is not None else None
    workdir = _workdir(store, session_id)
    if new is None:  # the files now: a snapshot of the working directory
        workdir = _narrow_workdir(store, session_id, "a diff with the files now")
    cp = Checkpoints(  # one snapshot at most: no change watcher
        store.objects,
        workdir,
        getattr(store, "home", "."),
        size_cap=size_cap,
        watch=False,
    )
    try:
        report = cp.diff(old_tree, new_tree).to_obj()
    finally:
        cp.close()
    return {"from": old, "to": new, **report}


def checkout(
    store: SessionStore,
    session_id: str,
    event_id: str,
    choice: OnRestore | None = None,
    *,
    dry_run: bool = False,
    settings: CheckpointSettings | None = None,
) -> Restored:
    """Put ``event_id``'s files on disk, recorded at HEAD (the conversation stays);
    ``dry_run``: the plan only. Raises :class:`RestoreRefused` with nothing changed,
    :class:`InvalidInput` in the home directory or ``/`` (see :func:`too_wide`)."""
    workdir = _narrow_workdir(store, session_id, "checkout")
    files = SessionCheckpoints(
        store, workdir, settings or CheckpointSettings(), watch=False
    )  # a one-off
    try:
        with store.open_writer(session_id) as writer:
            # open, as an agent session is, in the directory it writes (a gc with
            # a short grace keeps the default one while it is: its snapshot of the
            # files now reuses stat-cache hits); the directory store records the
            # directory in the lock file of the writer just taken
            mark = store.open_mark(session_id, files.workdir)
            try:
                notices = [n for n in [files.recover(writer)] if n]
                writer.seq_of(event_id)  # an unknown event is bad input, before anything
                done = files.restore(
                    writer, event_id, choice or OnRestore(), attach=None, dry_run=dry_run
                )
            finally:
                mark.release()
    finally:
        files.close()
    done.notices[:0] = notices
    return done


def _others_notice(others: list[str]) -> list[str]:
    if not others:
        return []
    return [f"other open sessions may be writing in this directory: {', '.join(others)}"]


def _refusal(plan: RestorePlan, others: list[str]) -> str:
    parts = []
    unseen = [p for p in plan.conflicts if p not in plan.hand_made]
    if unseen:
        listed = "\n  ".join(_quoted(p) for p in unseen)
        parts.append(f"files changed outside the agent since its last snapshot:\n  {listed}")
    if plan.hand_made:
        listed = "\n  ".join(_quoted(p) for p in plan.hand_made)
        parts.append(
            "files last changed outside the agent (recorded between its turns, not "
            f"after a tool), which the restore would replace or remove:\n  {listed}"
        )
    if others:
        parts.append(f"other open sessions may be writing here: {', '.join(others)}")
    return "restore refused (nothing changed); " + "; ".join(parts)


__all__ = [
    "OnRestore",
    "RestoreRefused",
    "Restored",
    "SessionCheckpoints",
    "changes_files",
    "checkout",
    "diff_at",
    "files_at",
    "nearest",
    "other_writers",
    "too_wide",
]

"""Restoring a snapshot onto the working directory: plan, apply, and recover.

Model, in prose: a restore goes from the files on disk now (the tree
``current``, which the caller has just snapshotted, so every byte about to be
replaced is already in the store) to the tree ``target``. The *plan* lists only
paths that differ, each with the state it will get and the state it has:
write a file, make a link, remove, or flip the executable bit. It never
includes a path inside ``.git`` (nor, for an imported session, inside
``.infai``), a path ignored or over the size cap on disk now
(those are never touched), or a path the target snapshot itself left out (it
cannot know what was there): those are reported as not restorable, but for
ignored ones, which a restore leaves alone without a word (:attr:`RestorePlan.ignored`
lists those it would otherwise have changed). *Conflicts* are planned paths
that changed on disk since ``last``, the last snapshot the agent took: edits
made outside the agent; the caller adds those whose last recorded change was
made outside the agent too (:meth:`RestorePlan.with_hand_made`). The caller
decides (keep mine with :meth:`RestorePlan.without`, take the snapshot's, or
refuse).

*Applying* is crash-safe by a journal, ``<home>/journal/<hash of the working
directory>.json``, written and fsynced before the first change. It holds every
planned path's before and after state, and a phase. How each path is changed
is :mod:`.disk`'s part: a temporary file renamed over the path, parents walked
with ``O_NOFOLLOW``, and, first, a check that the path still holds its
``before`` state: a path changed during the restore (after the snapshot the
plan was checked against) is left as it is and reported in
:attr:`Applied.left`, never overwritten. After the last change the phase
becomes ``applied`` (with the paths left). The caller records the restore on
its timeline and then calls :meth:`Restorer.finish`: in that order, so a kill
between the two leaves a journal whose record may exist, never a record-less
restore without a journal. The journal also holds the
restore's *tag*, a random token in its temporary files' names (see
:mod:`.disk`): recovery removes only those, and only if they hold the restore's
bytes; the caller names the restore by it in its record (:attr:`Applied.tag`),
so a recovery can tell whether that record was written. A step that fails with an
error (a full disk, a path in the way) is undone at once and reported; one
process at a time restores or recovers a working directory (an ``flock``
beside the journal, dropped by the kernel when its holder dies).

*Recovery* (the next open, :meth:`Restorer.recover`) of a restore interrupted
while ``applying`` rolls *back*: every planned path is put back in its before
state. Back, not forward, because the timeline's last word on the files is the
"before" snapshot; the restore record was not written yet, so undoing makes
the disk agree with the durable history, and the user can simply ask again.
Both directions are possible (all bytes of both sides are in the store) and
every step is idempotent, so a crash during recovery is recovered the same way.
Undoing, at once or on recovery, follows the same rule as applying: only a
path holding its ``after`` state is put back; one holding neither side was
changed by someone else meanwhile and is left (and reported), so an undo never
clobbers an edit either. A path whose before bytes are gone from the store
(its sessions removed, then a gc) or damaged there (they no longer hash to
their name) is left as the restore made it and reported, naming the object,
so the rest is rolled back and the journal finished: a recovery that failed
the same way on every open would refuse every later restore of the directory. An interrupted
``applied`` journal only means the caller may not have recorded the restore:
recovery reports it as completed (with the paths left) to a ``record``
callback, and deletes the journal only once that returns, so a kill during the
recording leaves the journal for the next recovery, which asks again (the
caller finds its record by the tag, see :meth:`Restorer.note`). A journal an
older infai wrote (no tag, fewer keys) is recovered the same way: readers
ignore keys they do not know, so the version stays 1.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from infai.store.errors import CorruptionError
from infai.store.objects import ObjectStore
from infai.tools.git_hardening import included_config_files

from .diff import FileInfo, diff_trees
from .disk import Known, Op, State, _fsync_dir, _op, converge

# re-exported: their home was this module before the split (tests patch ``_Disk`` here)
from .disk import RestoreError as RestoreError
from .disk import _Disk as _Disk
from .walk import GIT_DIR

#: the directory a restore of an imported session's files never touches (a
#: project's configuration; see :func:`plan_restore`)
FOREIGN_NEVER = ".infai"

JOURNAL_VERSION = 1
#: why a rollback left a path as the restore made it
LOST = "not put back: its bytes are no longer in the store"
#: the same, the bytes damaged in the store (followed by the object's name)
DAMAGED = "not put back: its bytes are damaged in the store"


class RestorePending(RestoreError):
    """An earlier restore of this working directory was interrupted: recover first."""


class PlanStale(RestoreError):
    """The files changed between planning a restore and applying it: plan again."""


@dataclass(frozen=True, slots=True)
class Action:
    """One path of a plan: make it ``after`` (``None``: remove it); it is ``before`` now."""

    path: str
    op: Op
    before: FileInfo | None
    after: FileInfo | None

    def to_obj(self) -> dict[str, object]:
        """The JSON form (journal, ``--json`` and the server)."""
        return {
            "path": self.path,
            "op": self.op,
            "before": self.before.to_obj() if self.before else None,
            "after": self.after.to_obj() if self.after else None,
        }


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What a restore of ``target`` over ``current`` (the disk now) would do."""

    workdir: str
    target: str
    current: str
    actions: tuple[Action, ...]
    conflicts: tuple[str, ...] = ()
    not_restorable: dict[str, str] = field(default_factory=dict)
    kept: tuple[str, ...] = ()
    #: conflicts whose last change was recorded, but made outside the agent (not by a tool)
    hand_made: tuple[str, ...] = ()
    #: paths that differ but are ignored on one side: left alone, and not reported
    ignored: tuple[str, ...] = ()

    @property
    def touched(self) -> list[str]:
        """The paths the restore writes or removes."""
        return [a.path for a in self.actions]

    def without(self, paths: Iterable[str]) -> RestorePlan:
        """The plan leaving ``paths`` as they are on disk ("keep mine")."""
        keep = set(paths)
        return replace(
            self,
            actions=tuple(a for a in self.actions if a.path not in keep),
            conflicts=tuple(p for p in self.conflicts if p not in keep),
            kept=tuple(sorted(set(self.kept) | (keep & {a.path for a in self.actions}))),
            hand_made=tuple(p for p in self.hand_made if p not in keep),
        )

    def with_hand_made(self, paths: Iterable[str]) -> RestorePlan:
        """The plan with ``paths`` (planned paths whose last change, though
        recorded, was made outside the agent) among its conflicts: a restore
        over them is asked about like one over an edit not recorded yet."""
        planned = {a.path for a in self.actions}
        hand = set(paths) & planned
        return replace(
            self,
            conflicts=tuple(sorted(set(self.conflicts) | hand)),
            hand_made=tuple(sorted(set(self.hand_made) | hand)),
        )

    def to_obj(self) -> dict[str, object]:
        """The JSON form (the plan and the conflict question as data)."""
        return {
            "workdir": self.workdir,
            "target": self.target,
            "current": self.current,
            "actions": [a.to_obj() for a in self.actions],
            "conflicts": list(self.conflicts),
            "not_restorable": dict(self.not_restorable),
            "kept": list(self.kept),
            "hand_made": list(self.hand_made),
            "ignored": list(self.ignored),
        }


def _under(path: str, skipped: Mapping[str, str]) -> str | None:
    """The reason ``path`` is covered by a skipped entry (a path, or a dir ``d/``).

    A skipped *file* above ``path`` covers it too: an oversized file, a fifo or
    an unreadable file ``d`` on disk stands where the snapshot has a directory
    ``d/``, and writing ``d/x`` would need it gone."""
    if path in skipped:
        return skipped[path]
    parts = path.split("/")
    for n in range(1, len(parts)):
        above = "/".join(parts[:n])
        reason = skipped.get(above + "/", skipped.get(above))
        if reason is not None:
            return reason
    return None


def _linked_config(workdir: str) -> str | None:
    """Where, relative to ``workdir``, its ``.infai`` leads when it is a symlink to
    a directory inside it (``.infai -> conf``: ``conf/config.toml`` is the
    project's config); None otherwise."""
    real = os.path.realpath(os.path.join(workdir, FOREIGN_NEVER))
    base = os.path.realpath(workdir)
    if real == os.path.join(base, FOREIGN_NEVER) or not real.startswith(base + "/"):
        return None
    return real[len(base) + 1 :]


def _included_configs(workdir: str) -> tuple[str, ...]:
    """The git config files the repository at ``workdir`` includes from inside it
    (:func:`~infai.tools.git_hardening.included_config_files`), relative to it:
    git config as much as ``.git/config`` is (a ``core.fsmonitor`` there runs
    when the user's own git does)."""
    base = Path(os.path.realpath(workdir))
    return tuple(
        str(path.relative_to(base)) for path in included_config_files(base) if base in path.parents
    )


def _foreign_never(path: str, parts: list[str], linked: str | None, git: tuple[str, ...]) -> str:
    """Why an imported session's restore leaves ``path`` alone ("" when it may write it)."""
    if any(p.lower() == FOREIGN_NEVER for p in parts) or (
        linked is not None and (path == linked or path.startswith(linked + "/"))
    ):
        return "inside .infai (an imported session's files never write it)"
    if any(path == g or g.startswith(path + "/") for g in git):
        return "git config the repository includes (an imported session's files never write it)"
    return ""


def plan_restore(
    objects: ObjectStore,
    workdir: str,
    target: str,
    current: str,
    *,
    last: str | None = None,
    target_skipped: Mapping[str, str] | None = None,
    current_skipped: Mapping[str, str] | None = None,
    foreign: bool = False,
) -> RestorePlan:
    """The plan to go from ``current`` (the disk now, just snapshotted) to ``target``.

    ``last`` is the tree of the last snapshot the agent knew (conflicts are
    planned paths that changed since); ``target_skipped`` and
    ``current_skipped`` are the two snapshots' skipped maps. ``foreign``: the
    snapshots came from outside (an imported session), so nothing inside a
    ``.infai`` directory (:data:`FOREIGN_NEVER`) is planned either: its
    ``config.toml`` would choose where the user's next run sends prompts and key.
    """
    target_skipped = target_skipped or {}
    current_skipped = current_skipped or {}
    actions: list[Action] = []
    blocked: dict[str, str] = {}
    linked = _linked_config(workdir) if foreign else None
    git_configs = _included_configs(workdir) if foreign else ()
    ignored: list[str] = []
    for change in diff_trees(objects, current, target):
        path = change.path
        parts = path.split("/")
        if GIT_DIR in parts:
            blocked[path] = "inside .git (never touched)"
            continue
        if foreign and (never := _foreign_never(path, parts, linked, git_configs)):
            blocked[path] = never
            continue
        now = _under(path, current_skipped)
        then = _under(path, target_skipped) if change.new is None else None
        why = now if now is not None else then
        if why is None:
            actions.append(Action(path, _op(change.old, change.new), change.old, change.new))
        elif _ignored(why):
            ignored.append(path)  # the user's choice: left alone, nothing to say
        elif now is not None:
            blocked[path] = f"left alone: {now} on disk now"
        else:
            blocked[path] = f"not in the snapshot ({then})"
    for path, why in target_skipped.items():
        if not _ignored(why):  # an ignored path is never touched: nothing to report
            blocked.setdefault(path, f"not in the snapshot ({why})")
    written = {a.path for a in actions if a.after is not None and a.after.type != "dir"}
    for path in list(written):
        # a file written where a directory holds files the restore leaves alone
        prefix = path + "/"
        if any(p.startswith(prefix) for p in current_skipped):
            blocked[path] = "a directory with files left alone is in the way"
    actions = [a for a in actions if a.path not in blocked]
    conflicts: tuple[str, ...] = ()
    if last is not None and last != current:
        planned = {a.path for a in actions}
        conflicts = tuple(c.path for c in diff_trees(objects, last, current) if c.path in planned)
    return RestorePlan(
        workdir=workdir,
        target=target,
        current=current,
        actions=tuple(actions),
        conflicts=tuple(sorted(set(conflicts))),
        not_restorable=dict(sorted(blocked.items())),
        ignored=tuple(sorted(ignored)),
    )


def _ignored(why: str) -> bool:
    """Whether a skipped path's reason is an ignore rule (not the size cap, not
    an unreadable or special file)."""
    return why.startswith("ignored")


@dataclass(frozen=True, slots=True)
class Recovery:
    """What :meth:`Restorer.recover` did with an interrupted restore.

    ``action`` is ``"rolled back"`` (the disk holds ``before`` again) or
    ``"completed"`` (the disk holds ``target``; the caller records the restore
    if its timeline lacks it). Either way but for ``left``: paths that changed
    during the restore or since, left as they are (path to why).
    """

    action: Literal["rolled back", "completed"]
    target: str
    before: str
    touched: list[str]
    metadata: dict[str, Any]
    left: dict[str, str] = field(default_factory=dict)
    #: the restore's tag (its journal's ``tmp``; empty for an older infai's journal)
    tag: str = ""


class Applied(list[str]):
    """The paths a restore changed, in plan order (a list, as it always was),
    and ``left``: planned paths that changed during the restore, left as they
    are (path to why, see :mod:`.disk`): not in the list, and not what the
    target snapshot has. ``tag``: the restore's tag, for its record (a recovery
    finds that record by it)."""

    def __init__(self, touched: Iterable[str], left: Mapping[str, str], tag: str = "") -> None:
        super().__init__(touched)
        self.left = dict(left)
        self.tag = tag


def _info(obj: Any) -> FileInfo | None:
    if obj is None:
        return None
    return FileInfo(obj["path"], obj["type"], obj["digest"], obj["size"], obj["executable"])


class Restorer:
    """Applies restore plans to one working directory, journaled under ``home``."""

    def __init__(self, objects: ObjectStore, workdir: str | Path, home: str | Path) -> None:
        self.objects = objects
        self.workdir = os.path.abspath(os.fspath(workdir))
        key = hashlib.sha256(os.fsencode(self.workdir)).hexdigest()[:32]
        self.journal = Path(home) / "journal" / f"{key}.json"

    def _write_journal(self, body: dict[str, Any]) -> None:
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.journal.with_name(self.journal.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(body, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.journal)
        dfd = os.open(self.journal.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _fsync_dir(dfd)
        finally:
            os.close(dfd)

    def pending(self) -> dict[str, Any] | None:
        """The journal of an unfinished restore, if any."""
        try:
            body: dict[str, Any] = json.loads(self.journal.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise RestoreError(f"{self.journal}: unreadable restore journal: {exc}") from exc
        if body.get("v") != JOURNAL_VERSION or body.get("workdir") != self.workdir:
            raise RestoreError(f"{self.journal}: not a restore journal of {self.workdir}")
        return body

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold this working directory's restore lock (``flock`` on a file beside
        the journal; the kernel drops it when a holder dies), or refuse: a
        second process must neither apply alongside nor "recover" a restore
        that is still running."""
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(
            self.journal.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
        )
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RestoreError(
                    f"{self.workdir}: another process is restoring files here"
                ) from None
            yield
        finally:
            os.close(fd)

    def apply(
        self,
        plan: RestorePlan,
        metadata: Mapping[str, Any] | None = None,
        known: Known | None = None,
    ) -> Applied:
        """Apply ``plan``; the paths touched (and those left, changed meanwhile).
        The journal stays (phase ``applied``) until :meth:`finish`: record the
        restore on the timeline in between. ``known``: what the snapshot the plan
        was checked against saw (it spares re-reading unchanged files)."""
        with self._locked():
            return self._apply(plan, metadata, known)

    def _apply(
        self, plan: RestorePlan, metadata: Mapping[str, Any] | None, known: Known | None
    ) -> Applied:
        if self.pending() is not None:
            raise RestorePending(f"{self.journal}: an interrupted restore must be recovered first")
        if plan.workdir != self.workdir:
            raise RestoreError(f"the plan is for {plan.workdir}, not {self.workdir}")
        wanted = {a.after.digest for a in plan.actions if a.after is not None}
        wanted |= {a.before.digest for a in plan.actions if a.before is not None}
        missing = self.objects.missing(wanted)
        if missing:
            raise RestoreError(f"{len(missing)} objects of the restore are not in the store")
        tag = secrets.token_hex(8)
        body: dict[str, Any] = {
            "v": JOURNAL_VERSION,
            "workdir": self.workdir,
            "phase": "applying",
            "tmp": tag,
            "target": plan.target,
            "before": plan.current,
            "metadata": dict(metadata or {}),
            "actions": [a.to_obj() for a in plan.actions],
        }
        self._write_journal(body)
        disk = _Disk(self.workdir, self.objects, known, tag)
        left: dict[str, str] = {}
        try:
            converge(disk, [(a.path, a.before, a.after) for a in plan.actions], left)
        except (OSError, RestoreError) as exc:
            self._undo(plan, exc, left, disk)
        body["phase"] = "applied"
        body["left"] = left
        self._write_journal(body)
        return Applied([p for p in plan.touched if p not in left], left, tag)

    def _undo(
        self, plan: RestorePlan, exc: BaseException, left: dict[str, str], disk: _Disk
    ) -> None:
        """A step failed (a path in the way, a full disk): put back everything
        the restore changed now and say what failed; if even that fails, the
        journal stays for :meth:`recover`. Always raises."""
        try:
            converge(
                _Disk(self.workdir, self.objects, disk.known, disk.tag),
                [(a.path, a.after, a.before) for a in plan.actions],
                left,
            )
        except (OSError, RestoreError) as again:
            raise RestoreError(
                f"{self.workdir}: the restore failed ({exc}) and so did undoing it "
                f"({again}); the journal {self.journal} is kept: fix that and recover"
            ) from exc
        self.finish()
        also = ""
        if left:
            also = f"; left as they are (changed during the restore): {sorted(left)[:10]}"
        raise RestoreError(
            f"{self.workdir}: the restore failed and was undone: {exc}{also}"
        ) from exc

    def _unrecoverable(self, disk: _Disk, states: list[State]) -> dict[str, str]:
        """The paths a rollback cannot put back and the disk does not hold: their
        bytes gone from the store (the sessions naming them removed, then a gc)
        or damaged there. Left as they are, so the rest is rolled back and the
        journal finished, not kept for a recovery that would fail the same way
        on every open."""
        wanted = {w.digest for _, _, w in states if w is not None and w.type != "dir"}
        gone = self.objects.missing(wanted)
        out: dict[str, str] = {}
        for path, _, w in states:
            if w is None or w.type == "dir" or disk.holds(path, w):
                continue
            if w.digest in gone:
                out[path] = LOST
                continue
            try:
                self.objects.get(w.digest)  # (read again to be written: a rare path)
            except CorruptionError:
                out[path] = f"{DAMAGED} (object {w.digest})"
        return out

    def finish(self) -> None:
        """Forget the journal of a restore that is applied and recorded."""
        self.journal.unlink(missing_ok=True)

    def note(self, metadata: Mapping[str, Any]) -> None:
        """Add ``metadata`` to the pending journal's, durably (fsynced): what a
        recovery's ``record`` callback must find again if it is killed, e.g. where
        it is about to append the record. Nothing pending: nothing to do."""
        body = self.pending()
        if body is not None:
            body["metadata"] = {**dict(body.get("metadata") or {}), **metadata}
            self._write_journal(body)

    def recover(self, record: Callable[[Recovery], None] | None = None) -> Recovery | None:
        """Finish what an interrupted restore left (see the module docstring).
        ``record`` is called with a restore found completed (applied, perhaps not
        recorded) before its journal is deleted: a kill inside it leaves the
        journal, and the next recovery calls it again."""
        with self._locked():
            return self._recover(record)

    def _recover(self, record: Callable[[Recovery], None] | None) -> Recovery | None:
        body = self.pending()
        if body is None:
            return None
        actions = body["actions"]
        touched = [a["path"] for a in actions]
        action: Literal["rolled back", "completed"] = "completed"
        left = {str(p): str(why) for p, why in dict(body.get("left") or {}).items()}
        if body["phase"] != "applied":
            disk = _Disk(self.workdir, self.objects, tag=str(body.get("tmp") or ""))
            states = [(a["path"], _info(a["after"]), _info(a["before"])) for a in actions]
            left = self._unrecoverable(disk, states)
            left = converge(disk, [s for s in states if s[0] not in left], left)
            action = "rolled back"
        else:
            touched = [p for p in touched if p not in left]
        tag = str(body.get("tmp") or "")
        rec = Recovery(action, body["target"], body["before"], touched, body["metadata"], left, tag)
        if record is not None and action == "completed":
            record(rec)  # before the journal goes: a kill here leaves it for the next
        self.finish()
        return rec

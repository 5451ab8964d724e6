"""Restoring a snapshot onto the working directory: plan, apply, and recover.

Model, in prose: a restore goes from the files on disk now (the tree
``current``, which the caller has just snapshotted, so every byte about to be
replaced is already in the store) to the tree ``target``. The *plan* lists only
paths that differ, each with the state it will get and the state it has:
write a file, make a link, remove, or flip the executable bit. It never
includes a path inside ``.git``, a path ignored or over the size cap on disk now
(those are never touched), or a path the target snapshot itself left out (it
cannot know what was there): those are reported as not restorable. *Conflicts*
are planned paths that changed on disk since ``last``, the last snapshot the
agent took: edits made outside the agent. The caller decides (keep mine with
:meth:`RestorePlan.without`, take the snapshot's, or refuse).

*Applying* is crash-safe by a journal, ``<home>/journal/<hash of the working
directory>.json``, written and fsynced before the first change. It holds every
planned path's before and after state, and a phase. Each file is written to a
temporary name beside it (derived from the path, so recovery can find it),
fsynced and renamed over the path; parents are walked with ``O_NOFOLLOW``, so a
symlink swapped in on disk cannot redirect a write outside the directory.
After the last change the phase becomes ``applied``. The caller records the
restore on its timeline and then calls :meth:`Restorer.finish`. A step that
fails with an error (a full disk, a path in the way) is undone at once and
reported; one process at a time restores or recovers a working directory (an
``flock`` beside the journal, dropped by the kernel when its holder dies).

*Recovery* (the next open, :meth:`Restorer.recover`) of a restore interrupted
while ``applying`` rolls *back*: every planned path is put back in its before
state. Back, not forward, because the timeline's last word on the files is the
"before" snapshot; the restore record was not written yet, so undoing makes
the disk agree with the durable history, and the user can simply ask again.
Both directions are possible (all bytes of both sides are in the store) and
every step is idempotent, so a crash during recovery is recovered the same way.
An interrupted ``applied`` journal only means the caller may not have recorded
the restore: recovery reports it as completed so the caller can record it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from infai.errors import InfaiError
from infai.store.objects import ObjectStore

from .diff import FileInfo, diff_trees
from .snapshot import GIT_DIR

Op = Literal["write", "link", "remove", "chmod", "mkdir"]
JOURNAL_VERSION = 1


class RestoreError(InfaiError):
    """A restore could not be planned or applied (names the path and why)."""


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


def _op(before: FileInfo | None, after: FileInfo | None) -> Op:
    if after is None:
        return "remove"
    if after.type == "dir":
        return "mkdir"
    if before is not None and before.type == after.type == "file" and before.digest == after.digest:
        return "chmod"
    return "link" if after.type == "link" else "write"


def plan_restore(
    objects: ObjectStore,
    workdir: str,
    target: str,
    current: str,
    *,
    last: str | None = None,
    target_skipped: Mapping[str, str] | None = None,
    current_skipped: Mapping[str, str] | None = None,
) -> RestorePlan:
    """The plan to go from ``current`` (the disk now, just snapshotted) to ``target``.

    ``last`` is the tree of the last snapshot the agent knew (conflicts are
    planned paths that changed since); ``target_skipped`` and
    ``current_skipped`` are the two snapshots' skipped maps.
    """
    target_skipped = target_skipped or {}
    current_skipped = current_skipped or {}
    actions: list[Action] = []
    blocked: dict[str, str] = {}
    for change in diff_trees(objects, current, target):
        path = change.path
        if GIT_DIR in path.split("/"):
            blocked[path] = "inside .git (never touched)"
            continue
        why = _under(path, current_skipped)
        if why is not None:
            blocked[path] = f"left alone: {why} on disk now"
            continue
        why = _under(path, target_skipped)
        if why is not None and change.new is None:
            blocked[path] = f"not in the snapshot ({why})"
            continue
        actions.append(Action(path, _op(change.old, change.new), change.old, change.new))
    for path, why in target_skipped.items():
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
    )


@dataclass(frozen=True, slots=True)
class Recovery:
    """What :meth:`Restorer.recover` did with an interrupted restore.

    ``action`` is ``"rolled back"`` (the disk holds ``before`` again) or
    ``"completed"`` (the disk holds ``target``; the caller records the restore
    if its timeline lacks it).
    """

    action: Literal["rolled back", "completed"]
    target: str
    before: str
    touched: list[str]
    metadata: dict[str, Any]


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


#: errors opening a parent that mean the path below it cannot exist
_ABSENT = (errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG)


def _tmp_name(name: str) -> str:
    return ".infai-restore-" + hashlib.sha256(os.fsencode(name)).hexdigest()[:16] + ".tmp"


def _fsync_dir(fd: int) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot sync a directory
        os.fsync(fd)


class _Disk:
    """Writes under one root through directory descriptors, never following links."""

    def __init__(self, root: str, objects: ObjectStore) -> None:
        self.root = root
        self.objects = objects
        self.umask = _umask()
        self.dirty: set[str] = set()  # directories whose entries changed, synced once

    def sync(self) -> None:
        """Make the renames and unlinks durable: fsync each changed directory once."""
        for d in sorted(self.dirty):
            try:
                fd = os.open(os.path.join(self.root, d), os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                continue  # pruned since
            try:
                _fsync_dir(fd)
            finally:
                os.close(fd)
        self.dirty.clear()

    def _parent(self, path: str, create: bool) -> int | None:
        """An fd of ``path``'s directory (the caller closes it); ``None`` if it is
        missing and not ``create``."""
        parts = path.split("/")
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts[:-1]:
                if part in ("", ".", "..", GIT_DIR):
                    raise RestoreError(f"{self.root}: refusing the path {path!r}")
                flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                try:
                    nxt = os.open(part, flags, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        return None
                    os.mkdir(part, 0o777, dir_fd=fd)
                    nxt = os.open(part, flags, dir_fd=fd)
                except (NotADirectoryError, OSError) as exc:
                    if not create and exc.errno in _ABSENT:
                        # a file or link stands where a directory was, or no
                        # directory can have that name: nothing below it exists
                        # (removing it is done; an undo can go on)
                        os.close(fd)
                        return None
                    raise RestoreError(
                        f"{self.root}: {path!r}: {part!r} is not a directory ({exc.strerror})"
                    ) from exc
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def put(self, info: FileInfo) -> None:
        """Make ``info.path`` hold ``info`` (temp + fsync + rename)."""
        data = self.objects.get(info.digest)
        pfd = self._parent(info.path, create=True)
        assert pfd is not None
        name = info.path.rsplit("/", 1)[-1]
        tmp = _tmp_name(name)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=pfd)
            if info.type == "link":
                if not data or b"\0" in data:  # no snapshot makes one: a crafted tree
                    raise RestoreError(
                        f"{self.root}: {info.path!r}: the snapshot's link target "
                        f"{data[:80]!r} is not a valid target"
                    )
                os.symlink(data, tmp, dir_fd=pfd)
            else:
                self._write(pfd, name, tmp, data, info.executable)
            try:
                os.replace(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
            except IsADirectoryError:
                os.rmdir(name, dir_fd=pfd)  # an empty directory left in the way
                os.replace(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
            self.dirty.add(info.path.rpartition("/")[0])
        finally:
            os.close(pfd)

    def _mode(self, pfd: int, name: str, executable: bool) -> int:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            perm = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
        except FileNotFoundError:
            perm = None
        if perm is None:
            perm = 0o666 & ~self.umask
        if executable:
            return perm | ((perm & 0o444) >> 2) | 0o100
        return perm & ~0o111

    def _write(self, pfd: int, name: str, tmp: str, data: bytes, executable: bool) -> None:
        mode = self._mode(pfd, name, executable)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o600, dir_fd=pfd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)

    def chmod(self, info: FileInfo) -> None:
        """Set the executable bit of ``info.path`` as ``info`` says."""
        pfd = self._parent(info.path, create=False)
        if pfd is None:
            raise RestoreError(f"{self.root}: {info.path!r} vanished before its mode was set")
        name = info.path.rsplit("/", 1)[-1]
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
            try:
                os.fchmod(fd, self._mode(pfd, name, info.executable))
            finally:
                os.close(fd)
        finally:
            os.close(pfd)

    def remove(self, path: str) -> None:
        """Remove the file or link at ``path`` (and its temporary twin); absent is fine."""
        pfd = self._parent(path, create=False)
        if pfd is None:
            return
        name = path.rsplit("/", 1)[-1]
        try:
            for victim in (name, _tmp_name(name)):
                try:
                    os.unlink(victim, dir_fd=pfd)
                except FileNotFoundError:
                    pass
                except IsADirectoryError:
                    pass  # a directory is not a planned file: left alone
                except OSError as exc:
                    if exc.errno != errno.ENAMETOOLONG:
                        raise  # (a name no file can have, from a crafted tree: absent)
            self.dirty.add(path.rpartition("/")[0])
        finally:
            os.close(pfd)

    def mkdir(self, path: str) -> None:
        """Make the empty directory ``path`` (and its parents); one there is fine."""
        pfd = self._parent(path, create=True)
        assert pfd is not None
        name = path.rsplit("/", 1)[-1]
        try:
            try:
                os.mkdir(name, 0o777, dir_fd=pfd)
                self.dirty.add(path.rpartition("/")[0])
            except FileExistsError:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    raise RestoreError(
                        f"{self.root}: {path!r}: something that is not a directory is in the way"
                    ) from None
        finally:
            os.close(pfd)

    def rmdir(self, path: str) -> None:
        """Remove the directory ``path`` if it is empty (one holding something,
        or gone, is left as it is)."""
        pfd = self._parent(path, create=False)
        if pfd is None:
            return
        try:
            os.rmdir(path.rsplit("/", 1)[-1], dir_fd=pfd)
            self.dirty.add(path.rpartition("/")[0])
        except OSError:
            pass
        finally:
            os.close(pfd)

    def drop_tmp(self, path: str) -> None:
        """Remove a temporary file a killed write may have left beside ``path``."""
        try:
            pfd = self._parent(path, create=False)
        except RestoreError:
            return
        if pfd is None:
            return
        try:
            os.unlink(_tmp_name(path.rsplit("/", 1)[-1]), dir_fd=pfd)
        except FileNotFoundError:
            pass
        finally:
            os.close(pfd)

    def prune(self, paths: Iterable[str]) -> None:
        """Remove directories above ``paths`` that are empty now (deepest first)."""
        dirs: set[str] = set()
        for path in paths:
            parts = path.split("/")[:-1]
            dirs.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
        for d in sorted(dirs, key=lambda p: -p.count("/")):
            pfd = self._parent(d, create=False)
            if pfd is None:
                continue
            try:
                os.rmdir(d.rsplit("/", 1)[-1], dir_fd=pfd)
                self.dirty.add(d.rpartition("/")[0])
            except OSError:
                pass  # not empty (or gone): kept
            finally:
                os.close(pfd)


def converge(disk: _Disk, states: list[tuple[str, FileInfo | None, FileInfo | None]]) -> None:
    """Make each path hold its wanted state: ``(path, now, wanted)``, ``None`` for
    absent. Removals first and empty directories pruned, so a file may replace a
    directory and back; then writes and recorded empty directories made, in
    path order; every step is idempotent."""
    for path, _, _ in states:
        disk.drop_tmp(path)
    gone = {path: now for path, now, wanted in states if wanted is None}
    for path in sorted(gone, reverse=True):
        now = gone[path]
        if now is not None and now.type == "dir":
            disk.rmdir(path)
        else:
            disk.remove(path)
    disk.prune(gone)
    for _, now, wanted in sorted(states, key=lambda s: s[0]):
        if wanted is None:
            continue
        op = _op(now, wanted)
        if op == "chmod":
            disk.chmod(wanted)
        elif op == "mkdir":
            disk.mkdir(wanted.path)
        else:
            disk.put(wanted)
    disk.sync()


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

    def apply(self, plan: RestorePlan, metadata: Mapping[str, Any] | None = None) -> list[str]:
        """Apply ``plan``; the paths touched. The journal stays (phase ``applied``)
        until :meth:`finish`: record the restore on the timeline in between."""
        with self._locked():
            return self._apply(plan, metadata)

    def _apply(self, plan: RestorePlan, metadata: Mapping[str, Any] | None) -> list[str]:
        if self.pending() is not None:
            raise RestorePending(f"{self.journal}: an interrupted restore must be recovered first")
        if plan.workdir != self.workdir:
            raise RestoreError(f"the plan is for {plan.workdir}, not {self.workdir}")
        wanted = {a.after.digest for a in plan.actions if a.after is not None}
        wanted |= {a.before.digest for a in plan.actions if a.before is not None}
        missing = self.objects.missing(wanted)
        if missing:
            raise RestoreError(f"{len(missing)} objects of the restore are not in the store")
        body: dict[str, Any] = {
            "v": JOURNAL_VERSION,
            "workdir": self.workdir,
            "phase": "applying",
            "target": plan.target,
            "before": plan.current,
            "metadata": dict(metadata or {}),
            "actions": [a.to_obj() for a in plan.actions],
        }
        self._write_journal(body)
        disk = _Disk(self.workdir, self.objects)
        try:
            converge(disk, [(a.path, a.before, a.after) for a in plan.actions])
        except (OSError, RestoreError) as exc:
            self._undo(plan, exc)
        body["phase"] = "applied"
        self._write_journal(body)
        return plan.touched

    def _undo(self, plan: RestorePlan, exc: BaseException) -> None:
        """A step failed (a path in the way, a full disk): put everything back
        now and say what failed; if even that fails, the journal stays for
        :meth:`recover`. Always raises."""
        try:
            converge(
                _Disk(self.workdir, self.objects),
                [(a.path, a.after, a.before) for a in plan.actions],
            )
        except (OSError, RestoreError) as again:
            raise RestoreError(
                f"{self.workdir}: the restore failed ({exc}) and so did undoing it "
                f"({again}); the journal {self.journal} is kept: fix that and recover"
            ) from exc
        self.finish()
        raise RestoreError(f"{self.workdir}: the restore failed and was undone: {exc}") from exc

    def finish(self) -> None:
        """Forget the journal of a restore that is applied and recorded."""
        self.journal.unlink(missing_ok=True)

    def recover(self) -> Recovery | None:
        """Finish what an interrupted restore left (see the module docstring)."""
        with self._locked():
            return self._recover()

    def _recover(self) -> Recovery | None:
        body = self.pending()
        if body is None:
            return None
        actions = body["actions"]
        touched = [a["path"] for a in actions]
        action: Literal["rolled back", "completed"] = "completed"
        if body["phase"] != "applied":
            disk = _Disk(self.workdir, self.objects)
            converge(disk, [(a["path"], _info(a["after"]), _info(a["before"])) for a in actions])
            action = "rolled back"
        self.finish()
        return Recovery(action, body["target"], body["before"], touched, body["metadata"])

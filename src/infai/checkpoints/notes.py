"""What a restore asks and says about each file: whose its last change was,
and what the restore did to it.

Model, in prose: a restore replaces the files on disk with a snapshot's. A
path changed on disk since the last snapshot is an edit the agent never saw
(the plan's conflicts, :func:`~.checkpoints.plan_restore`). A path whose last
change *was* recorded can still be the user's: a file written by hand between
two turns is first recorded by the next turn's "turn start" snapshot (or a
"before restore"/"before switch" one), not by a snapshot taken after a tool
call. :func:`hand_made` finds those among the planned paths, on the branch
being left after the point it shares with the event restored (changes before
that point are common to both sides: going to a branch whose agent changed a
file the user wrote earlier takes that branch's file, as asked). A change
recorded by a snapshot after a tool (``after bash``) or by a restore is the
agent's. Such paths are asked about like unsaved edits (keep mine, take the
snapshot's), and refused without ``force``.

After a restore, :func:`restored` names every path it changed, with what
happened to it: ``a.txt (+2 -1)``, ``mine.txt (removed)``, ``new.txt (added)``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from infai.store import CHECKPOINT_KINDS, SessionView, SnapshotRecord
from infai.store.objects import ObjectStore

from .diff import FileInfo, diff_trees, line_counts
from .restore import Action

#: text files at most this many of a restore get their lines counted (the rest:
#: "modified"): a restore of thousands of files never reads them all to say so
COUNTED = 50
#: nor one larger than this (bytes, either side): its lines are not counted
COUNTED_SIZE = 256 * 1024


def by_the_agent(record: object) -> bool:
    """Whether a workspace record's changes are the agent's: a snapshot after a
    tool call (its reason ``after NAME``) or a restore; a turn-start, "before
    restore" or "before switch" snapshot records what changed outside it."""
    if isinstance(record, SnapshotRecord):
        return record.reason.startswith("after ")
    return True


def hand_made(
    view: SessionView,
    objects: ObjectStore,
    paths: Iterable[str],
    target: str,
    left: str | None = None,
) -> list[str]:
    """Those of ``paths`` whose last recorded change on the branch being left
    (the path to ``left``; None: HEAD), after the last event it shares with
    ``target``'s path, was made outside the agent (see :func:`by_the_agent`).
    Reads the index of both paths and, newest first, the snapshots after that
    event until every path's last change is found."""
    on_left = view.path(left, to_boundary=False)
    shared = {entry.id for entry in view.path(target, to_boundary=False)}
    fork = 0
    while fork < len(on_left) and on_left[fork].id in shared:
        fork += 1
    marks = [e.id for e in on_left if e.kind in CHECKPOINT_KINDS]
    before = [e.id for e in on_left[:fork] if e.kind in CHECKPOINT_KINDS]
    after = marks[len(before) :]
    if not after:
        return []
    base = _tree(view, before[-1]) if before else None
    newer: str | None = _tree(view, after[-1])
    wanted = set(paths)  # (one never changed since the fork: the walk goes to it)
    found: list[str] = []
    for n in range(len(after) - 1, -1, -1):
        if not wanted:
            break
        older = base if n == 0 else _tree(view, after[n - 1])
        changed = {c.path for c in diff_trees(objects, older, newer)} & wanted
        if changed and not by_the_agent(view.event(after[n], resolve=True).record):
            found += changed
        wanted -= changed
        newer = older
    return sorted(found)


def _tree(view: SessionView, event_id: str) -> str:
    record = view.event(event_id, resolve=True).record
    tree = getattr(record, "tree", None)
    assert isinstance(tree, str), event_id
    return tree


def quoted(path: str) -> str:
    """A path for a line of text, quoted with escapes when it holds a newline,
    tab, quote or backslash (as :mod:`.workfiles` quotes names)."""
    if any(c in path for c in '\n\t"\\'):
        return json.dumps(path, ensure_ascii=False)
    return path


def _what(objects: ObjectStore, action: Action, count: bool) -> tuple[str, str, Any]:
    """(change, label, (added, removed) or None) of one path a restore changed."""
    old, new = action.before, action.after
    if new is None:
        return "removed", "removed", None
    if old is None:
        return "added", "added", None
    if action.op == "chmod":
        return "mode", "now executable" if new.executable else "no longer executable", None
    if old.type != new.type:
        return "type", f"now a {_kind(new)}", None
    small = max(old.size, new.size) <= COUNTED_SIZE
    lines = line_counts(objects, old, new) if count and small else None
    if lines is None:
        return "modified", "modified", None
    return "modified", f"+{lines[0]} -{lines[1]}", lines


def _kind(info: FileInfo) -> str:
    return {"link": "symlink", "dir": "directory"}.get(info.type, "file")


def restored(
    objects: ObjectStore, actions: Iterable[Action], touched: Iterable[str]
) -> tuple[str, list[dict[str, Any]]]:
    """The line naming every path a restore changed, with what happened to it
    (``restored 3 files: a.txt (+2 -1), mine.txt (removed), new.txt (added)``),
    and the same as data for ``--json`` and the server (``path``, ``change``,
    and for a text file modified, ``added`` and ``removed`` lines). Nothing
    changed: ``""`` and ``[]``."""
    done = set(touched)
    plan: Mapping[str, Action] = {a.path: a for a in actions if a.path in done}
    said: list[str] = []
    data: list[dict[str, Any]] = []
    counted = 0
    for path in sorted(plan):
        action = plan[path]
        count = counted < COUNTED and action.op == "write"
        counted += count
        change, label, lines = _what(objects, action, count)
        said.append(f"{quoted(path)} ({label})")
        item: dict[str, Any] = {"path": path, "change": change}
        if lines is not None:
            item.update(added=lines[0], removed=lines[1])
        data.append(item)
    if not said:
        return "", []
    files = "file" if len(said) == 1 else "files"
    return f"restored {len(said)} {files}: " + ", ".join(said), data


__all__ = ["by_the_agent", "hand_made", "quoted", "restored"]

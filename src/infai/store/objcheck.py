"""Checking the objects a session's events name: fsck's part for workspace snapshots.

Model, in prose: a snapshot or restore event names a root tree in the store's
objects, and a message may name its tool manifest (``metadata.tool_manifest``).
Those objects live outside the session (shared by the whole store), so a
session's own bytes can be intact while what it names is gone: removed by a gc
that was wrongly told, lost with the objects database, or damaged. The check
reads every tree a root reaches (each distinct tree once) and asks whether
every file content, link target and manifest is there, in one query, without
reading them: file contents can be gigabytes, and their digests are verified
whenever they are read anyway. Each problem names the event whose root it is.

Such a problem is reported, but it does not mark the session damaged: its
conversation is intact and can go on; only a restore to that snapshot cannot.
"""

from __future__ import annotations

from .contract import SessionView
from .errors import StoreError
from .gc import session_roots
from .objects import ObjectStore
from .report import FsckReport, Problem
from .trees import decode_tree


def _walk(objects: ObjectStore, root: str, trees: dict[str, set[str]]) -> set[str]:
    """The leaves below ``root`` (file contents, link targets); raises on a tree
    that is missing or does not decode. ``trees`` caches each tree's leaves."""
    leaves: set[str] = set()
    pending = [root]
    seen: set[str] = set()
    while pending:
        digest = pending.pop()
        if digest in seen:
            continue
        seen.add(digest)
        if digest in trees:
            leaves |= trees[digest]
            continue
        own: set[str] = set()
        for entry in decode_tree(objects.get(digest), f"tree {digest}"):
            if entry.type == "dir":
                pending.append(entry.digest)
            else:
                own.add(entry.digest)
        trees[digest] = own
        leaves |= own
    return leaves


def check_objects(objects: ObjectStore, view: SessionView, report: FsckReport) -> None:
    """Add a problem to ``report`` for each event whose root tree is missing or
    damaged, or reaches (or names) an object that is not stored."""
    sid = report.session_id
    try:
        roots, named = session_roots(view)
    except StoreError:
        return  # the session's own damage is reported by the backend's check
    cache: dict[str, set[str]] = {}
    below: dict[str, set[str]] = {}
    for root, event_id in sorted(roots.items(), key=lambda item: item[1]):
        try:
            below[event_id] = _walk(objects, root, cache)
        except StoreError as exc:
            report.problems.append(
                Problem(f"session {sid} event {event_id}", 0, f"snapshot tree {root}: {exc}")
            )
    wanted = set(named) | set().union(*below.values())
    absent = objects.missing(wanted) if wanted else set()
    for event_id, leaves in below.items():
        lost = sorted(leaves & absent)
        if lost:
            detail = f"its snapshot names {len(lost)} missing object(s), e.g. {lost[0]}"
            report.problems.append(Problem(f"session {sid} event {event_id}", 0, detail))
    for digest, event_id in sorted(named.items(), key=lambda item: item[1]):
        if digest in absent:
            detail = f"its tool manifest {digest} is not stored"
            report.problems.append(Problem(f"session {sid} event {event_id}", 0, detail))

"""Where a Pi ``/fork`` (v1: ``/branch``) file left the session it was forked from.

Model, in prose: a fork file starts with a copy of its parent's history up to
the fork point, then goes on with its own entries. Formats v2 and v3 copy the
entries with their ids, so the fork point is the last entry both files hold
under the same parent. Format v1 entries have no ids, and Pi wrote two kinds of
copy, both matched here by content:

- *entries copied verbatim* (``createBranchedSessionFromEntries``): the fork's
  first entries equal the parent's first entries, timestamps and all; the fork
  point is the last one they share, by position;
- *messages copied from the live context* (``createBranchedSession``): each
  message of the context (Pi's ``state.messages``) is written again under a new
  entry timestamp, the ``message`` object itself unchanged (it carries its own
  millisecond timestamp). After a compaction that context starts with a summary
  message no entry of the parent holds, then the kept messages, then the later
  ones. The fork's messages are therefore matched against the messages on the
  parent's *imported* path, which after a compaction holds the kept entries
  again (see :mod:`.pi`): the longest run of consecutive equal messages wins,
  and its last message's event is the fork point. Two equally long runs ending
  on different entries cannot be told apart: the fork is then linked to the
  session only and the report says why; so it is when no message matches.

:func:`fork_point` returns the event and a note of the rule that found it,
which the importer keeps in the session's import metadata.
"""

from __future__ import annotations

import json
from typing import Any

from infai.store.codec import NIL_ID

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .pi import _Reader


def fork_point(child: _Reader, parent: _Reader, named: str) -> tuple[str | None, dict[str, Any]]:
    """The event of ``parent`` that ``child`` was forked at (None: cannot tell,
    reported on the child's report) and a note saying how it was found."""
    if child.version >= 2 and parent.version >= 2:
        shared = [
            key
            for key in child.keys[1:]
            if key in parent.parent_of and parent.parent_of[key] == child.parent_of[key]
        ]
        point = parent.tree.id_of(shared[-1]) if shared else None
        return point, {"rule": "entry ids shared with the parent", "entries": len(shared)}
    copied = _verbatim_prefix(child.entries, parent.entries)
    if copied:
        point = parent.tree.id_of(parent.keys[copied])
        return point, {"rule": "entries copied verbatim from the parent", "entries": copied}
    return _by_messages(child, parent, named)


def _verbatim_prefix(child: list[dict[str, Any]], parent: list[dict[str, Any]]) -> int:
    """How many of the first entries the two files hold alike (timestamps included)."""
    count = 0
    for mine, theirs in zip(child, parent, strict=False):
        if mine != theirs:
            break
        count += 1
    return count


def _fingerprint(entry: dict[str, Any]) -> str | None:
    """A message entry's message, as canonical text (None: not a message entry)."""
    message = entry.get("message")
    if entry.get("type") != "message" or not isinstance(message, dict):
        return None
    return json.dumps(message, sort_keys=True, ensure_ascii=False)


def _path_messages(parent: _Reader) -> list[tuple[str, str, str]]:
    """The message entries on the parent's imported path, root first, each as
    (fingerprint, entry key, the last event of that entry on the path)."""
    specs, head = parent.tree.finish(parent.last, dangling="previous")
    above = {spec[0]: spec[1] for spec in specs}
    key_of = {node.id: key for key, node in parent.tree.nodes.items()}
    path: list[str] = []
    walk = head
    while walk is not None and walk != NIL_ID:
        path.append(walk)
        walk = above.get(walk)
    out: list[tuple[str, str, str]] = []
    for event_id in reversed(path):
        entry_key = parent.entry_of.get(key_of.get(event_id, ""))
        entry = parent.entry_by_key.get(entry_key) if entry_key else None
        fingerprint = _fingerprint(entry) if entry else None
        if entry_key is None or fingerprint is None:
            continue
        if out and out[-1][1] == entry_key:  # a reply's tool calls: the last one is the point
            out[-1] = (fingerprint, entry_key, event_id)
        else:
            out.append((fingerprint, entry_key, event_id))
    return out


def _by_messages(child: _Reader, parent: _Reader, named: str) -> tuple[str | None, dict[str, Any]]:
    """The fork point found by matching the fork's messages on the parent's path."""
    theirs = _path_messages(parent)
    mine = [f for f in (_fingerprint(e) for e in child.entries) if f is not None]
    where: dict[str, list[int]] = {}
    for position, (fingerprint, _key, _event) in enumerate(theirs):
        where.setdefault(fingerprint, []).append(position)
    first = next((i for i, f in enumerate(mine) if f in where), None)
    if first is None:
        child.report.warn(
            None,
            f"forked from {named}, but none of its messages is in that session: "
            "linked to the session only (Pi v1 keeps no fork point)",
        )
        return None, {"rule": "no message in common with the parent"}
    runs: list[tuple[int, int]] = []  # (length, last position)
    for start in where[mine[first]]:
        length = 0
        while (
            first + length < len(mine)
            and start + length < len(theirs)
            and mine[first + length] == theirs[start + length][0]
        ):
            length += 1
        runs.append((length, start + length - 1))
    longest = max(length for length, _end in runs)
    ends = [end for length, end in runs if length == longest]
    if len({theirs[end][1] for end in ends}) > 1:
        child.report.warn(
            None,
            f"forked from {named}: its copied messages match {len(ends)} places in that "
            "session equally well: linked to the session only",
        )
        return None, {"rule": "copied messages match several places in the parent"}
    # the same entry twice (kept before a compaction and again after it): the later one
    # is on the context the fork was made from
    end = max(ends)
    note = {"rule": "messages matched by content", "messages": longest, "unmatched_before": first}
    return theirs[end][2], note

"""OpenCode's pending revert, applied to an imported session without losing anything.

Model, in prose: OpenCode's ``session.revert`` is ``{messageID, partID?}``.
While it is pending, OpenCode shows the session as it was before it; at the
next prompt (``SessionRevert.cleanup``) it deletes the message ``messageID``
and every later one, or, with a ``partID``, keeps that message's parts before
``partID`` (clearing an assistant's error) and deletes the parts from
``partID`` on and every later message.

infai's HEAD is always the newest event, and its log is append-only, so the
kept state is written as a branch and HEAD put on it:

- a message-level revert: a ``branch_summary`` after the last event kept (the
  one before ``messageID``'s first), which leaves the reverted messages on an
  abandoned branch beside it;
- a part-level revert: the cut message is converted twice. First as OpenCode
  keeps it (its parts before ``partID``), under its own event keys, exactly as
  an import made after OpenCode's cleanup converts it, so such a later import
  finds those events present and hangs the new prompt from them. Then whole, as
  the source holds it now: each event equal to a kept one under the same parent
  is shared, and the rest (from where the two differ) goes under keys marked
  ``~reverted``, with the later messages after them. The ``branch_summary``
  then follows the last kept event.

Nothing is dropped: the reverted parts and messages stay on their branch.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from infai.store.records import BranchSummaryRecord, Record, record_to_obj

from .base import EventTree, ImportReport

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .opencode import _Converter

#: the part types OpenCode counts as something left of a message (``SessionRevert.revert``)
_USEFUL = ("text", "tool")


def replay_key(tree: EventTree, key: str, parent: str | None, record: Record) -> str | None:
    """The key for the whole version's event ``key`` after ``parent``: None when the
    kept version holds the same event there (shared), else ``key`` or, if the kept
    version used it for something else, ``key~reverted``."""
    if key not in tree.nodes:
        return key
    if tree.parent(key) == parent and record_to_obj(tree.record(key)) == record_to_obj(record):
        return None
    return f"{key}~reverted"


def cut_message(
    conv: _Converter,
    mid: str,
    role: str,
    info: dict[str, Any],
    parts: list[dict[str, Any]],
    part_id: str,
) -> None:
    """Convert the message a part-level revert cuts: kept parts, then whole."""
    at = next((n for n, p in enumerate(parts) if p.get("id") == part_id), None)
    if at is None:  # apply_revert reports it
        conv.message(mid, role, info, parts)
        return
    kept = parts[:at]
    start = conv.previous
    if any(p.get("type") in _USEFUL for p in kept):
        counted = Counter(conv.report.kept)  # the whole version counts them
        shown = {k: v for k, v in info.items() if k != "error"}  # cleanup clears it
        conv.message(mid, role, shown, kept)
        conv.report.kept = counted
    conv.kept_tail = conv.previous
    conv.part_reverted = True
    conv.previous = start
    conv.replaying = True
    try:
        conv.message(mid, role, info, parts)
    finally:
        conv.replaying = False


def apply_revert(conv: _Converter, revert: object, report: ImportReport) -> str | None:
    """A pending revert (``session.revert``): the key of the event HEAD should be
    (None: the session is imported whole, with a warning saying why)."""
    fields = revert if isinstance(revert, dict) else {}
    target, part = fields.get("messageID"), fields.get("partID")
    whole = "the session has a pending revert in OpenCode: imported whole"
    if not isinstance(target, str) or target not in conv.before or conv.previous is None:
        report.warn(None, whole)
        return None
    if part is not None and not conv.part_reverted:
        report.warn(None, f"{whole} (part {part!r} is not in message {target})")
        return None
    kept = conv.kept_tail if conv.part_reverted else conv.before[target]
    if kept is None or conv.tree.resolve(conv.previous) == conv.tree.resolve(kept):
        report.warn(None, whole)
        return None
    where = f"part {part} of message {target}" if conv.part_reverted else f"message {target}"
    record = BranchSummaryRecord(
        summary=f"Undone in OpenCode (a pending revert to before {where}): "
        "what followed is on the branch left here.",
        abandoned_tip=conv.tree.id_of(conv.previous),
        common_ancestor=conv.tree.id_of(kept),
    )
    key = f"revert:{part}" if conv.part_reverted else f"revert:{target}"
    conv.tree.add(key, kept, "assistant", conv.clock, record)
    undone = (
        f"message {target} from its part {part} on, and the messages after it, are"
        if conv.part_reverted
        else f"the messages from {target} on are"
    )
    report.warn(
        None,
        f"the session has a pending revert in OpenCode: {undone} left on a branch, "
        "and HEAD is before them",
    )
    return key

"""Where a continue from an event inside a tool batch really continues.

Why: a reply that calls tools is stored as its message, its calls, then each
call's result (with the files' snapshots and hooks in between). Continuing from
a call whose result *was* recorded after it would leave that call without a
result on the new path, and the context would then tell the model that "the
session stopped before it did", and the TUI would draw the call as running:
both false. A user who picks a call in the timeline means "after this call",
and a call's meaning is its result.

So a pick inside a tool batch continues from the point where every call of the
batch made up to and including the picked one has its result, with the files'
snapshots recorded right after that (the files are as the tools left them,
matching what the model is told). A call whose result was never recorded (the
turn really was interrupted) stays the pick: the interruption then is true.
Only the index is read (results answer their calls in order, as
:func:`~.loop.run_calls` appends them), never a record or a blob.
"""

from __future__ import annotations

from infai.store import (
    CHECKPOINT_KINDS,
    HOOK_KINDS,
    Entry,
    EventNotFound,
    InvalidInput,
    SessionView,
)

#: what a batch of tool calls and their results may hold between them
_IN_BATCH = frozenset({"tool_call", "tool_result", *CHECKPOINT_KINDS, *HOOK_KINDS})
#: how many events after a batch's last one a continuation is looked for
_SCAN = 2000


def _next_in_batch(view: SessionView, entry: Entry) -> Entry | None:
    """The event that continued ``entry``'s batch (its oldest child of a batch
    kind), found by reading forward: a child's sequence number is always higher."""
    for seq in range(entry.seq + 1, min(view.count, entry.seq + 1 + _SCAN)):
        child = view.entry_at(seq)
        if child.parent_id == entry.id and child.kind in _IN_BATCH:
            return child
    return None


def _waiting_at(view: SessionView, entry: Entry) -> int:
    """How many calls of ``entry``'s batch are still without a result at ``entry``."""
    batch: list[Entry] = []
    node: Entry | None = entry
    while node is not None and node.kind in _IN_BATCH:
        batch.append(node)
        node = view.entry_at(node.parent_seq) if node.parent_seq >= 0 else None
    waiting = 0
    for item in reversed(batch):
        if item.kind == "tool_call":
            waiting += 1
        elif item.kind == "tool_result":
            waiting = max(0, waiting - 1)
    return waiting


def continue_point(view: SessionView, event_id: str) -> str:
    """The event a continue picked at ``event_id`` continues from (see the module):
    ``event_id`` itself unless it is a tool call or result whose batch's results
    were recorded after it. An id the view does not hold is returned as given
    (the caller's own check says what is wrong with it)."""
    try:
        entry = view.entry(event_id)
    except (EventNotFound, InvalidInput):
        return event_id
    if entry.kind not in ("tool_call", "tool_result"):
        return event_id
    waiting = _waiting_at(view, entry)
    node = entry
    while waiting:
        found = _next_in_batch(view, node)
        if found is None:
            return event_id  # never answered: the interruption is true
        node = found
        if node.kind == "tool_call":
            waiting += 1
        elif node.kind == "tool_result":
            waiting -= 1
    while (after := _next_in_batch(view, node)) is not None and after.kind in CHECKPOINT_KINDS:
        node = after  # the files as the tools left them
    return node.id

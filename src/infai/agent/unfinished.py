"""A turn its process never finished: found at HEAD, and recorded as interrupted once.

Why: a cancelled turn records its interruption (:func:`~.loop.run_turn`), but a
process killed outright (SIGKILL, a power cut, the OOM killer) records nothing
more. Its session then ends in a prompt with no answer, or a tool call with no
result, and the next turn would send the model two user messages in a row with
nothing between them to say why. So before a session is written again, its HEAD
is looked at, and a turn left unfinished gets the same interruption marker a
cancel appends (metadata ``unfinished: true`` says it was found, not seen).

When (see :class:`~.session.AgentSession`): only while no other process can be
running that turn. A store whose writers exclude each other (the file store's
lock) is checked when the session is opened; any store, again whenever a turn,
compaction or switch takes the session's lease and finds HEAD moved since this
process last left it (another process wrote, and may have died writing).

What counts as unfinished, from HEAD back past the files' snapshots and
restores: a turn's prompt (:data:`~.loop.TURN_PROMPT`) with no answer; a tool
call or a tool result of a turn (the model was still to answer), found by
walking back to the turn's prompt. The marker itself, an answer (a reply cut
short too: the next prompt follows the model's words, not another prompt), a
compaction, a summary, or a user message that no turn was started for
(``infai session append``, an imported session) is not. Only the index is read,
and the one prompt record that decides it (never a reply: a large one is a blob
that opening a session does not read). Recording it moves HEAD onto the
marker, so a second opener (or a reopen) finds nothing to record: it is
recorded once.
"""

from __future__ import annotations

from infai.store import (
    CHECKPOINT_KINDS,
    NIL_ID,
    Entry,
    Event,
    HeadConflict,
    MessageRecord,
    SessionLog,
    SessionView,
)

from .loop import TURN_PROMPT, interruption_marker

#: what walking back from a tool call or result to its turn's prompt may pass
_WITHIN_TURN = frozenset({"tool_call", "tool_result", *CHECKPOINT_KINDS})


def _record(view: SessionView, entry: Entry) -> MessageRecord | None:
    record = view.event(entry.id, resolve=True).record
    return record if isinstance(record, MessageRecord) else None


def _parent(view: SessionView, entry: Entry) -> Entry | None:
    if entry.parent_id == NIL_ID:
        return None
    return view.entry_at(entry.parent_seq)


def _is_prompt(view: SessionView, entry: Entry) -> bool:
    if entry.kind != "message" or entry.role != "user":
        return False
    record = _record(view, entry)
    return record is not None and record.metadata.get(TURN_PROMPT) is True


def _prompt_before(view: SessionView, entry: Entry | None) -> bool:
    """Whether walking back from ``entry`` over the turn's tool calls, results,
    assistant messages and snapshots reaches a turn's prompt."""
    while entry is not None:
        if entry.kind == "message" and entry.role == "assistant":
            entry = _parent(view, entry)
            continue
        if entry.kind not in _WITHIN_TURN:
            return _is_prompt(view, entry)
        entry = _parent(view, entry)
    return False


def unfinished(view: SessionView) -> bool:
    """Whether the turn at ``view``'s HEAD was left unfinished (see the module)."""
    entry = None if view.head is None else view.entry_at(view.seq_of(view.head))
    while entry is not None and entry.kind in CHECKPOINT_KINDS:  # files, not conversation
        entry = _parent(view, entry)
    if entry is None:
        return False
    if entry.kind in ("tool_call", "tool_result"):
        return _prompt_before(view, entry)
    return _is_prompt(view, entry)


def record_unfinished(writer: SessionLog) -> Event | None:
    """Append the interruption marker after HEAD if HEAD's turn was left unfinished
    (the marker, else None). Blocking store work. An event picked to continue from
    stays picked. If another process appended first (a shared store's
    :class:`~infai.store.HeadConflict`), it is alive and writing: nothing is recorded."""
    if writer.head is None or not unfinished(writer):
        return None
    picked = writer.pending_parent
    try:
        marker = writer.append(interruption_marker(unfinished=True), "user", parent=writer.head)
    except HeadConflict:
        return None
    if picked is not None:
        writer.select(picked)
    return marker

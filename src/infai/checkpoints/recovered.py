"""Recording a restore that recovery found completed: where, and exactly once.

Why a module of its own: a restore is applied, recorded on a timeline, and
only then is its journal deleted (:mod:`.checkpoints.restore`); recovery of an
``applied`` journal calls :func:`record_recovered` before deleting it. So a
kill anywhere leaves either no journal (the record, if the files changed, is
written) or a journal whose record may or may not exist. This module tells
the two apart, and records it in the second case only.

How, reading only what it must: the record names the restore by its tag
(``metadata.journal``, the journal's ``tmp``), and the journal says where such
a record may have been appended: on the starting session, at or after the
sequence number it had when the restore began (``metadata.seq``); on each
session a recovery was about to append to, at or after its count then
(``metadata.recording``, session id to sequence number, written and fsynced
before that append). A recovery reads only those events (as a rule none or
one per place), never a whole session, and appends only when none of them is
the record.

Where, when not recorded yet (see :meth:`.SessionCheckpoints.recover`): on the session
that started the restore, through ``writer`` when that is the one recovering,
else through its own writer when it is open nowhere; else (open elsewhere, or
removed) on ``writer``'s timeline, naming that session in the metadata.

A journal of an older infai (no tag, or no ``seq``): a record the older code
appended carries no tag, so the older check stands for it: nothing is
appended when the files at the session's HEAD already are the restore's tree.
"""

from __future__ import annotations

from typing import Any

from infai.store import (
    CHECKPOINT_KINDS,
    HeadConflict,
    RestoreRecord,
    SessionLog,
    SessionNotFound,
    SessionStore,
    SessionView,
    SnapshotRecord,
    WriterLocked,
)

from .facade import Checkpoints
from .restore import Recovery

#: the metadata key of a restore record naming its restore (the journal's tag)
JOURNAL = "journal"


def record_recovered(
    store: SessionStore, cp: Checkpoints, writer: SessionLog, rec: Recovery
) -> str:
    """Record the completed restore ``rec`` unless a timeline has it already; what
    the recovery's notice adds about where (``""``: on ``writer``'s, or nothing)."""
    sid, source = rec.metadata.get("session"), rec.metadata.get("source")
    if not isinstance(sid, str) or not isinstance(source, str):
        return ""  # no session named: nowhere to record it
    found = _recorded(store, writer, rec) if rec.tag else None
    if found is not None:
        return "" if found == writer.session_id else f" and recorded on session {found}'s timeline"
    place = _Place(cp, rec)
    meta: dict[str, Any] = {JOURNAL: rec.tag} if rec.tag else {}
    if rec.left:
        meta["left"] = rec.left
    parent = rec.metadata.get("parent")
    record = RestoreRecord(
        tree=rec.target,
        source=source,
        before=rec.metadata.get("before"),
        touched=rec.touched,
        metadata=meta or None,
    )
    if sid == writer.session_id:
        place.append(writer, record, parent if isinstance(parent, str) else None)
        return ""
    try:
        if store.marked_open([sid]):
            raise WriterLocked(f"session {sid} is open")
        with store.open_writer(sid, timeout=0) as other:
            place.append(other, record, parent if isinstance(parent, str) else None)
        return f" and recorded on session {sid}'s timeline"
    except (WriterLocked, SessionNotFound, HeadConflict) as exc:
        why = exc
    note: dict[str, Any] = {"session": sid, "source": source, "before": record.before, **meta}
    note["note"] = (
        f"a restore session {sid} started (of its event {source}), completed by "
        f"recovery in this session: it could not be recorded there ({why})"
    )
    place.append(
        writer, RestoreRecord(tree=rec.target, source=source, touched=rec.touched, metadata=note)
    )
    return (
        f"; session {sid} could not record it ({why}): recorded on this "
        f"session's timeline instead, naming that session and event {source}"
    )


class _Place:
    """Appends a recovered restore's record, noting first in the journal where."""

    def __init__(self, cp: Checkpoints, rec: Recovery) -> None:
        self.cp = cp
        self.rec = rec
        #: the journal's places so far (its metadata as read, plus this recovery's notes)
        self.recording = dict(_recording(rec.metadata))
        #: whether its record is found by tag (else by the older check: see the module)
        self.exact = bool(rec.tag) and isinstance(rec.metadata.get("seq"), int)

    def append(self, log: SessionLog, record: RestoreRecord, parent: str | None = None) -> None:
        """Append ``record`` to ``log`` after ``parent`` (None: HEAD), durably noted
        in the journal first (a kill after the append is then found by the next
        recovery); an older infai's restore whose files HEAD already has is not
        appended again."""
        if not self.exact and _tree_at_head(log) == record.tree:
            return
        if self.rec.tag:
            since = self.recording.get(log.session_id, log.count)
            self.recording[log.session_id] = min(since, log.count)  # (noted before: keep it)
            self.cp.note({"recording": dict(self.recording)})
        log.append(record, "system", parent=parent)


def _recording(metadata: dict[str, Any]) -> dict[str, int]:
    found = metadata.get("recording")
    if not isinstance(found, dict):
        return {}
    return {str(s): n for s, n in found.items() if isinstance(n, int) and not isinstance(n, bool)}


def _recorded(store: SessionStore, writer: SessionLog, rec: Recovery) -> str | None:
    """The session whose timeline holds ``rec``'s record, if one does: only the
    events appended at or after each place the journal names are read."""
    places = list(_recording(rec.metadata).items())
    sid, seq = rec.metadata.get("session"), rec.metadata.get("seq")
    if isinstance(sid, str) and isinstance(seq, int):
        places.insert(0, (sid, seq))
    for session, since in places:
        if session == writer.session_id:
            if _holds(writer, since, rec.tag):
                return session
            continue
        try:
            with store.open_reader(session) as view:
                if _holds(view, since, rec.tag):
                    return session
        except SessionNotFound:
            continue  # removed since: whatever it held is gone with it
    return None


def _holds(view: SessionView, since: int, tag: str) -> bool:
    """Whether an event at or after ``since`` is the restore record tagged ``tag``."""
    for seq in range(max(since, 0), view.count):
        entry = view.entry_at(seq)
        if entry.kind != RestoreRecord.kind:
            continue
        record = view.event(entry.id, resolve=True).record
        if isinstance(record, RestoreRecord) and record.metadata.get(JOURNAL) == tag:
            return True
    return False


def _tree_at_head(view: SessionView) -> str | None:
    """The files at HEAD: the tree of the nearest snapshot or restore on its path
    (as :func:`.workfiles.nearest` finds it; that module imports this one)."""
    if view.head is None:
        return None
    for entry in reversed(view.path(None, to_boundary=False)):
        if entry.kind in CHECKPOINT_KINDS:
            record = view.event(entry.id, resolve=True).record
            assert isinstance(record, SnapshotRecord | RestoreRecord)
            return record.tree
    return None

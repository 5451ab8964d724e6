"""Salvage: copy every event of a damaged session that still verifies into a new one.

Model, in prose: damage (a flipped byte in a chunk line, a blob that no longer
hashes to its name) makes a session refuse what depends on it: export, copy
and repair stop at the first bad byte, and appending is refused once a check
has found it. Salvage is the way out. It reads the session through the
ordinary reader, event by event in sequence order, and keeps an event when its
own bytes verify (checksum, blob digest) and its parent was kept; so the intact
prefix and every branch that does not descend from the damage survive, with
their ids, parents, branch points and timestamps. What is kept is written to a
new session (all or nothing, like an import); what is lost is listed with why.
The damaged session is left exactly as it was, for a closer look.

Snapshot and restore events are kept like any other: the objects they name are
the store's, not the session's, so the new session reaches the same files
(and gc keeps them while either session does); it is format 2 as soon as it
holds one, as any session is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .codec import NIL_ID
from .contract import SessionStore
from .errors import CorruptionError
from .events import EventSpec

#: events written per batch into the new session
_STEP = 1000


@dataclass
class SalvageReport:
    """What salvage kept and lost; ``target`` is the new session (None: nothing kept)."""

    source: str
    target: str | None = None
    kept: int = 0
    #: (event id, why it could not be kept), in sequence order
    lost: list[tuple[str, str]] = field(default_factory=list)


def salvage_session(store: SessionStore, session_id: str) -> SalvageReport:
    """Copy what verifies of ``session_id`` into a new session; change nothing else.

    A damaged index (the list of events itself) is not got around here: the
    file store's ``fsck --repair`` rebuilds it from the chunks first.
    """
    info = store.info(session_id)
    report = SalvageReport(info.id)
    specs: list[EventSpec] = []
    kept: set[str] = set()
    with store.open_reader(info.id) as view:
        for entry in view.entries():
            if entry.parent_id != NIL_ID and entry.parent_id not in kept:
                report.lost.append((entry.id, f"its parent {entry.parent_id} was not kept"))
                continue
            try:
                event = view.event(entry.id, resolve=True)
                record = view.resolve(event)
            except CorruptionError as exc:
                report.lost.append((entry.id, str(exc)))
                continue
            specs.append(
                (event.id, event.parent_id, event.branch_from, event.role, event.timestamp, record)
            )
            kept.add(event.id)
    if not specs:
        return report
    name = f"{info.name or info.id[:8]} (salvaged)"
    created = store.create_session(name=name, working_dir=info.working_dir, model=info.model)
    try:
        with store.open_writer(created.id) as writer:
            for start in range(0, len(specs), _STEP):
                writer.import_batch(specs[start : start + _STEP])
        store.update_info(created.id, extra={**info.extra, "salvaged_from": info.id})
    except BaseException:
        store.remove_session(created.id)
        raise
    report.target, report.kept = created.id, len(specs)
    return report


__all__ = ["SalvageReport", "salvage_session"]

"""Salvage: copy every event of a damaged session that still verifies into a new one.

Model, in prose: damage (a flipped byte in a chunk line, a blob that no longer
hashes to its name) makes a session refuse what depends on it: export, copy
and repair stop at the first bad byte, and appending is refused once a check
has found it. Salvage is the way out. It reads the session through the
ordinary reader, event by event in sequence order, and keeps every event whose
own bytes verify (checksum, blob digest), with its id, parent, branch point and
timestamp. An event whose parent was lost is kept too: it is linked to a *gap*
(a :class:`~infai.store.records.GapRecord` event, new id) that stands where the
lost events were, names them (``lost``: the lost parent first, then its lost
ancestors) and hangs from the nearest kept ancestor, or is a root when none was
kept. Kept events that lost the same parent share one gap, so the tree keeps
its shape with the hole made visible, and the model resuming the copy is told
of it (:mod:`infai.agent.context`). The index entries (which verify apart from
the chunk lines) say whose parent each lost event was. What is kept is written
to a new session (all or nothing, like an import); what is lost is listed with
why, and each gap with the ids it stands for. The damaged session is left
exactly as it was, for a closer look.

Snapshot and restore events are kept like any other: the objects they name are
the store's, not the session's, so the new session reaches the same files
(and gc keeps them while either session does); it is format 2 as soon as it
holds one, as any session is, and format 3 once it holds a gap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .codec import NIL_ID, new_event_id
from .contract import SessionStore
from .errors import CorruptionError
from .events import Entry, EventSpec
from .records import GapRecord

#: events written per batch into the new session
_STEP = 1000
#: the role of a gap event
GAP_ROLE = "system"


@dataclass
class SalvageReport:
    """What salvage kept and lost; ``target`` is the new session (None: nothing kept)."""

    source: str
    target: str | None = None
    #: events of the source kept (gaps not counted)
    kept: int = 0
    #: (event id, why it could not be kept), in sequence order
    lost: list[tuple[str, str]] = field(default_factory=list)
    #: (gap event id, the lost ids it stands for), for each gap written
    gaps: list[tuple[str, list[str]]] = field(default_factory=list)


def _gap(parent: Entry, entries: dict[str, Entry], kept: set[str]) -> tuple[str, list[str]]:
    """Where a gap for the lost ``parent`` hangs (the nearest kept ancestor, else the
    root) and the lost ids it stands for, nearest first."""
    chain, at = [], parent.id
    while at != NIL_ID and at not in kept:
        chain.append(at)
        above = entries.get(at)
        at = above.parent_id if above is not None else NIL_ID
    return at, chain


def _gap_spec(parent: Entry, above: str, chain: list[str]) -> EventSpec:
    what = "event" if len(chain) == 1 else "events"
    summary = f"{len(chain)} {what} lost here to damage: {', '.join(chain)}"
    record = GapRecord(summary=summary, lost=chain)
    return (new_event_id(), above, None, GAP_ROLE, parent.timestamp, record)


def salvage_session(store: SessionStore, session_id: str) -> SalvageReport:
    """Copy what verifies of ``session_id`` into a new session; change nothing else.

    A damaged index (the list of events itself) is not got around here: the
    file store's ``fsck --repair`` rebuilds it from the chunks first.
    """
    info = store.info(session_id)
    report = SalvageReport(info.id)
    specs: list[EventSpec] = []
    kept: set[str] = set()
    gaps: dict[str, str] = {}  # lost parent id -> the gap standing for it
    with store.open_reader(info.id) as view:
        entries = {e.id: e for e in view.entries()}
        for entry in entries.values():
            try:
                event = view.event(entry.id, resolve=True)
                record = view.resolve(event)
            except CorruptionError as exc:
                report.lost.append((entry.id, str(exc)))
                continue
            parent, branch_from = event.parent_id, event.branch_from
            if parent != NIL_ID and parent not in kept:
                if parent not in gaps:
                    above, chain = _gap(entries[parent], entries, kept)
                    spec = _gap_spec(entries[parent], above, chain)
                    specs.append(spec)
                    gaps[parent] = spec[0]
                    report.gaps.append((spec[0], chain))
                parent = gaps[parent]
                branch_from = parent if branch_from is not None else None
            specs.append((event.id, parent, branch_from, event.role, event.timestamp, record))
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
    report.target, report.kept = created.id, len(specs) - len(report.gaps)
    return report


__all__ = ["GAP_ROLE", "SalvageReport", "salvage_session"]

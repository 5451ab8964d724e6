"""What the store hands back: events, timeline entries, and the active context."""

from __future__ import annotations

from dataclasses import dataclass

from .format import IndexEntry
from .records import CompactionRecord, Record

#: A timeline entry: an event's links, kind, role, location and preview, read from
#: the index alone (drawing a timeline never opens a chunk or a blob).
Entry = IndexEntry


@dataclass(frozen=True, slots=True)
class Event:
    """One event. ``record`` is ``None`` while it lives in an unresolved blob."""

    id: str
    parent_id: str
    branch_from: str | None
    kind: str
    role: str
    timestamp: str
    record: Record | None
    digest: str | None
    seq: int
    preview: str


@dataclass(frozen=True, slots=True)
class Context:
    """The active context: from the nearest compaction (or the root) to the tip.

    ``events[0]`` is the compaction event when the path has one; every record is
    resolved (blobs loaded and their digests checked).
    """

    events: list[Event]

    @property
    def boundary(self) -> Event | None:
        """The compaction event the context starts from, if any."""
        if self.events and isinstance(self.events[0].record, CompactionRecord):
            return self.events[0]
        return None

"""What the store hands back: events, timeline entries, and the active context.

Model, in prose: a session is a tree of events. An :class:`Entry` is an
event's place in that tree (sequence number, id, parent, branch point, kind,
role, time and a short preview), cheap to read in bulk for drawing a timeline;
an :class:`Event` adds the record itself (or, while it lives in an unresolved
blob, its digest); a :class:`Context` is the active path a model sees, from the
nearest compaction to the tip. :data:`EventSpec` is an event to write with its
ids and time given (import and copy preserve them). Every backend hands back
these same types; a backend may subclass :class:`Entry` to keep where its
events live (the file store's chunk locations).
"""

from __future__ import annotations

from .records import CompactionRecord, Record, record_to_obj

#: (id, parent_id, branch_from, role, timestamp, record) of an event to write as given
EventSpec = tuple[str, str, "str | None", str, str, Record]


class Entry:
    """A timeline entry: an event's links, kind, role and preview, without its record."""

    __slots__ = (
        "blob",
        "branch_from",
        "id",
        "kind",
        "parent_id",
        "parent_seq",
        "preview",
        "role",
        "seq",
        "timestamp",
    )

    def __init__(
        self,
        *,
        seq: int,
        id: str,
        parent_id: str,
        parent_seq: int,
        branch_from: str | None,
        timestamp: str,
        kind: str,
        role: str,
        preview: str,
        blob: bool,
    ) -> None:
        self.seq = seq
        self.id = id
        self.parent_id = parent_id
        #: the parent's sequence number (-1 for a root)
        self.parent_seq = parent_seq
        self.branch_from = branch_from
        self.timestamp = timestamp
        self.kind = kind
        self.role = role
        self.preview = preview
        #: whether the record lives in a blob (resolved on demand)
        self.blob = blob

    def to_obj(self) -> dict[str, object]:
        """The entry as JSON-ready data."""
        return {
            "seq": self.seq,
            "parent_seq": self.parent_seq,
            "kind": self.kind,
            "id": self.id,
            "parent_id": self.parent_id,
            "branch_from": self.branch_from,
            "timestamp": self.timestamp,
            "role": self.role,
            "blob": self.blob,
            "preview": self.preview,
        }

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_obj() == other.to_obj()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_obj()!r})"


class Event:
    """One event. ``record`` is ``None`` while it lives in an unresolved blob."""

    __slots__ = (
        "branch_from",
        "digest",
        "id",
        "kind",
        "parent_id",
        "preview",
        "record",
        "role",
        "seq",
        "parent_seq",
        "timestamp",
    )

    def __init__(
        self,
        *,
        id: str,
        parent_id: str,
        branch_from: str | None,
        kind: str,
        role: str,
        timestamp: str,
        record: Record | None,
        digest: str | None,
        seq: int,
        preview: str,
        parent_seq: int = -1,
    ) -> None:
        self.id = id
        self.parent_id = parent_id
        self.branch_from = branch_from
        self.kind = kind
        self.role = role
        self.timestamp = timestamp
        self.record = record
        self.digest = digest
        self.seq = seq
        self.preview = preview
        #: the parent's sequence number (-1 for a root)
        self.parent_seq = parent_seq

    def to_obj(self) -> dict[str, object]:
        """The event as JSON-ready data (the record as stored; ``None`` if unresolved)."""
        return {
            "id": self.id,
            "parent_id": self.parent_id,
            "branch_from": self.branch_from,
            "kind": self.kind,
            "role": self.role,
            "timestamp": self.timestamp,
            "digest": self.digest,
            "record": None if self.record is None else record_to_obj(self.record),
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and all(
            getattr(self, f) == getattr(other, f) for f in self.__slots__
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Event(id={self.id!r}, kind={self.kind!r}, role={self.role!r}, seq={self.seq})"


class Context:
    """The active context: from the nearest compaction (or the root) to the tip.

    ``events[0]`` is the compaction event when the path has one; every record is
    resolved (blobs loaded and their digests checked).
    """

    __slots__ = ("events",)

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    @property
    def boundary(self) -> Event | None:
        """The compaction event the context starts from, if any."""
        if self.events and isinstance(self.events[0].record, CompactionRecord):
            return self.events[0]
        return None

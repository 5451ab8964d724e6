"""A server's session read through its API, as a local session's view is read.

:class:`RemoteView` answers what the TUI asks of a
:class:`~infai.store.SessionView` (HEAD, the count, entries by seq or id, the
path to an event, an event with its record) from ``GET …/events?all=true``
(the index's entries, once per :meth:`~RemoteView.refresh`) and ``GET
…/events/{id}`` (one event, its record resolved by the server), so the TUI's
own reads (:mod:`infai.shells.tui.store_io`) work unchanged on a remote
session. Events the session's stream reports as settled are added as they
come (:meth:`~RemoteView.add`), so a timeline drawn after a turn needs no
refresh. Blocking (HTTP): the TUI calls it in a thread, as it calls a store.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from infai.store import Entry, Event, EventNotFound, Record, record_from_obj

from .client import Remote

#: the fields an :class:`~infai.store.Entry` is built from
ENTRY_FIELDS = (
    *("seq", "id", "parent_id", "parent_seq", "branch_from", "timestamp", "kind", "role"),
    *("preview", "blob"),
)


def entry_of(obj: dict[str, Any]) -> Entry:
    """An index entry from the API's ``Entry`` object."""
    return Entry(**{k: obj[k] for k in ENTRY_FIELDS if k in obj})


def event_of(obj: dict[str, Any]) -> Event:
    """A stored event from the API's ``Event`` object (a record left out: None)."""
    record = obj.get("record")
    return Event(
        id=obj["id"],
        parent_id=obj["parent_id"],
        branch_from=obj.get("branch_from"),
        kind=obj["kind"],
        role=obj["role"],
        timestamp=obj["timestamp"],
        record=None if record is None else record_from_obj(obj["kind"], record),
        digest=obj.get("digest"),
        seq=obj.get("seq", -1),
        preview=obj.get("preview", ""),
        parent_seq=obj.get("parent_seq", -1),
    )


class RemoteView:
    """The :class:`~infai.store.SessionView` reads the TUI makes, over HTTP."""

    def __init__(self, remote: Remote, session_id: str) -> None:
        self.remote = remote
        self.session_id = session_id
        self._lock = threading.Lock()
        self._entries: list[Entry] = []
        self._by_id: dict[str, Entry] = {}
        self._events: dict[str, Event] = {}  # fetched, records resolved
        self._head: str | None = None
        self._loaded = False

    # -- the index -------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the session's entries and HEAD again (every branch)."""
        answer = self.remote.get(f"/sessions/{self.session_id}/events", all=True)
        entries = sorted((entry_of(obj) for obj in answer["events"]), key=lambda e: e.seq)
        with self._lock:
            self._entries = entries
            self._by_id = {entry.id: entry for entry in entries}
            self._head = answer.get("head")
            self._loaded = True

    def _ready(self) -> None:
        if not self._loaded:
            self.refresh()

    def parent_seq(self, obj: dict[str, Any]) -> int:
        """The seq of a settled event's parent (the stream's object leaves it out)."""
        parent = self._by_id.get(str(obj.get("parent_id")))
        return parent.seq if parent is not None else -1

    def add(self, event: Event) -> None:
        """``event`` was settled (the stream said so): it is HEAD now."""
        entry = Entry(
            seq=event.seq,
            id=event.id,
            parent_id=event.parent_id,
            parent_seq=event.parent_seq,
            branch_from=event.branch_from,
            timestamp=event.timestamp,
            kind=event.kind,
            role=event.role,
            preview=event.preview,
            blob=event.digest is not None,
        )
        with self._lock:
            if event.record is not None:
                self._events[event.id] = event
            if event.id in self._by_id:  # read with the index already
                return
            if not self._loaded or event.seq != len(self._entries):
                self._loaded = False  # not the next one: read the index again when asked
                return
            self._entries.append(entry)
            self._by_id[entry.id] = entry
            self._head = event.id

    @property
    def head(self) -> str | None:
        self._ready()
        return self._head

    @property
    def count(self) -> int:
        self._ready()
        return len(self._entries)

    def entry_at(self, seq: int) -> Entry:
        self._ready()
        if not 0 <= seq < len(self._entries):
            raise EventNotFound(f"session {self.session_id}: no event #{seq}")
        return self._entries[seq]

    def entry(self, event_id: str) -> Entry:
        self._ready()
        found = self._by_id.get(event_id)
        if found is None:
            raise EventNotFound(f"session {self.session_id}: no event {event_id}")
        return found

    def entries(self) -> Iterator[Entry]:
        self._ready()
        return iter(list(self._entries))

    def path(self, at: str | None = None, *, to_boundary: bool = True) -> list[Entry]:
        """Entries from the root (or the nearest compaction) to ``at`` (default HEAD)."""
        self._ready()
        tip = at or self._head
        path: list[Entry] = []
        while tip is not None and tip in self._by_id:
            entry = self._by_id[tip]
            path.append(entry)
            if to_boundary and entry.kind == "compaction":
                break
            tip = entry.parent_id if entry.parent_seq >= 0 else None
        path.reverse()
        return path

    # -- events ----------------------------------------------------------------------

    def event(self, event_id: str, *, resolve: bool = False) -> Event:
        """One event with its record (the server resolves a blob's)."""
        with self._lock:
            known = self._events.get(event_id)
        if known is not None:
            return known
        got = event_of(self.remote.get(f"/sessions/{self.session_id}/events/{event_id}"))
        with self._lock:
            self._events[event_id] = got
        return got

    def resolve(self, event: Event) -> Record:
        """The event's record, fetched when the stream left it out."""
        if event.record is not None:
            return event.record
        record = self.event(event.id).record
        assert record is not None
        return record

    def close(self) -> None:
        """Nothing is held: the client is the session's."""

    def __enter__(self) -> RemoteView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ENTRY_FIELDS", "RemoteView", "entry_of", "event_of"]

"""The active context's events, kept in memory between model calls."""

from __future__ import annotations

from infai.store import NIL_ID, Event, SessionLog

from .pipeline import ContextPipeline


class ContextCache:
    """The active context's events, kept in memory between model calls, and the
    pipeline that makes them messages.

    A long-lived session need not read its path back from the store for every
    request: events it appends after the cached tip extend the cache; anything
    else (a selected older event, a compaction, another tip) rebuilds it.
    """

    def __init__(
        self,
        writer: SessionLog,
        pruned: frozenset[str] = frozenset(),
        *,
        pipeline: ContextPipeline | None = None,
    ) -> None:
        self.writer = writer
        #: the rules that make the events messages (default: the built-in ones,
        #: with the imported tool results ``pruned`` sent as pruned)
        self.pipeline = pipeline or ContextPipeline.default(pruned)
        self._events: list[Event] | None = None
        self._tip: str | None = None

    def events(self) -> list[Event]:
        """The context the next request continues: at the picked event, else at HEAD."""
        tip = self.writer.pending_parent or self.writer.head
        if self._events is None or self._tip != tip:
            self._events = list(self.writer.context(tip).events)
            self._tip = tip
        return self._events

    def invalidate(self) -> None:
        """Forget the cached context: the next read rebuilds it from the store."""
        self._events = None

    def appended(self, events: list[Event]) -> None:
        """Tell the cache the writer just appended ``events`` (in order)."""
        if (
            self._events is None
            or not events
            or events[0].parent_id != (self._tip or NIL_ID)
            or any(e.kind == "compaction" for e in events)
        ):
            self._events = None
            return
        self._events.extend(events)
        self._tip = events[-1].id

"""The in-process event hub: every watcher of a session sees its events live.

The session publishes each agent event (deltas included; they are never
persisted) to every subscriber's queue. A subscriber that falls more than
``limit`` events behind is dropped with :class:`Lagged` rather than holding
the turn back or growing without bound; it can catch up from the store, where
every settled event is.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator

from .loop import AgentEvent


class Lagged(Exception):
    """This subscriber fell too far behind and was dropped."""


class Subscription:
    """Events published after subscribing, in order, until closed."""

    def __init__(self, hub: EventHub, limit: int) -> None:
        self._hub = hub
        self._limit = limit
        self._pending: deque[AgentEvent] = deque()
        self._wake = asyncio.Event()
        self.lagged = False
        self.closed = False

    def _offer(self, event: AgentEvent) -> None:
        if len(self._pending) >= self._limit:
            self.lagged = True
            self._hub.unsubscribe(self)
        else:
            self._pending.append(event)
        self._wake.set()

    def close(self) -> None:
        """Stop after the events already received have been read."""
        self.closed = True
        self._hub.unsubscribe(self)
        self._wake.set()

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[AgentEvent]:
        while True:
            while self._pending:
                yield self._pending.popleft()
            if self.lagged:
                raise Lagged("subscriber fell behind and was dropped")
            if self.closed:
                return
            self._wake.clear()
            await self._wake.wait()


class EventHub:
    """Fan-out of one session's events to any number of subscribers."""

    def __init__(self, limit: int = 10_000) -> None:
        self._subscribers: list[Subscription] = []
        self._limit = limit

    def subscribe(self) -> Subscription:
        subscription = Subscription(self, self._limit)
        self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)

    def publish(self, event: AgentEvent) -> None:
        for subscription in list(self._subscribers):
            subscription._offer(event)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

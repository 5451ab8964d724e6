"""One generic hub: live fan-out of a stream of items to any number of subscribers.

A publisher offers each item once; every subscriber has its own queue and
reads the items published after it subscribed, in order. Publishing never
waits: a subscriber that falls more than ``limit`` items behind is dropped
(it reads what it holds, then :class:`Lagged`) rather than holding the
publisher back or growing without bound; it can catch up from the store, where
every settled event is. Closing the hub ends every subscription after the
items it already holds, with a reason (a session closed, a server stopping),
and a subscription made after that is closed at once.

The same hub carries an :class:`~infai.agent.AgentSession`'s agent events
(:data:`EventHub`) and, in the server, whatever one session's watchers are
sent: the item type is the publisher's choice.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

from infai.errors import InfaiError

from .loop import AgentEvent

T = TypeVar("T")

#: items a subscriber may fall behind by before it is dropped
DEFAULT_LIMIT = 10_000


class Lagged(InfaiError):
    """This subscriber fell too far behind and was dropped (catch up from the store)."""


class Subscription(Generic[T]):
    """The items published after subscribing, in order, until closed or dropped."""

    def __init__(self, hub: Hub[T], limit: int) -> None:
        self._hub = hub
        self._limit = limit
        self._pending: deque[T] = deque()
        self._wake = asyncio.Event()
        self.lagged = False
        self.closed = False
        #: why the stream ended (the hub's close reason), once it has
        self.reason: str | None = None

    def offer(self, item: T) -> None:
        """Queue ``item``; past the limit the subscription is dropped instead."""
        if self.closed or self.lagged:
            return
        if len(self._pending) >= self._limit:
            self.lagged = True
            self._hub.unsubscribe(self)
        else:
            self._pending.append(item)
        self._wake.set()

    def close(self, reason: str | None = None) -> None:
        """Stop after the items already received have been read."""
        if not self.closed:
            self.closed = True
            self.reason = reason
        self._hub.unsubscribe(self)
        self._wake.set()

    def __aiter__(self) -> AsyncIterator[T]:
        return self._items()

    async def _items(self) -> AsyncIterator[T]:
        async for batch in self.batches():
            for item in batch:
                yield item

    async def batches(self) -> AsyncIterator[list[T]]:
        """Every item waiting, at once: one far behind can send many in one write.

        Raises :class:`Lagged` once the items held before the drop are read.
        """
        while True:
            if self._pending:
                batch = list(self._pending)
                self._pending.clear()
                yield batch
                continue
            if self.lagged:
                raise Lagged("this subscriber fell behind and was dropped")
            if self.closed:
                return
            self._wake.clear()
            await self._wake.wait()


class Hub(Generic[T]):
    """Fan-out of one stream of items to every subscriber; publishing never waits."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._subscribers: list[Subscription[T]] = []
        self._limit = limit
        #: why the hub was closed (None: it is open)
        self.closed_reason: str | None = None
        self.closed = False

    def subscribe(self, limit: int | None = None) -> Subscription[T]:
        """A new subscription (``limit``: its own, else the hub's); closed at once
        if the hub is."""
        subscription = Subscription(self, self._limit if limit is None else limit)
        if self.closed:
            subscription.close(self.closed_reason)
        else:
            self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription[T]) -> None:
        """Stop offering items to ``subscription`` (a no-op if it is already gone)."""
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)

    def publish(self, item: T) -> None:
        """Offer ``item`` to every subscriber; one that is full is dropped, never waited for."""
        for subscription in list(self._subscribers):
            subscription.offer(item)

    def close(self, reason: str | None = None, last: T | None = None) -> None:
        """End every subscription after what it holds (and ``last``, if given)."""
        self.closed = True
        self.closed_reason = reason
        for subscription in list(self._subscribers):
            if last is not None:
                subscription.offer(last)
            subscription.close(reason)

    @property
    def subscribers(self) -> int:
        """How many subscriptions are still being offered items."""
        return len(self._subscribers)


#: the hub of an agent session's events
EventHub = Hub[AgentEvent]

__all__ = ["DEFAULT_LIMIT", "EventHub", "Hub", "Lagged", "Subscription"]

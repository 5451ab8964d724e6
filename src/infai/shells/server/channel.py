"""SSE frames and the per-session channel that fans them out to every watcher.

A :class:`Frame` is encoded once, however many watchers receive it. Each
watcher reads its own :class:`Feed`; one that falls more than ``FEED_LIMIT``
frames behind is dropped (it can reconnect with ``Last-Event-ID`` and replay
from the store) rather than holding the session back or growing without bound.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from infai.agent import Lagged
from infai.store import Event

FEED_LIMIT = 10_000


def event_obj(event: Event, *, stream: bool = False) -> dict[str, Any]:
    """An event as the API shows it; on the stream a blob's record is left out (null)."""
    data = event.to_obj()
    if stream and event.digest is not None:
        data["record"] = None
    data["seq"] = event.seq
    data["preview"] = event.preview
    return data


@dataclass(frozen=True, slots=True)
class Frame:
    """One SSE message, encoded once however many watchers receive it."""

    name: str
    data: dict[str, Any]
    raw: bytes
    #: a settled event's sequence number (replay skips what it already sent)
    seq: int | None = None


def frame(name: str, data: dict[str, Any], *, event_id: str | None = None) -> Frame:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))  # one line
    head = f"event: {name}\n" if event_id is None else f"id: {event_id}\nevent: {name}\n"
    return Frame(name, data, f"{head}data: {text}\n\n".encode())


def settled_frame(event: Event) -> Frame:
    data = event_obj(event, stream=True)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    raw = f"id: {event.id}\nevent: settled\ndata: {text}\n\n".encode()
    return Frame("settled", data, raw, event.seq)


class Feed:
    """The frames published after subscribing, in order, until closed or dropped."""

    def __init__(self, channel: Channel, limit: int) -> None:
        self._channel = channel
        self._limit = limit
        self._pending: deque[Frame] = deque()
        self._wake = asyncio.Event()
        self.lagged = False
        self.closed = False

    def offer(self, item: Frame) -> None:
        if len(self._pending) >= self._limit:
            self.lagged = True
            self._channel.unsubscribe(self)
        else:
            self._pending.append(item)
        self._wake.set()

    def close(self) -> None:
        """Stop after the frames already received have been read."""
        self.closed = True
        self._channel.unsubscribe(self)
        self._wake.set()

    async def batches(self) -> AsyncIterator[list[Frame]]:
        """Every frame waiting, at once: a watcher behind by many sends them in one write."""
        while True:
            if self._pending:
                batch = list(self._pending)
                self._pending.clear()
                yield batch
                continue
            if self.lagged:
                raise Lagged("this watcher fell behind and was dropped")
            if self.closed:
                return
            self._wake.clear()
            await self._wake.wait()


class Channel:
    """Fan-out of one session's frames to every watcher."""

    def __init__(self, limit: int = FEED_LIMIT) -> None:
        self._feeds: list[Feed] = []
        self._limit = limit

    def subscribe(self) -> Feed:
        feed = Feed(self, self._limit)
        self._feeds.append(feed)
        return feed

    def unsubscribe(self, feed: Feed) -> None:
        if feed in self._feeds:
            self._feeds.remove(feed)

    def publish(self, item: Frame) -> None:
        for feed in list(self._feeds):
            feed.offer(item)

    def close(self, last: Frame) -> None:
        """Send ``last`` to every watcher and end their feeds."""
        for feed in list(self._feeds):
            feed.offer(last)
            feed.close()

    @property
    def watchers(self) -> int:
        return len(self._feeds)

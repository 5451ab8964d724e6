"""SSE frames: what the server sends its watchers, encoded once for all of them.

A :class:`Frame` is one Server-Sent Event, encoded once however many watchers
receive it. Its data is the agent events' one JSON form
(:func:`infai.agent.event_to_obj`, :func:`infai.agent.settled_obj`) without the
``type`` key: the SSE event name says what it is (``settled``, ``delta``,
``turn_ended``), as :mod:`infai.agent.wire` describes. A settled event carries
its event id as the SSE id, so ``Last-Event-ID`` always names a settled event.

The fan-out itself is :class:`infai.agent.Hub` (one per served session, of
frames): a watcher that falls more than ``FEED_LIMIT`` frames behind is dropped
and can reconnect with ``Last-Event-ID`` to replay from the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

from infai.agent import Hub, Streamed, Subscription, TurnEnded, event_to_obj, settled_obj
from infai.store import Event

from ..inert import inert_json

#: frames a watcher may fall behind by before it is dropped
FEED_LIMIT = 10_000

#: one served session's frames, fanned out to every watcher
Channel = Hub["Frame"]
#: one watcher's frames
Feed = Subscription["Frame"]


@dataclass(frozen=True, slots=True)
class Frame:
    """One SSE message, encoded once however many watchers receive it."""

    name: str
    data: dict[str, Any]
    raw: bytes
    #: a settled event's sequence number (replay skips what it already sent)
    seq: int | None = None


class InertJSON(JSONResponse):
    """A JSON response whose control and bidi characters are ``\\uXXXX`` escapes
    (:func:`~infai.shells.inert.inert_json`): the same value to a client, and
    inert when a person reads the body in a terminal (``curl``)."""

    def render(self, content: Any) -> bytes:
        return inert_json(content, allow_nan=False, separators=(",", ":")).encode()


def frame(name: str, data: dict[str, Any], *, event_id: str | None = None) -> Frame:
    text = inert_json(data, separators=(",", ":"))  # one line; control characters escaped
    head = f"event: {name}\n" if event_id is None else f"id: {event_id}\nevent: {name}\n"
    return Frame(name, data, f"{head}data: {text}\n\n".encode())


def settled_frame(event: Event) -> Frame:
    """A settled event: its event id as the SSE id; a blob's record left out."""
    made = frame("settled", settled_obj(event, inline_blobs=False), event_id=event.id)
    return Frame(made.name, made.data, made.raw, event.seq)


def delta_frame(event: Streamed, turn: str) -> Frame:
    """A piece of the model's output in flight: ``event_to_obj`` without ``type``."""
    data = event_to_obj(event, turn=turn)
    del data["type"]
    return frame("delta", data)


def ended_frame(event: TurnEnded, turn: str) -> Frame:
    """The turn is over: ``{"turn", "outcome", "error"}``."""
    data = event_to_obj(event, turn=turn)
    del data["type"]
    return frame("turn_ended", {"turn": turn, "outcome": data["outcome"], "error": data["error"]})


__all__ = [
    "FEED_LIMIT",
    "Channel",
    "Feed",
    "Frame",
    "InertJSON",
    "delta_frame",
    "ended_frame",
    "frame",
    "settled_frame",
]

"""The one JSON form of the agent's events, for every shell that prints or sends them.

``infai run --json`` prints one object per line and the server sends the same
objects as SSE data; both are built here, so a client reading one can read
the other. An object's ``type`` says which event it is:

``{"type": "saved", "event": EVENT}``
    An event is durable in the session. ``EVENT`` is the stored event
    (``id``, ``parent_id``, ``kind``, ``role``, ``timestamp``, ``record``, and
    ``digest`` for a record kept as a blob) plus its ``seq`` (its place in the
    session's log) and ``preview`` (a short one-line text). A stream that must
    stay small may leave a blob's record out (``"record": null``; fetch the
    event for it).

``{"type": "stream", "kind": KIND, ...}``
    A live piece of the model's output, never stored: ``kind`` is ``text`` or
    ``reasoning`` (with ``text``), ``tool_call`` (with ``index``, ``id``,
    ``name`` and a piece of the ``arguments`` JSON) or ``notice`` (with
    ``message``: a retry, a compaction, something the user should see).

``{"type": "end", "outcome": "done" | "error" | "cancelled", "error": TEXT | null}``
    The turn is over.

A ``turn`` key (the server's id of the turn) is added to every object of a
turn when the caller gives one. The server names its SSE frames after the
same events (``settled``, ``delta``, ``turn_ended``) and sends, as their data,
the object without ``type``; for a settled event, ``EVENT`` itself.
"""

from __future__ import annotations

from typing import Any

from infai.store import Event

from .loop import AgentEvent, Saved, Streamed, TurnEnded


def settled_obj(event: Event, *, inline_blobs: bool = True) -> dict[str, Any]:
    """A stored event as it is shown: its JSON form plus ``seq`` and ``preview``.

    With ``inline_blobs`` false, a record kept as a blob is left out (null), so
    one large tool result does not swell a live stream.
    """
    data = event.to_obj()
    if not inline_blobs and event.digest is not None:
        data["record"] = None
    data["seq"] = event.seq
    data["preview"] = event.preview
    return data


def event_to_obj(
    event: AgentEvent, *, turn: str | None = None, inline_blobs: bool = True
) -> dict[str, Any]:
    """The JSON object for one agent event (see the module's description)."""
    data: dict[str, Any]
    if isinstance(event, Saved):
        data = {"type": "saved", "event": settled_obj(event.event, inline_blobs=inline_blobs)}
    elif isinstance(event, Streamed):
        inner = event.event
        data = {"type": "stream", **{k: getattr(inner, k) for k in inner.__slots__}}
    elif isinstance(event, TurnEnded):
        data = {"type": "end", "outcome": event.outcome, "error": event.error}
    else:  # pragma: no cover - the union is closed; a new member must be added here
        raise TypeError(f"not an agent event: {event!r}")
    if turn is not None:
        data["turn"] = turn
    return data


__all__ = ["event_to_obj", "settled_obj"]

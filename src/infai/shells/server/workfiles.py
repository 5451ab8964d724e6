"""The session's files over HTTP: ``files``, ``diff``, ``checkout``, and the
restore before a prompt that continues from an older event.

Model, in prose: the files of a session at an event are those of the nearest
snapshot at or before it (:mod:`infai.checkpoints.session`). ``GET …/files`` and
``GET …/diff`` read them (diff's ``to`` left out: the working directory now);
``POST …/checkout`` puts an event's files back, recorded at HEAD. A prompt
that continues from an older event (``from``, or an event picked with
``select``) first restores that event's files (:func:`restore_first`). Files
changed outside the agent (since its last snapshot, or recorded between turns
rather than after a tool: the plan's ``hand_made``), or another open session
writing in the directory, are a question, not an error: the answer is 409 with
the plan and its ``conflicts`` as data, and nothing changed; the client asks
its user and sends the request again with ``"force": true`` (take the
snapshot's files) or ``"keep": [paths]`` (keep those as they are), or
``"keep_files": true`` (continue without touching files). The operations are
described here (:data:`FILE_OPERATIONS`, :data:`FILE_COMPONENTS`) beside
:data:`.api.OPERATIONS`, and served and documented with them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from infai.agent import OnRestore, RestoreRefused, checkout, diff_at, files_at

from .api import _ID, PROMPT, SESSION, Operation, Param
from .channel import InertJSON
from .errors import ApiError
from .validate import Schema

if TYPE_CHECKING:
    from .routes import Call
    from .served import Served

CHECKOUT: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["event"],
    "properties": {
        "event": _ID,
        "dry_run": {"type": "boolean", "description": "Answer with the plan; change nothing."},
        "force": PROMPT["properties"]["force"],
        "keep": PROMPT["properties"]["keep"],
    },
}
FILE_COMPONENTS: dict[str, Schema] = {
    "Files": {
        "type": "object",
        "required": ["snapshot", "tree", "files", "skipped"],
        "properties": {
            "event": {"type": ["string", "null"]},
            "snapshot": {"type": "string", "description": "The snapshot event they are from."},
            "tree": {"type": "string"},
            "files": {"type": "array", "items": {"type": "object"}},
            "skipped": {"type": "object", "description": "Paths left out, and why."},
        },
    },
    "FilesDiff": {
        "type": "object",
        "required": ["changes", "text", "binary"],
        "properties": {
            "changes": {"type": "array", "items": {"type": "object"}},
            "text": {"type": "array", "items": {"type": "object"}},
            "binary": {"type": "array", "items": {"type": "string"}},
        },
    },
    "Checkout": {
        "type": "object",
        "required": ["plan"],
        "properties": {
            "dry_run": {"type": "boolean"},
            "plan": {
                "type": "object",
                "description": "actions, conflicts (hand_made: those last changed outside "
                "the agent though recorded), not_restorable, kept, ignored",
            },
            "restore": {"type": ["string", "null"], "description": "The restore event."},
            "before": {"type": ["string", "null"]},
            "touched": {"type": "array", "items": {"type": "string"}},
            "changed": {
                "type": "array",
                "items": {"type": "object"},
                "description": "Every path changed: path, change (added, removed, modified, "
                "mode, type), and added/removed lines of a text file modified.",
            },
            "notices": {
                "type": "array",
                "items": {"type": "string"},
                "description": "What to tell the user; one names every file changed "
                "(restored 2 files: a.txt (+2 -1), mine.txt (removed)).",
            },
        },
    },
    "RestoreRefused": {
        "type": "object",
        "required": ["error", "plan", "others"],
        "properties": {
            "error": {"type": "string"},
            "plan": {"type": "object", "description": "The plan; its conflicts are the question."},
            "others": {"type": "array", "items": {"type": "string"}},
        },
    },
}
FILE_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET", "/v1/sessions/{session_id}/files", "get_files",
        "The files recorded at an event (default HEAD): paths, sizes, digests, skipped.",
        {200: ("The files.", "Files")},
        params=(SESSION, Param("event", "query", _ID, "At this event instead of HEAD.")),
    ),
    Operation(
        "GET", "/v1/sessions/{session_id}/diff", "get_diff",
        "What changed in the files from one event to another (default: the disk now).",
        {200: ("Changes, unified text diffs, binary paths.", "FilesDiff")},
        params=(
            SESSION,
            Param("from", "query", _ID, "The older event.", required=True),
            Param("to", "query", _ID, "The newer event (default: the working directory now)."),
        ),
    ),
    Operation(
        "POST", "/v1/sessions/{session_id}/checkout", "checkout",
        "Put an event's files back on disk, recorded at HEAD; 409 with the plan and its "
        "conflicts as data (nothing changed) unless force or keep answers them.",
        {200: ("Restored (or, with dry_run, the plan).", "Checkout"),
         409: ("Refused: the plan and its conflicts.", "RestoreRefused")},
        params=(SESSION,), body=CHECKOUT,
    ),
)  # fmt: skip


def choice_of(body: dict[str, Any]) -> OnRestore:
    """The restore choice a request body carries."""
    return OnRestore(
        force=bool(body.get("force")),
        keep=tuple(body.get("keep", ())),
        keep_files=bool(body.get("keep_files")),
    )


def refused(exc: RestoreRefused) -> Response:
    """A refused restore as data: 409 with the plan and its conflicts."""
    return InertJSON(exc.to_obj(), 409)


async def get_files(call: Call) -> Response:
    event = call.query.get("event")
    store = call.sessions.store
    got = await asyncio.to_thread(files_at, store, call.session_id, event)
    return InertJSON(got)


async def get_diff(call: Call) -> Response:
    old = call.query.get("from")
    if old is None:
        raise ApiError(400, "query parameter from: required (the older event)")
    store = call.sessions.store
    got = await asyncio.to_thread(diff_at, store, call.session_id, old, call.query.get("to"))
    return InertJSON(got)


async def checkout_files(call: Call) -> Response:
    event = call.body["event"].lower()
    await call.known_event(event)
    choice, dry_run = choice_of(call.body), bool(call.body.get("dry_run"))
    served = await call.exists()
    try:
        if served is not None:
            done = await served.agent.checkout(event, choice, dry_run=dry_run)
        else:
            done = await asyncio.to_thread(
                checkout, call.sessions.store, call.session_id, event, choice, dry_run=dry_run
            )
    except RestoreRefused as exc:
        return refused(exc)
    return InertJSON(
        {
            "dry_run": dry_run,
            "plan": done.plan,
            "restore": done.event_id,
            "before": done.before_id,
            "touched": done.touched,
            "changed": done.changed,
            "notices": done.notices,
        }
    )


async def restore_first(
    served: Served, body: dict[str, Any], from_event: str | None
) -> Response | tuple[str, ...]:
    """Before a prompt: pick ``from_event`` (if given) and restore the picked event's
    files; a 409 answer if refused (nothing changed), else what the restore said
    (the files it changed, those kept, ...): the turn sends it as its first deltas."""
    agent = served.agent
    agent.on_restore = choice_of(body)
    if from_event is not None:
        await asyncio.to_thread(agent.select, from_event)
    if agent.pending_parent is None:
        return ()
    try:
        done = await agent.restore_files()
    except RestoreRefused as exc:
        return refused(exc)
    return tuple(done.notices) if done is not None else ()


__all__ = [
    "CHECKOUT",
    "FILE_COMPONENTS",
    "FILE_OPERATIONS",
    "checkout_files",
    "choice_of",
    "get_diff",
    "get_files",
    "refused",
    "restore_first",
]

"""The HTTP API described as data: every route, its inputs, its answers.

One table (:data:`OPERATIONS`) is the single source of truth for the server:
the routes are built from it, every path parameter, query parameter and body is
checked against it before a handler runs (so nothing in a bad request reaches
the store), and the OpenAPI document at ``GET /v1/openapi.json`` is generated
from it, so the document cannot drift from the routes. Schemas are plain JSON
Schema (the small subset :func:`validate` understands), checked with messages
that name the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from . import validate as schema_check
from .validate import Schema

#: request bodies larger than this are refused (413) before they are parsed
MAX_BODY = 4 * 1024 * 1024
#: the longest prompt accepted, in characters
MAX_PROMPT = 1_000_000

# -- schemas ---------------------------------------------------------------


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(kind: str, **more: Any) -> Schema:
    return {"type": [kind, "null"], **more}


_ID: Schema = {"type": "string", "format": "uuid"}
_TEXT: Schema = {"type": "string"}

#: the fields of a session's metadata (session.json), as the API sends them
_SESSION_PROPERTIES: Schema = {
    "id": _ID,
    "format": {"type": "integer"},
    "name": _nullable("string"),
    "working_dir": _nullable("string"),
    "model": _nullable("string"),
    "created_at": _TEXT,
    "updated_at": _TEXT,
    "parent_session": _nullable("string"),
    "parent_event": _nullable("string"),
    "extra": {"type": "object"},
}

COMPONENTS: dict[str, Schema] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string", "description": "What was wrong."}},
    },
    "Health": {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"enum": ["ok"]}, "version": _TEXT},
    },
    "Session": {
        "type": "object",
        "description": "A session's metadata (session.json).",
        "required": ["id", "created_at", "updated_at"],
        "properties": _SESSION_PROPERTIES,
    },
    "SessionDetail": {
        "type": "object",
        "description": "Metadata plus the live state of the session in this server.",
        "required": ["id", "head", "events", "open", "turn", "pending_parent", "watchers"],
        "properties": {
            "id": _ID,
            "head": _nullable("string"),
            "events": {"type": "integer"},
            "open": {
                "type": "boolean",
                "description": "Open in this server (which holds its writer only while "
                "a turn, a compaction or a branch switch runs).",
            },
            "turn": _nullable("string", description="The turn in flight."),
            "busy": _nullable("string"),
            "pending_parent": _nullable("string"),
            "watchers": {"type": "integer"},
            "pending_approvals": {"type": "integer"},
            "used_tokens": {
                "type": "integer",
                "description": "What the next request holds, as the agent counts it: the "
                "last reply's reported usage plus an estimate of what came after it.",
            },
            "context_window": _nullable(
                "integer",
                description="The context window of the model the next prompt uses "
                "(null: that model cannot be built on this server).",
            ),
            "model_in_use": {
                "type": "string",
                "description": "The name of the model the next prompt uses: the "
                "session's own (`model`), else the server's default.",
            },
        },
    },
    "SessionSummary": {
        "type": "object",
        "description": "A session's metadata, its title (name, else first prompt), the "
        "preview of its first user message and its event count.",
        "required": ["id", "created_at", "updated_at", "title", "events"],
        "properties": {
            **_SESSION_PROPERTIES,
            "title": {"type": "string"},
            "first_prompt": _nullable("string"),
            "events": {"type": "integer"},
        },
    },
    "SessionList": {
        "type": "object",
        "required": ["sessions"],
        "properties": {"sessions": {"type": "array", "items": _ref("SessionSummary")}},
    },
    "Entry": {
        "type": "object",
        "description": "A timeline entry, read from the index alone (a preview, no record).",
        "required": ["seq", "id", "parent_id", "kind", "role", "timestamp", "preview", "head"],
        "properties": {
            "seq": {"type": "integer"},
            "parent_seq": {"type": "integer"},
            "id": _ID,
            "parent_id": _ID,
            "branch_from": _nullable("string"),
            "kind": _TEXT,
            "role": _TEXT,
            "timestamp": _TEXT,
            "blob": {"type": "boolean"},
            "preview": _TEXT,
            "head": {"type": "boolean"},
            "location": {"type": "object"},
        },
    },
    "Timeline": {
        "type": "object",
        "required": ["head", "events"],
        "properties": {
            "head": _nullable("string"),
            "events": {"type": "array", "items": _ref("Entry")},
            "leaves": {"type": "array", "items": _ID},
        },
    },
    "Event": {
        "type": "object",
        "description": "A settled event. On the stream a record stored as a blob is null.",
        "required": ["id", "parent_id", "kind", "role", "timestamp", "record", "seq"],
        "properties": {
            "id": _ID,
            "parent_id": _ID,
            "branch_from": _nullable("string"),
            "kind": _TEXT,
            "role": _TEXT,
            "timestamp": _TEXT,
            "digest": _nullable("string"),
            "record": _nullable("object"),
            "seq": {"type": "integer"},
            "preview": _TEXT,
        },
    },
    "OfferedTool": {
        "type": "object",
        "required": ["name", "description", "parameters"],
        "properties": {"name": _TEXT, "description": _TEXT, "parameters": {"type": "object"}},
    },
    "ToolManifest": {
        "type": "object",
        "required": ["digest", "tools"],
        "properties": {"digest": _TEXT, "tools": {"type": "array", "items": _ref("OfferedTool")}},
    },
    "Context": {
        "type": "object",
        "required": ["events", "boundary"],
        "properties": {
            "events": {"type": "array", "items": _ref("Event")},
            "boundary": _nullable("string", description="The compaction it starts from."),
        },
    },
    "Head": {
        "type": "object",
        "required": ["head", "pending_parent"],
        "properties": {
            "head": _nullable("string"),
            "pending_parent": _nullable(
                "string", description="The event the next prompt follows, if not HEAD."
            ),
            "summary": {"anyOf": [_ref("Event"), {"type": "null"}]},
        },
    },
    "TurnStarted": {
        "type": "object",
        "description": "Sent once the prompt is stored (durable): prompt is its event.",
        "required": ["turn", "session", "prompt"],
        "properties": {"turn": _ID, "session": _ID, "prompt": _ID},
    },
    "TurnCancelled": {
        "type": "object",
        "required": ["turn", "outcome"],
        "properties": {"turn": _ID, "outcome": {"enum": ["cancelled", "done", "error"]}},
    },
    "Question": {
        "type": "object",
        "description": "A permission question waiting for an answer.",
        "required": ["id", "tool", "subject", "reason", "always", "asked_at", "expires_at"],
        "properties": {
            "id": _ID,
            "tool": _TEXT,
            "subject": _TEXT,
            "reason": _TEXT,
            "always": {
                "type": "array",
                "items": _TEXT,
                "description": "The patterns (for this tool) that allow-always adds.",
            },
            "turn": _nullable("string"),
            "call_event_id": _nullable("string"),
            "arguments": _nullable("object"),
            "note": {
                "type": "string",
                "description": "Why allow-always is exact only or not offered (empty: neither).",
            },
            "caller": {
                "type": "string",
                "description": "Who asks when not the session's own agent (a subagent).",
            },
            "asked_at": _TEXT,
            "expires_at": _TEXT,
        },
    },
    "Approvals": {
        "type": "object",
        "required": ["approvals"],
        "properties": {"approvals": {"type": "array", "items": _ref("Question")}},
    },
    "Answered": {
        "type": "object",
        "required": ["id", "answer"],
        "properties": {"id": _ID, "answer": {"enum": ["allow", "allow-always", "deny"]}},
    },
    "SearchHit": {
        "type": "object",
        "description": "An event that matched, on any branch of any session.",
        "required": ["session_id", "event_id", "seq", "kind", "role", "timestamp", "snippet"],
        "properties": {
            "session_id": _ID,
            "session_name": _nullable("string"),
            "working_dir": _nullable("string"),
            "event_id": _ID,
            "seq": {"type": "integer"},
            "kind": _TEXT,
            "role": _TEXT,
            "timestamp": _TEXT,
            "on_head_path": {"type": "boolean", "description": "False: on another branch."},
            "score": {"type": "number", "description": "Higher is better (this search only)."},
            "snippet": {"type": "string", "description": "One line of text around the match."},
            "marks": {"type": "array", "description": "[start, end) of each matched word."},
        },
    },
    "SearchResults": {
        "type": "object",
        "required": ["query", "window", "hits"],
        "properties": {
            "query": _TEXT,
            "window": _nullable(
                "integer",
                description="Set when more events matched than were looked at: the hits are"
                " the newest of this many matches, newest first.",
            ),
            "hits": {"type": "array", "items": _ref("SearchHit")},
            "damaged": {
                "type": "array",
                "description": "Sessions whose damaged events are left out of search (their"
                " hits may be missing): session_id, events (null: none could be read), problem.",
                "items": {"type": "object"},
            },
        },
    },
}


def validate(value: Any, schema: Schema, where: str = "body") -> str | None:
    """Why ``value`` does not fit ``schema`` (its ``$ref``s naming :data:`COMPONENTS`),
    or None; see :mod:`.validate`."""
    return schema_check.validate(value, schema, where, COMPONENTS)


# -- request bodies ----------------------------------------------------------

NEW_SESSION: Schema = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "maxLength": 200},
        "working_dir": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4096,
            "description": "An existing absolute directory (default: the server's).",
        },
        "model": {"type": "string", "minLength": 1, "maxLength": 200},
    },
}
RENAME: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": _nullable("string", maxLength=200, description="The new name (null: none)."),
    },
}
PROMPT: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["text"],
    "properties": {
        "text": {"type": "string", "minLength": 1, "maxLength": MAX_PROMPT},
        "from": {**_ID, "description": "Branch: continue from this older event."},
        "force": {
            "type": "boolean",
            "description": "Restore over files changed outside the agent.",
        },
        "keep": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 4096},
            "maxItems": 10000,
            "description": "Conflicting paths to keep as they are on disk.",
        },
        "keep_files": {"type": "boolean", "description": "Continue without touching files."},
        "stream": {
            "type": "boolean",
            "description": "Answer with this turn's frames as Server-Sent Events, ending "
            "with its turn_ended; closing the connection before that cancels the turn.",
        },
    },
}
SELECT: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["event_id"],
    "properties": {
        "event_id": {
            "type": ["string", "null"],
            "format": "uuid",
            "description": "The event the next prompt follows (null: HEAD).",
        },
        "summarize": {
            "type": "boolean",
            "description": "Summarise the abandoned branch now; HEAD moves at once and the "
            "event's files are restored (409 with the plan if refused, nothing changed).",
        },
        "force": PROMPT["properties"]["force"],
        "keep": PROMPT["properties"]["keep"],
        "keep_files": {"type": "boolean", "description": "Switch without touching files."},
    },
}
CANCEL: Schema = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"turn": {**_ID, "description": "Cancel only if this turn is in flight."}},
}
ANSWER: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "answer"],
    "properties": {
        "id": _ID,
        "answer": {"enum": ["allow", "allow-always", "deny"]},
        "patterns": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 1000},
            "minItems": 1,
            "maxItems": 20,
            "description": "With allow-always: the patterns to allow for this tool "
            "(default: the question's always).",
        },
        "reason": {
            "type": "string",
            "minLength": 1,
            "maxLength": 2000,
            "description": "With deny: why, in words the model is given as the call's result.",
        },
    },
}
EMPTY: Schema = {"type": "object", "additionalProperties": False, "properties": {}}


# -- operations --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    where: Literal["path", "query", "header"]
    schema: Schema
    description: str = ""
    required: bool = False


@dataclass(frozen=True, slots=True)
class Operation:
    """One route: what it takes and every status it may answer with."""

    method: str
    path: str
    id: str
    summary: str
    #: status -> (description, response schema name, or None for no JSON body)
    responses: dict[int, tuple[str, str | None]]
    params: tuple[Param, ...] = ()
    body: Schema | None = None
    body_required: bool = True
    auth: bool = True
    stream: bool = False
    errors: tuple[int, ...] = field(default=())
    #: a 200 answer that is not JSON: its media type (the body is that format's text)
    media: str | None = None

    def all_responses(self) -> dict[int, tuple[str, str | None]]:
        """The operation's own answers plus the errors every such route can give."""
        out = dict(self.responses)
        if self.auth:
            out[401] = ("Missing or wrong bearer token.", "Error")
        if self.params or self.body is not None:
            out[400] = ("A malformed id, parameter or JSON body.", "Error")
        if any(p.where == "path" for p in self.params):
            out[404] = ("No such session, event or question.", "Error")
        if self.body is not None:
            out[413] = ("A body larger than 4 MiB.", "Error")
            out[422] = ("A body that breaks its schema (the message names the field).", "Error")
        for code in self.errors:
            out.setdefault(code, (ERROR_TEXT[code], "Error"))
        if self.auth:  # every route behind the token reads the store
            out[503] = (ERROR_TEXT[503], "Error")
        return dict(sorted(out.items()))


ERROR_TEXT = {
    409: "The session is busy (a turn in flight), locked by another process, or cannot open.",
    422: "The request was understood but cannot be carried out (the message says why).",
    503: "The session store cannot be reached (a lost database); try again later.",
}

SESSION = Param("session_id", "path", _ID, "The session's id.", required=True)
SEARCH = (
    Param("q", "query", {"type": "string", "minLength": 1, "maxLength": 1000},
          'Words (all must match), "a phrase", pref*, -word, a OR b.', required=True),
    Param("session", "query", _ID, "Only this session's events."),
    Param("dir", "query", {"type": "string", "minLength": 1, "maxLength": 4096},
          "Only sessions working in this directory or below it."),
    Param("kind", "query", {"type": "string", "minLength": 1, "maxLength": 40},
          "Only events of this kind (message, tool_call, tool_result, ...)."),
    Param("limit", "query", {"type": "integer"}, "At most this many hits (1 to 200; 20)."),
)  # fmt: skip
EVENT = Param("event_id", "path", _ID, "An event of the session.", required=True)

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET", "/v1/health", "health", "Is the server up (no token needed).",
        {200: ("Up.", "Health")}, auth=False,
    ),
    Operation(
        "GET", "/v1/openapi.json", "openapi", "This document (no token needed).",
        {200: ("The OpenAPI document.", None)}, auth=False,
    ),
    Operation(
        "GET", "/v1/sessions", "list_sessions", "Every session, most recently used first.",
        {200: ("The sessions.", "SessionList")},
    ),
    Operation(
        "POST", "/v1/sessions", "create_session", "Create a session.",
        {201: ("Created.", "Session")}, body=NEW_SESSION, body_required=False,
    ),
    Operation(
        "GET", "/v1/sessions/{session_id}", "get_session", "Metadata and live state.",
        {200: ("The session.", "SessionDetail")}, params=(SESSION,),
    ),
    Operation(
        "PATCH", "/v1/sessions/{session_id}", "update_session",
        "Rename a session (its metadata only: a turn in flight goes on).",
        {200: ("The session's new metadata.", "Session")}, params=(SESSION,), body=RENAME,
    ),
    Operation(
        "DELETE", "/v1/sessions/{session_id}", "delete_session",
        "Delete a session (a turn in flight is cancelled first).",
        {204: ("Deleted.", None)}, params=(SESSION,), errors=(409,),
    ),
    Operation(
        "GET", "/v1/sessions/{session_id}/events", "list_events",
        "The timeline: the active path (HEAD back to the last compaction) or every event.",
        {200: ("Entries with previews.", "Timeline")},
        params=(
            SESSION,
            Param("all", "query", {"type": "boolean"}, "Every event, with the leaves."),
        ),
    ),
    Operation(
        "GET", "/v1/sessions/{session_id}/events/{event_id}", "get_event",
        "One event, its record resolved (a blob's digest is checked).",
        {200: ("The event.", "Event")}, params=(SESSION, EVENT),
    ),
    Operation(
        "GET", "/v1/sessions/{session_id}/events/{event_id}/manifest", "get_manifest",
        "The tools a reply's model request was offered (names, descriptions, schemas).",
        {200: ("Its tool manifest.", "ToolManifest")}, params=(SESSION, EVENT),
    ),
    Operation(
        "GET", "/v1/sessions/{session_id}/context", "get_context",
        "The active context a model would get: compaction summary plus the events after it.",
        {200: ("The context.", "Context")},
        params=(SESSION, Param("at", "query", _ID, "Rebuild it at this event instead of HEAD.")),
    ),
    Operation(
        "GET", "/v1/sessions/{session_id}/head", "get_head",
        "HEAD and the selected parent of the next prompt.",
        {200: ("HEAD.", "Head")}, params=(SESSION,),
    ),
    Operation(
        "POST", "/v1/sessions/{session_id}/select", "select_branch",
        "Choose the event the next prompt follows (a branch), or switch with a summary.",
        {200: ("Selected.", "Head")}, params=(SESSION,), body=SELECT, errors=(409,),
    ),
    Operation(
        "POST", "/v1/sessions/{session_id}/prompt", "prompt",
        "Start a turn; answers once its prompt is stored (durable) with the turn's id "
        "and the prompt's event id (watch the turn on the stream), or with stream: true "
        "streams the turn itself and cancels it if the client goes.",
        {
            202: ("The prompt is stored and the turn started.", "TurnStarted"),
            200: ("With stream: true, the turn's frames up to its turn_ended.", None),
        },
        params=(SESSION,), body=PROMPT, errors=(409,), stream=True,
    ),
    Operation(
        "POST", "/v1/sessions/{session_id}/cancel", "cancel_turn",
        "Cancel the turn in flight (the session stays valid; the turn reads as interrupted).",
        {200: ("Cancelled.", "TurnCancelled")}, params=(SESSION,), body=CANCEL,
        body_required=False, errors=(409,),
    ),
    Operation(
        "POST", "/v1/sessions/{session_id}/compact", "compact",
        "Summarise the active context into a compaction event now.",
        {201: ("The compaction event.", "Event")}, params=(SESSION,), body=EMPTY,
        body_required=False, errors=(409,),
    ),
    Operation(
        "GET", "/v1/sessions/{session_id}/approvals", "list_approvals",
        "Permission questions waiting for an answer.",
        {200: ("Pending questions.", "Approvals")}, params=(SESSION,),
    ),
    Operation(
        "POST", "/v1/sessions/{session_id}/approvals", "answer_approval",
        "Answer a permission question: allow, allow-always (this session: the "
        "question's always patterns, or the patterns given) or deny.",
        {200: ("Answered.", "Answered")}, params=(SESSION,), body=ANSWER,
    ),
    Operation(
        "GET", "/v1/sessions/{session_id}/stream", "stream",
        "Server-Sent Events: settled events (SSE id = event id), deltas, turns, approvals. "
        "With Last-Event-ID (or ?after=) every settled event after it is replayed first.",
        {200: ("An endless text/event-stream.", None)},
        params=(
            SESSION,
            Param("Last-Event-ID", "header", _ID, "Replay settled events after this one."),
            Param("after", "query", _ID, "As Last-Event-ID, for clients that cannot set it."),
        ),
        stream=True, errors=(409,),
    ),
    Operation(
        "GET", "/v1/sessions/{session_id}/export", "export_session",
        "The session as the export file `infai session export` writes (JSON lines, "
        "blobs inlined; `infai session import` reads it), streamed.",
        {200: ("The export file, header first.", None)}, params=(SESSION,),
        media="application/x-ndjson",
    ),
    Operation(
        "GET", "/v1/search", "search",
        "Full-text search over every event on every branch of every session, best first.",
        {200: ("The hits.", "SearchResults")}, params=SEARCH,
    ),
)  # fmt: skip

"""The OpenAPI 3.1 document, generated from the API's one table.

:mod:`.api` describes every route (:data:`~.api.OPERATIONS`) and schema
(:data:`~.api.COMPONENTS`), :mod:`.workfiles` the files routes; this module
turns that table into the document
served at ``GET /v1/openapi.json``, with the SSE events a stream may send, so
the document cannot drift from the routes the app builds from the same table.
"""

from __future__ import annotations

from .api import COMPONENTS, OPERATIONS, Operation, Param, _ref
from .validate import Schema
from .workfiles import FILE_COMPONENTS, FILE_OPERATIONS

SSE_EVENTS = {
    "settled": "A durable event (data: Event; the SSE id is the event id).",
    "turn_started": "A turn began: {turn}.",
    "delta": "Live model output, never stored: {turn, kind, ...} (no SSE id).",
    "turn_ended": "{turn, outcome: done|error|cancelled, error}.",
    "approval": "A permission question (data: Question).",
    "approval_resolved": "{id, answer, by: api|timeout|cancelled}.",
    "selected": "The branch selection changed: {head, pending_parent}.",
    "ready": "Replay and the turn in flight are sent; live from here: {session, head, turn}.",
    "lagged": "This client fell behind and is dropped; reconnect with Last-Event-ID.",
    "closed": "The stream ends: {reason}.",
}


def _parameter(param: Param) -> Schema:
    return {
        "name": param.name,
        "in": param.where,
        "required": param.required,
        "description": param.description,
        "schema": param.schema,
    }


def _operation(op: Operation) -> Schema:
    doc: Schema = {"operationId": op.id, "summary": op.summary, "responses": {}}
    if op.params:
        doc["parameters"] = [_parameter(p) for p in op.params]
    if op.body is not None:
        doc["requestBody"] = {
            "required": op.body_required,
            "content": {"application/json": {"schema": op.body}},
        }
    if not op.auth:
        doc["security"] = []
    for code, (text, schema) in op.all_responses().items():
        answer: Schema = {"description": text}
        if op.stream and code == 200:
            answer["content"] = {"text/event-stream": {"schema": {"type": "string"}}}
            answer["x-sse-events"] = SSE_EVENTS
        elif op.media is not None and code == 200:
            answer["content"] = {op.media: {"schema": {"type": "string"}}}
        elif op.id == "openapi" and code == 200:
            answer["content"] = {"application/json": {"schema": {"type": "object"}}}
        elif schema is not None:
            answer["content"] = {"application/json": {"schema": _ref(schema)}}
        doc["responses"][str(code)] = answer
    return doc


def openapi(version: str) -> Schema:
    """The OpenAPI 3.1 document of :data:`OPERATIONS`."""
    paths: dict[str, Schema] = {}
    for op in (*OPERATIONS, *FILE_OPERATIONS):
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "infai",
            "version": version,
            "description": "Drive infai sessions over HTTP; watch them live as Server-Sent "
            "Events. Every route but health and this document needs the bearer token.",
        },
        "paths": paths,
        "components": {
            "schemas": {**COMPONENTS, **FILE_COMPONENTS},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


__all__ = ["SSE_EVENTS", "openapi"]

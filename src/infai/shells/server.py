"""``infai serve``: the HTTP API, with live output as Server-Sent Events.

Editors, web UIs and scripts drive sessions the way the TUI does in-process:
one :class:`~infai.agent.AgentSession` behind every shell. The server is a
Starlette app on uvicorn; its routes, their inputs and their answers are one
table (:mod:`.server_api`) from which the OpenAPI document is generated and
against which every request is checked before a handler runs. Open sessions,
their turns, permission questions and watchers live in :mod:`.server_sessions`.

Security model: the server listens on loopback unless told otherwise, and every
route but ``/v1/health`` and ``/v1/openapi.json`` needs the bearer token (given,
or made at first start and kept with mode 0600 as ``<home>/server-token``). A
request without the right token gets 401 before routing, so it cannot tell an
existing session from a missing one.

Streams: ``GET /v1/sessions/{id}/stream`` sends each settled event with its
event id as the SSE id; deltas carry none, so ``Last-Event-ID`` always names a
settled event and a reconnecting client is sent every settled event after it
from the store, then the message in flight so far, then live frames, with
nothing missing and nothing twice (see :meth:`.server_sessions.Served.watch`).
"""

from __future__ import annotations

import logging
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from infai.agent import Lagged
from infai.agent.compaction import DEFAULT_THRESHOLD, CompactionFailed
from infai.llm import Model
from infai.store import (
    Event,
    EventNotFound,
    HeadConflict,
    InvalidInput,
    SessionBusy,
    SessionExists,
    SessionNotFound,
    SessionStore,
    SessionView,
    StoreError,
    UnsupportedFormat,
    WriterLocked,
)
from infai.tools import Rule, Tool, builtin_tools
from infai.tools.policy import AllowAlways

from . import render
from .server_api import MAX_BODY, OPERATIONS, Operation, openapi, validate
from .server_auth import BearerAuth, check_token
from .server_channel import Feed, Frame, event_obj, frame, settled_frame
from .server_sessions import Conflict, Served, Sessions, Turn

log = logging.getLogger("infai.server")

#: seconds between keep-alive comments on an idle stream
PING_SECONDS = 15
#: settled events replayed per write
REPLAY_BATCH = 64


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status, headers=headers)


def _status_of(exc: Exception) -> int | None:
    """The HTTP status for an exception a handler may raise (None: a server fault)."""
    if isinstance(exc, ApiError):
        return exc.status
    if isinstance(exc, SessionNotFound | EventNotFound):
        return 404
    if isinstance(exc, InvalidInput):
        return 400
    if isinstance(exc, Conflict | WriterLocked | SessionExists | UnsupportedFormat):
        return 409
    if isinstance(exc, HeadConflict | SessionBusy):
        return 409
    if isinstance(exc, CompactionFailed):
        return 422
    return None


# -- requests ----------------------------------------------------------------


@dataclass
class Call:
    """A request that passed its operation's checks: ids, parameters and body."""

    sessions: Sessions
    app: AppConfig
    path: dict[str, str]
    query: dict[str, Any]
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def session_id(self) -> str:
        return self.path["session_id"]


@dataclass
class AppConfig:
    model_factory: Callable[[str | None], Model]
    working_dir: Path
    version: str


Handler = Callable[[Call], Awaitable[Response]]


async def _read_body(request: Request) -> bytes:
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY:
        raise ApiError(413, f"the body is larger than {MAX_BODY} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise ApiError(413, f"the body is larger than {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse_json(raw: bytes) -> Any:
    import json

    try:
        return json.loads(raw)
    except RecursionError:
        raise ApiError(400, "malformed JSON: nested too deeply") from None
    except ValueError as exc:
        raise ApiError(400, f"malformed JSON: {exc}") from None


async def _checked(
    op: Operation, request: Request
) -> tuple[dict[str, str], dict[str, Any], dict[str, str], dict[str, Any]]:
    """Path, query, header values and body, each checked against ``op``; or ApiError."""
    path: dict[str, str] = {}
    query: dict[str, Any] = {}
    headers: dict[str, str] = {}
    for param in op.params:
        if param.where == "path":
            raw: str | None = request.path_params[param.name]
        elif param.where == "query":
            raw = request.query_params.get(param.name)
        else:
            raw = request.headers.get(param.name) or None
        if raw is None:
            continue
        value: Any = raw
        if param.schema.get("type") == "boolean":
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ApiError(400, f"{param.where} parameter {param.name}: expected true or false")
            value = raw.lower() in ("true", "1")
        problem = validate(value, param.schema, f"{param.where} parameter {param.name}")
        if problem:
            raise ApiError(400, problem)
        if param.schema.get("format") == "uuid":
            value = value.lower()
        {"path": path, "query": query, "header": headers}[param.where][param.name] = value
    body: dict[str, Any] = {}
    if op.body is not None:
        raw_body = await _read_body(request)
        if raw_body.strip():
            parsed = _parse_json(raw_body)
            problem = validate(parsed, op.body)
            if problem:
                raise ApiError(422, problem)
            body = parsed
        elif op.body_required:
            raise ApiError(422, "body: a JSON object is required")
    return path, query, headers, body


def _endpoint(op: Operation, handler: Handler, sessions: Sessions, config: AppConfig) -> Any:
    async def endpoint(request: Request) -> Response:
        try:
            path, query, headers, body = await _checked(op, request)
            return await handler(Call(sessions, config, path, query, headers, body))
        except Exception as exc:
            status = _status_of(exc)
            if status is None:
                if not isinstance(exc, StoreError):
                    raise
                log.exception("%s %s failed", op.method, op.path)
                return error(500, f"the store failed: {exc}")
            return error(status, exc.message if isinstance(exc, ApiError) else str(exc))

    endpoint.__name__ = op.id
    return endpoint


@contextmanager
def reading(call: Call) -> Iterator[SessionView]:
    """The session for reading: its writer if open here, else a reader (no lock).

    With a shared database, other nodes write too: a fresh reader sees them.
    """
    served = call.sessions.open.get(call.session_id)
    if served is not None and not getattr(call.sessions.store, "shared_writers", False):
        yield served.writer
        return
    with call.sessions.store.open_reader(call.session_id) as reader:
        yield reader


def known_event(call: Call, event_id: str | None) -> None:
    """Raise EventNotFound before a bad id can open the session's writer."""
    if event_id is not None:
        with reading(call) as reader:
            reader.seq_of(event_id)


def ok(data: dict[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse(data, status)


# -- handlers ----------------------------------------------------------------


async def health(call: Call) -> Response:
    return ok({"status": "ok", "version": call.app.version})


async def openapi_document(call: Call) -> Response:
    return ok(openapi(call.app.version))


async def list_sessions(call: Call) -> Response:
    return ok({"sessions": [i.to_obj() for i in call.sessions.store.list_sessions()]})


async def create_session(call: Call) -> Response:
    working_dir = call.body.get("working_dir")
    if working_dir is not None and not (
        Path(working_dir).is_absolute() and Path(working_dir).is_dir()
    ):
        raise ApiError(422, f"body.working_dir: {working_dir!r} is not an absolute directory")
    model = call.body.get("model")
    if model is not None:
        try:
            call.app.model_factory(model)
        except ValueError as exc:
            raise ApiError(422, f"body.model: {exc}") from None
    info = call.sessions.store.create_session(
        name=call.body.get("name"),
        working_dir=working_dir or str(call.app.working_dir),
        model=model,
    )
    return ok(info.to_obj(), 201)


async def get_session(call: Call) -> Response:
    info = call.sessions.store.info(call.session_id)
    served = call.sessions.open.get(call.session_id)
    with reading(call) as reader:
        head, count = reader.head, reader.count
    state: dict[str, Any] = {"head": head, "events": count, "open": served is not None}
    if served is None:
        state.update(turn=None, busy=None, pending_parent=None, watchers=0, pending_approvals=0)
    else:
        state.update(
            turn=served.turn.id if served.turn else None,
            busy=served.busy,
            pending_parent=served.writer.pending_parent,
            watchers=served.channel.watchers,
            pending_approvals=len(served.questions),
        )
    return ok({**info.to_obj(), **state})


async def delete_session(call: Call) -> Response:
    call.sessions.store.info(call.session_id)
    await call.sessions.delete(call.session_id)
    return Response(status_code=204)


async def list_events(call: Call) -> Response:
    with reading(call) as reader:
        if call.query.get("all"):
            return ok(render.tree_json(list(reader.entries()), reader.head))
        head = reader.head
        return ok({"head": head, "events": [render.entry_json(e, head) for e in reader.path()]})


async def get_event(call: Call) -> Response:
    with reading(call) as reader:
        return ok(event_obj(reader.event(call.path["event_id"], resolve=True)))


async def get_context(call: Call) -> Response:
    with reading(call) as reader:
        context = reader.context(call.query.get("at"))
    boundary = context.boundary
    return ok(
        {
            "events": [event_obj(e) for e in context.events],
            "boundary": boundary.id if boundary else None,
        }
    )


async def get_head(call: Call) -> Response:
    served = call.sessions.open.get(call.session_id)
    if served is not None:
        return ok(served.head())
    with reading(call) as reader:
        return ok({"head": reader.head, "pending_parent": None})


async def select_branch(call: Call) -> Response:
    event_id = call.body["event_id"]
    event_id = None if event_id is None else event_id.lower()
    known_event(call, event_id)
    served = await call.sessions.serve(call.session_id)
    summary = await served.select(event_id, bool(call.body.get("summarize")))
    return ok({**served.head(), "summary": event_obj(summary) if summary else None})


async def prompt(call: Call) -> Response:
    given = call.body.get("from")
    from_event = None if given is None else given.lower()
    known_event(call, from_event)
    served = await call.sessions.serve(call.session_id)
    if not call.body.get("stream"):
        turn = served.start(call.body["text"], from_event)
        return ok({"turn": turn.id, "session": served.session_id}, 202)
    feed, _, _ = served.watch()  # before the turn starts: its first frame is turn_started
    try:
        turn = served.start(call.body["text"], from_event)
    except BaseException:
        feed.close()
        raise
    frames = _turn_frames(turn, feed)
    headers = {"Infai-Turn": turn.id}
    return EventSourceResponse(frames, ping=PING_SECONDS, sep="\n", headers=headers)


async def _turn_frames(turn: Turn, feed: Feed) -> AsyncIterator[bytes]:
    """The frames of one turn, up to its ``turn_ended``; the turn is cancelled if the
    client goes before that (a client that merely fell behind is not a client gone)."""
    held = True
    try:
        async for batch in feed.batches():
            chunk: list[bytes] = []
            for item in batch:
                chunk.append(item.raw)
                if item.name == "turn_ended" and item.data.get("turn") == turn.id:
                    held = False
                    break
            yield b"".join(chunk)
            if not held:
                return
    except Lagged:
        held = False
        yield frame("lagged", {"reason": "fell behind; the turn goes on, watch /stream"}).raw
    finally:
        feed.close()
        if held and turn.task is not None and not turn.task.done():
            log.info("the client of turn %s went away; cancelling it", turn.id)
            turn.task.cancel()


def _open_or_404(call: Call) -> Served | None:
    call.sessions.store.info(call.session_id)  # SessionNotFound
    return call.sessions.open.get(call.session_id)


async def cancel_turn(call: Call) -> Response:
    served = _open_or_404(call)
    if served is None:
        raise Conflict(f"no turn is in flight in session {call.session_id}")
    given = call.body.get("turn")
    turn = await served.cancel(None if given is None else given.lower())
    return ok({"turn": turn.id, "outcome": turn.outcome})


async def compact(call: Call) -> Response:
    served = await call.sessions.serve(call.session_id)
    return ok(event_obj(await served.compact()), 201)


async def list_approvals(call: Call) -> Response:
    served = _open_or_404(call)
    questions = served.questions.values() if served is not None else []
    return ok({"approvals": [q.to_obj() for q in questions]})


async def answer_approval(call: Call) -> Response:
    served = _open_or_404(call)
    question_id, answer = call.body["id"].lower(), call.body["answer"]
    patterns = call.body.get("patterns")
    if patterns is not None and answer != "allow-always":
        raise ApiError(422, "body.patterns: only with the answer 'allow-always'")
    reply = AllowAlways(tuple(p.strip() for p in patterns)) if patterns else answer
    if isinstance(reply, AllowAlways) and not all(reply.patterns):
        raise ApiError(422, "body.patterns: a pattern must not be blank")
    try:
        if served is None:
            raise KeyError(question_id)
        served.answer(question_id, reply)
    except KeyError:
        raise ApiError(
            404, f"no pending question {question_id} in session {call.session_id}"
        ) from None
    return ok({"id": question_id, "answer": answer})


async def _frames(
    served: Served, feed: Feed, now: list[Frame], start: int, end: int
) -> AsyncIterator[bytes]:
    """Replay ``[start, end)`` from the store, then the turn in flight, then live frames."""
    try:
        if start < end:
            with served.view() as view:
                for first in range(start, end, REPLAY_BATCH):
                    seqs = range(first, min(first + REPLAY_BATCH, end))
                    replayed = (settled_frame(view.event(view.entry_at(s).id)) for s in seqs)
                    yield b"".join(f.raw for f in replayed)
        yield b"".join(item.raw for item in now)
        floor = max(start, end)
        async for batch in feed.batches():
            chunk = b"".join(f.raw for f in batch if f.seq is None or f.seq >= floor)
            if chunk:
                yield chunk
    except Lagged:
        yield frame("lagged", {"reason": "fell behind; reconnect with Last-Event-ID"}).raw
    except StoreError as exc:  # the session closed under the replay
        yield frame("closed", {"reason": str(exc)}).raw
    finally:
        feed.close()


async def stream(call: Call) -> Response:
    if call.sessions.closing:
        raise Conflict("the server is shutting down")
    after = call.headers.get("Last-Event-ID") or call.query.get("after")
    known_event(call, after)
    served = await call.sessions.serve(call.session_id)
    if after is None:
        start = None
    else:
        try:
            with served.view() as view:
                start = view.seq_of(after) + 1
        except EventNotFound:  # appended elsewhere, not heard of here yet
            with call.sessions.store.open_reader(served.session_id) as reader:
                start = reader.seq_of(after) + 1
    feed, now, end = served.watch()
    ready = {"session": served.session_id, "head": served.head()["head"]}
    now.append(frame("ready", {**ready, "turn": served.turn.id if served.turn else None}))
    frames = _frames(served, feed, now, end if start is None else start, end)
    return EventSourceResponse(frames, ping=PING_SECONDS, sep="\n")


HANDLERS: dict[str, Handler] = {
    "health": health,
    "openapi": openapi_document,
    "list_sessions": list_sessions,
    "create_session": create_session,
    "get_session": get_session,
    "delete_session": delete_session,
    "list_events": list_events,
    "get_event": get_event,
    "get_context": get_context,
    "get_head": get_head,
    "select_branch": select_branch,
    "prompt": prompt,
    "cancel_turn": cancel_turn,
    "compact": compact,
    "list_approvals": list_approvals,
    "answer_approval": answer_approval,
    "stream": stream,
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("infai")
    except PackageNotFoundError:
        return "0"


def _default_models(name: str | None) -> Model:
    from infai.llm.registry import build_model

    return build_model(name or "offline")


def create_app(
    store: SessionStore,
    *,
    token: str,
    model_factory: Callable[[str | None], Model] = _default_models,
    tools: Callable[[], Iterable[Tool]] = builtin_tools,
    rules: Sequence[Rule] = (),
    approval_timeout: float = 300.0,
    working_dir: Path | None = None,
    observe: Callable[[Event], None] | None = None,
    compact_at: float | None = DEFAULT_THRESHOLD,
    idle_close: float | None = 600.0,
) -> Starlette:
    """The API as an ASGI app; ``app.state.sessions`` holds the open sessions.

    ``model_factory`` builds a session's model from its stored name (None: the
    default); ``tools`` makes each session's tools; ``rules`` start every
    session's policy; a question unanswered after ``approval_timeout`` seconds
    is denied; ``observe`` sees each settled event as it is fanned out;
    ``compact_at`` is the auto-compaction threshold (None: off); a session idle
    for ``idle_close`` seconds (no turn, no watcher, no question) is closed,
    releasing its writer (None: kept open until deleted or the server stops).
    """
    sessions = Sessions(
        store,
        model_factory=model_factory,
        tools=tools,
        rules=rules,
        approval_timeout=approval_timeout,
        observe=observe,
        compact_at=compact_at,
    )
    config = AppConfig(model_factory, (working_dir or Path.cwd()).resolve(), _version())
    routes = [
        Route(op.path, _endpoint(op, HANDLERS[op.id], sessions, config), methods=[op.method])
        for op in OPERATIONS
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return error(exc.status_code, exc.detail, exc.headers)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sessions.start_watching()  # a shared database: other nodes' appends reach our streams
        sessions.start_closing_idle(idle_close)
        yield
        await sessions.aclose()

    app = Starlette(
        routes=routes,
        middleware=[Middleware(BearerAuth, token=check_token(token, "the server token"))],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    app.state.sessions = sessions
    return app

"""The HTTP API as an ASGI app, with live output as Server-Sent Events.

Editors, web UIs and scripts drive sessions the way the TUI does in-process:
one :class:`~infai.agent.AgentSession` behind every shell. The server is a
Starlette app on uvicorn; its routes, their inputs and their answers are one
table (:mod:`.api`) from which the OpenAPI document is generated and
against which every request is checked before a handler runs. Open sessions,
their turns, permission questions and watchers live in :mod:`.sessions` and
:mod:`.served`; the handlers in :mod:`.routes`; what each error answers in
:mod:`.errors`; running on uvicorn in :mod:`.run`.

Security model: the server listens on loopback unless told otherwise, and every
route but ``/v1/health`` and ``/v1/openapi.json`` needs the bearer token (given,
or made at first start and kept with mode 0600 as ``<home>/server-token``). A
request without the right token gets 401 before routing, so it cannot tell an
existing session from a missing one. Before that, a request must name the
server by a loopback name in its ``Host`` header (:mod:`.hosts`: DNS
rebinding), unless the app is made to accept any. Each session runs under its
own working directory's configuration, not the server's
(:meth:`~infai.agent.Harness.config_for`).

Streams: ``GET /v1/sessions/{id}/stream`` sends each settled event with its
event id as the SSE id; deltas carry none, so ``Last-Event-ID`` always names a
settled event and a reconnecting client is sent every settled event after it
from the store, then the message in flight so far, then live frames, with
nothing missing and nothing twice (see :meth:`.served.Served.watch`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from infai.agent import CheckpointSettings, Config, Harness
from infai.llm import Model
from infai.store import Event, SessionStore
from infai.tools import Rule

from .api import MAX_BODY, OPERATIONS, Operation, Param, validate
from .auth import BearerAuth, check_token
from .channel import InertJSON
from .errors import LOGGED, ApiError, message_of, status_of
from .hosts import LOOPBACK_HOSTS, HostCheck
from .routes import HANDLERS, AppConfig, Call, Handler
from .sessions import Sessions
from .webclient import WebClient
from .workfiles import FILE_OPERATIONS

log = logging.getLogger("infai.server")

#: builds a model by name (tests and embedding: the models a harness builds)
ModelFactory = Callable[[str], Model]
#: auto-compaction threshold when the app builds its own harness
DEFAULT_COMPACT_AT = Config().compact_at


def error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return InertJSON({"error": message}, status, headers=headers)


# -- checking requests ---------------------------------------------------------


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
    try:
        return json.loads(raw)
    except RecursionError:
        raise ApiError(400, "malformed JSON: nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"malformed JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"malformed JSON: {exc}") from None


def _raw_param(param: Param, request: Request) -> str | None:
    if param.where == "path":
        value: str | None = request.path_params[param.name]
        return value
    if param.where == "query":
        return request.query_params.get(param.name)
    return request.headers.get(param.name) or None


def _param_value(param: Param, raw: str) -> Any:
    """A parameter's value checked against its schema (booleans parsed, ids lowered)."""
    value: Any = raw
    if param.schema.get("type") == "boolean":
        if raw.lower() not in ("true", "false", "1", "0"):
            raise ApiError(400, f"{param.where} parameter {param.name}: expected true or false")
        value = raw.lower() in ("true", "1")
    elif param.schema.get("type") == "integer":
        if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
            raise ApiError(400, f"{param.where} parameter {param.name}: expected a whole number")
        value = int(raw)
    problem = validate(value, param.schema, f"{param.where} parameter {param.name}")
    if problem:
        raise ApiError(400, problem)
    if param.schema.get("format") == "uuid":
        value = value.lower()
    return value


async def _body(op: Operation, request: Request) -> dict[str, Any]:
    if op.body is None:
        return {}
    raw_body = await _read_body(request)
    if not raw_body.strip():
        if op.body_required:
            raise ApiError(422, "body: a JSON object is required")
        return {}
    parsed = _parse_json(raw_body)
    problem = validate(parsed, op.body)
    if problem:
        raise ApiError(422, problem)
    body: dict[str, Any] = parsed
    return body


async def _checked(
    op: Operation, request: Request
) -> tuple[dict[str, str], dict[str, Any], dict[str, str], dict[str, Any]]:
    """Path, query, header values and body, each checked against ``op``; or ApiError."""
    found: dict[str, dict[str, Any]] = {"path": {}, "query": {}, "header": {}}
    for param in op.params:
        raw = _raw_param(param, request)
        if raw is not None:
            found[param.where][param.name] = _param_value(param, raw)
    return found["path"], found["query"], found["header"], await _body(op, request)


def _endpoint(op: Operation, handler: Handler, sessions: Sessions, config: AppConfig) -> Any:
    async def endpoint(request: Request) -> Response:
        try:
            path, query, headers, body = await _checked(op, request)
            return await handler(Call(sessions, config, path, query, headers, body))
        except Exception as exc:
            status = status_of(exc)
            if status is None:
                raise  # a bug: Starlette answers 500, with its traceback in the log
            if status in LOGGED:
                log.exception("%s %s failed", op.method, op.path)
            return error(status, message_of(exc, status))

    endpoint.__name__ = op.id
    return endpoint


# -- the app -------------------------------------------------------------------


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("infai")
    except PackageNotFoundError:
        return "0"


#: worker threads of the server's event loop: store work, and tool work in threads
WORKERS = 256


def _worker_pool() -> ThreadPoolExecutor:
    """Give the running loop a pool of :data:`WORKERS` threads (made only as needed).

    Tools and the store share the loop's default pool (``asyncio.to_thread``).
    Its usual size is the CPU count plus four: on a small machine six tool calls
    blocked for good (a read of a FIFO nobody writes, even after its turn was
    cancelled, since a thread cannot be stopped) left no thread for any
    session's store work, and every other session's requests waited for ever.
    Here a blocked tool holds one thread of many, and the rest go on.
    """
    pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="infai-server")
    asyncio.get_running_loop().set_default_executor(pool)
    return pool


def _release_pool(pool: ThreadPoolExecutor) -> None:
    """Stop ``pool`` without waiting for a thread a tool left blocked (shutting the
    loop down waits for its default pool's threads: it gets a fresh, idle one)."""
    pool.shutdown(wait=False, cancel_futures=True)
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))


#: files on the timeline for an app built without a harness (off; see create_app)
EMBEDDED_CHECKPOINTS = CheckpointSettings(enabled=False)


def create_app(
    store: SessionStore,
    *,
    token: str,
    harness: Harness | None = None,
    model_factory: ModelFactory | None = None,
    rules: Sequence[Rule] = (),
    approval_timeout: float = 300.0,
    working_dir: Path | None = None,
    observe: Callable[[Event], None] | None = None,
    compact_at: float | None = DEFAULT_COMPACT_AT,
    idle_close: float | None = 600.0,
    hosts: Iterable[str] | None = LOOPBACK_HOSTS,
) -> Starlette:
    """The API as an ASGI app; ``app.state.sessions`` holds the open sessions.

    Every session's agent is opened by ``harness`` (``infai serve`` passes
    the command line's), the one place its config, model, policy and tools are
    assembled; the app owns it from now on and closes it when it stops. Without
    one, the app builds a harness over ``store`` in ``working_dir`` with no
    configuration file: ``rules`` start every session's policy, ``compact_at``
    is the auto-compaction threshold (None: off), ``model_factory`` (tests,
    embedding) builds models by name instead of the model registry, and the
    sessions' files are not snapshotted (:data:`EMBEDDED_CHECKPOINTS`: an
    embedder's working directory may be anything; ``infai serve`` passes a
    harness whose configuration decides).

    A question unanswered after ``approval_timeout`` seconds is denied;
    ``observe`` sees each settled event as it is fanned out; a session idle
    for ``idle_close`` seconds (no turn, no watcher, no question) is closed,
    releasing its writer (None: kept open until deleted or the server stops).
    A request whose ``Host`` header is not one of ``hosts`` (with the port served
    on) is answered 421 (None: any Host, for ``--allow-remote``).
    """
    if harness is None:
        here = (working_dir or Path.cwd()).resolve()
        config = Config(compact_at=compact_at, rules=tuple(rules), checkpoints=EMBEDDED_CHECKPOINTS)
        harness = Harness(store, here, config=config, models=model_factory)
    elif harness.store is not store or model_factory is not None or rules:
        raise TypeError("create_app: give a harness over the same store, or its parts")
    space = harness
    sessions = Sessions(space, approval_timeout=approval_timeout, observe=observe)
    app_config = AppConfig((working_dir or space.working_dir).resolve(), _version())
    routes = [
        Route(op.path, _endpoint(op, HANDLERS[op.id], sessions, app_config), methods=[op.method])
        for op in (*OPERATIONS, *FILE_OPERATIONS)
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return error(exc.status_code, exc.detail, exc.headers)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        pool = _worker_pool()
        await sessions.start_node()  # a shared database: other nodes' work reaches our streams
        sessions.start_closing_idle(idle_close)
        try:
            yield
        finally:
            try:
                await sessions.aclose()
            finally:
                await space.aclose()  # the harness's own model (sessions closed theirs)
                _release_pool(pool)

    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(HostCheck, hosts=hosts),  # first: a rebound name learns nothing
            Middleware(WebClient),  # the page at / (no secrets in it: it asks for the token)
            Middleware(BearerAuth, token=check_token(token, "the server token")),
        ],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    app.state.sessions = sessions
    return app


__all__ = ["create_app"]

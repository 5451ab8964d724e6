"""The route handlers: one coroutine per operation of :data:`.api.OPERATIONS`.

A handler gets a :class:`Call` whose path, query, headers and body have already
been checked against its operation, and answers with a response or raises an
error of the tree (mapped to a status by :mod:`.errors`).

No handler touches the store on the event loop: every read (listing, metadata,
the timeline, an event, the context, replaying a stream) runs in a worker
thread on a fresh reader of its own, so one session's slow disk or database
never stalls another session's stream. A fresh reader sees everything the
server has published (published events are appended first), and, with a
shared database, what other nodes appended too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sse_starlette import EventSourceResponse
from starlette.responses import JSONResponse, Response

from infai.agent import (
    Lagged,
    NotInFlight,
    RestoreRefused,
    context_tokens,
    load_manifest,
    manifest_of,
    settled_obj,
)
from infai.store import ObjectNotFound, SessionView, StoreError
from infai.tools import AllowAlways, DenyWith, Reply

from .. import render
from .channel import Feed, Frame, InertJSON, frame, settled_frame
from .elsewhere import answer_anywhere, cancel_elsewhere
from .errors import ApiError, Conflict
from .export import export_session
from .openapi import openapi
from .search import search
from .served import Served
from .sessions import MODEL_ERRORS, Sessions
from .turnstate import Running
from .workfiles import checkout_files, choice_of, get_diff, get_files, refused, restore_first

log = logging.getLogger("infai.server")

T = TypeVar("T")

#: seconds between keep-alive comments on an idle stream
PING_SECONDS = 15
#: the path's last events that count for ``used_tokens`` (as the TUI counts them)
TOKENS_LOOKBACK = 50
#: settled events replayed per write
REPLAY_BATCH = 64


@dataclass
class AppConfig:
    """What every handler may need besides the sessions: defaults and the version."""

    working_dir: Path
    version: str


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

    async def read(self, work: Callable[[SessionView], T]) -> T:
        """``work`` on a fresh reader of the session, in a worker thread."""
        store, session_id = self.sessions.store, self.session_id

        def run() -> T:
            with store.open_reader(session_id) as reader:
                return work(reader)

        return await asyncio.to_thread(run)

    async def known_event(self, event_id: str | None) -> None:
        """Raise EventNotFound before a bad id can open the session's writer."""
        if event_id is not None:
            await self.read(lambda reader: reader.seq_of(event_id))

    async def exists(self) -> Served | None:
        """The session open here, if it is; SessionNotFound if there is no such session."""
        await asyncio.to_thread(self.sessions.store.info, self.session_id)
        return self.sessions.open.get(self.session_id)


Handler = Callable[[Call], Awaitable[Response]]


def ok(data: dict[str, Any], status: int = 200) -> JSONResponse:
    return InertJSON(data, status)


async def health(call: Call) -> Response:
    return ok({"status": "ok", "version": call.app.version})


async def openapi_document(call: Call) -> Response:
    return ok(openapi(call.app.version))


async def list_sessions(call: Call) -> Response:
    summaries = await asyncio.to_thread(call.sessions.store.list_summaries)
    return ok({"sessions": [s.to_obj() for s in summaries]})


async def create_session(call: Call) -> Response:
    working_dir = call.body.get("working_dir")
    if working_dir is not None and not await asyncio.to_thread(_is_absolute_dir, working_dir):
        raise ApiError(422, f"body.working_dir: {working_dir!r} is not an absolute directory")
    working_dir = working_dir or str(call.app.working_dir)
    model = call.body.get("model")
    if model is not None:
        try:  # as the session's own directory defines it; what is built is closed again
            await call.sessions.harness.check_model(model, working_dir)
        except MODEL_ERRORS as exc:
            raise ApiError(422, f"body.model: {exc}") from None
    info = await asyncio.to_thread(
        call.sessions.store.create_session,
        name=call.body.get("name"),
        working_dir=working_dir,
        model=model,
    )
    return ok(info.to_obj(), 201)


def _is_absolute_dir(text: str) -> bool:
    return Path(text).is_absolute() and Path(text).is_dir()


async def get_session(call: Call) -> Response:
    info = await asyncio.to_thread(call.sessions.store.info, call.session_id)
    served = call.sessions.open.get(call.session_id)
    follows = served.agent.pending_parent if served is not None else None
    head, count, used = await call.read(lambda reader: _tokens_read(reader, follows))
    state: dict[str, Any] = {"head": head, "events": count, "open": served is not None}
    state.update(used_tokens=used, context_window=await call.sessions.context_window(info))
    state["model_in_use"] = call.sessions.model_name(info)
    if served is None:
        state.update(turn=None, busy=None, pending_parent=None, watchers=0, pending_approvals=0)
        node = call.sessions.node
        if node is not None:  # not open here: the store says what runs on other nodes
            running = await asyncio.to_thread(node.live.running, call.session_id)
            pending = await asyncio.to_thread(node.live.pending, call.session_id)
            state.update(turn=running[0] if running else None, pending_approvals=len(pending))
    else:
        state.update(
            turn=served.turn_id,
            busy=served.busy,
            pending_parent=served.agent.pending_parent,
            watchers=served.channel.subscribers,
            pending_approvals=len(served.questions)
            + (len(served.mirror.questions) if served.mirror is not None else 0),
        )
    return ok({**info.to_obj(), **state})


def _tokens_read(reader: SessionView, pending: str | None) -> tuple[str | None, int, int]:
    """HEAD, the count and what the next request holds, as the agent counts it
    (:func:`~infai.agent.context_tokens`): the last reported usage and what came
    after, over the last :data:`TOKENS_LOOKBACK` events of the path the next
    prompt follows (no blob is read: an event kept in one counts by its preview)."""
    count = reader.count
    path = reader.path(pending) if count else []
    used = context_tokens([reader.event(entry.id) for entry in path[-TOKENS_LOOKBACK:]])
    return reader.head, count, used


async def update_session(call: Call) -> Response:
    """The session's name, changed in its metadata (under the writer's own lock
    when a turn holds it: the store's :meth:`~infai.store.SessionStore.update_info`)."""
    name = call.body["name"] or None
    info = await asyncio.to_thread(call.sessions.store.update_info, call.session_id, name=name)
    return ok(info.to_obj())


async def delete_session(call: Call) -> Response:
    await call.exists()
    await call.sessions.delete(call.session_id)
    return Response(status_code=204)


async def list_events(call: Call) -> Response:
    def timeline(reader: SessionView) -> dict[str, Any]:
        if call.query.get("all"):
            return render.tree_json(list(reader.entries()), reader.head)
        head = reader.head
        return {"head": head, "events": [render.entry_json(e, head) for e in reader.path()]}

    return ok(await call.read(timeline))


async def get_event(call: Call) -> Response:
    event_id = call.path["event_id"]
    return ok(settled_obj(await call.read(lambda reader: reader.event(event_id, resolve=True))))


async def get_manifest(call: Call) -> Response:
    """The tools the event's model request was offered (:mod:`infai.agent.manifest`)."""
    event = await call.read(lambda reader: reader.event(call.path["event_id"], resolve=True))
    digest = manifest_of(event)
    objects = getattr(call.sessions.store, "objects", None)
    if digest is None or objects is None:
        raise ApiError(404, f"event {event.id} names no tool manifest")
    try:
        tools = await asyncio.to_thread(load_manifest, objects, digest)
    except ObjectNotFound:
        raise ApiError(
            404, f"event {event.id}: its tool manifest {digest} is not in the store"
        ) from None
    return ok({"digest": digest, "tools": tools})


async def get_context(call: Call) -> Response:
    at = call.query.get("at")
    context = await call.read(lambda reader: reader.context(at))
    boundary = context.boundary
    return ok(
        {
            "events": [settled_obj(e) for e in context.events],
            "boundary": boundary.id if boundary else None,
        }
    )


async def get_head(call: Call) -> Response:
    served = call.sessions.open.get(call.session_id)
    if served is not None:
        return ok(served.head())
    head = await call.read(lambda reader: reader.head)
    return ok({"head": head, "pending_parent": None})


async def select_branch(call: Call) -> Response:
    event_id = call.body["event_id"]
    event_id = None if event_id is None else event_id.lower()
    await call.known_event(event_id)
    served = await call.sessions.serve(call.session_id)
    try:  # a summarised switch restores the event's files first: the 409 question
        summary = await served.select(
            event_id, bool(call.body.get("summarize")), choice_of(call.body)
        )
    except RestoreRefused as exc:
        return refused(exc)
    return ok({**served.head(), "summary": settled_obj(summary) if summary else None})


async def prompt(call: Call) -> Response:
    given = call.body.get("from")
    from_event = None if given is None else given.lower()
    await call.known_event(from_event)
    served = await call.sessions.serve(call.session_id)
    answer = await restore_first(served, call.body, from_event)  # the picked event's files
    if isinstance(answer, Response):
        return answer
    from_event = None  # picked (and its files restored) by restore_first
    if not call.body.get("stream"):
        turn = await served.start(call.body["text"], from_event, answer)
        asked = await turn.turn.asked()  # accepted means stored: answered only once durable
        await _told(call)
        return ok({"turn": turn.id, "session": served.session_id, "prompt": asked.id}, 202)
    feed, _, _ = served.watch()  # before the turn starts: its first frame is turn_started
    try:
        turn = await served.start(call.body["text"], from_event, answer)
    except BaseException:
        feed.close()
        raise
    try:
        asked = await turn.turn.asked()
    except BaseException:  # the client went before it was stored, or storing failed
        feed.close()
        if turn.task is not None:
            turn.task.cancel()
        raise
    await _told(call)
    frames = _turn_frames(turn, feed)
    headers = {"Infai-Turn": turn.id, "Infai-Prompt": asked.id}
    return EventSourceResponse(frames, ping=PING_SECONDS, sep="\n", headers=headers)


async def _told(call: Call) -> None:
    """With other nodes: the turn is known to them (a cancel anywhere finds it)."""
    if call.sessions.node is not None:
        await call.sessions.node.flush()


async def _turn_frames(turn: Running, feed: Feed) -> AsyncIterator[bytes]:
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


async def cancel_turn(call: Call) -> Response:
    served = await call.exists()
    given = call.body.get("turn")
    given = None if given is None else given.lower()
    live = call.sessions.node.live if call.sessions.node is not None else None
    if served is not None and (served.turn is not None or live is None):
        turn = await served.cancel(given)
        ended = turn.outcome
        return ok({"turn": turn.id, "outcome": ended.outcome if ended is not None else None})
    if live is None:
        raise NotInFlight(f"no turn is in flight in session {call.session_id}")
    turn_id, outcome = await cancel_elsewhere(call, live, given)
    return ok({"turn": turn_id, "outcome": outcome})


async def compact(call: Call) -> Response:
    served = await call.sessions.serve(call.session_id)
    return ok(settled_obj(await served.compact()), 201)


async def list_approvals(call: Call) -> Response:
    served = await call.exists()
    node = call.sessions.node
    if node is not None:  # the store's: every node's questions, asked before or not
        return ok({"approvals": await asyncio.to_thread(node.live.pending, call.session_id)})
    questions = served.questions.values() if served is not None else []
    return ok({"approvals": [q.to_obj() for q in questions]})


async def answer_approval(call: Call) -> Response:
    served = await call.exists()
    question_id, answer = call.body["id"].lower(), call.body["answer"]
    patterns = call.body.get("patterns")
    if patterns is not None and answer != "allow-always":
        raise ApiError(422, "body.patterns: only with the answer 'allow-always'")
    reason = call.body.get("reason")
    if reason is not None and answer != "deny":
        raise ApiError(422, "body.reason: only with the answer 'deny'")
    reply: Reply = AllowAlways(tuple(p.strip() for p in patterns)) if patterns else answer
    if reason is not None:
        if not reason.strip():
            raise ApiError(422, "body.reason: must not be blank")
        reply = DenyWith(reason.strip())
    if isinstance(reply, AllowAlways) and not all(reply.patterns):
        raise ApiError(422, "body.patterns: a pattern must not be blank")
    if not await answer_anywhere(call, served, question_id, reply):
        raise ApiError(404, f"no pending question {question_id} in session {call.session_id}")
    return ok({"id": question_id, "answer": answer})


def _replayed(reader: SessionView, seqs: range) -> bytes:
    """The settled frames of events ``seqs``, read from the store (in a worker thread)."""
    return b"".join(settled_frame(reader.event(reader.entry_at(s).id)).raw for s in seqs)


async def _replay(call: Call, start: int, end: int) -> AsyncIterator[bytes]:
    """Settled events ``[start, end)`` from a fresh reader, a batch per worker-thread read."""
    if start >= end:
        return
    reader = await asyncio.to_thread(call.sessions.store.open_reader, call.session_id)
    try:
        for first in range(start, end, REPLAY_BATCH):
            seqs = range(first, min(first + REPLAY_BATCH, end))
            yield await asyncio.to_thread(_replayed, reader, seqs)
    finally:
        await asyncio.to_thread(reader.close)


async def _frames(
    call: Call, feed: Feed, now: list[Frame], start: int, end: int
) -> AsyncIterator[bytes]:
    """Replay ``[start, end)`` from the store, then the turn in flight, then live frames."""
    try:
        async for chunk in _replay(call, start, end):
            yield chunk
        yield b"".join(item.raw for item in now)
        floor = max(start, end)
        async for batch in feed.batches():
            chunk = b"".join(f.raw for f in batch if f.seq is None or f.seq >= floor)
            if chunk:
                yield chunk
    except Lagged:
        yield frame("lagged", {"reason": "fell behind; reconnect with Last-Event-ID"}).raw
    except StoreError as exc:  # the session was removed (or the store lost) under the replay
        yield frame("closed", {"reason": str(exc)}).raw
    finally:
        feed.close()


async def stream(call: Call) -> Response:
    if call.sessions.closing:
        raise Conflict("the server is shutting down")
    after = call.headers.get("Last-Event-ID") or call.query.get("after")
    await call.known_event(after)
    served = await call.sessions.serve(call.session_id)
    start = None
    if after is not None:
        start = await call.read(lambda reader: reader.seq_of(after)) + 1
    feed, now, end = served.watch()
    ready = {"session": served.session_id, "head": served.head()["head"]}
    if served.last_end is not None:  # how the last turn ended, for a client that lost it
        ready["last_turn"] = served.last_end
    now.append(frame("ready", {**ready, "turn": served.turn_id}))
    frames = _frames(call, feed, now, end if start is None else start, end)
    return EventSourceResponse(frames, ping=PING_SECONDS, sep="\n")


HANDLERS: dict[str, Handler] = {
    "health": health,
    "openapi": openapi_document,
    "list_sessions": list_sessions,
    "create_session": create_session,
    "get_session": get_session,
    "update_session": update_session,
    "delete_session": delete_session,
    "list_events": list_events,
    "get_event": get_event,
    "get_manifest": get_manifest,
    "get_context": get_context,
    "get_head": get_head,
    "select_branch": select_branch,
    "prompt": prompt,
    "cancel_turn": cancel_turn,
    "compact": compact,
    "list_approvals": list_approvals,
    "answer_approval": answer_approval,
    "stream": stream,
    "export_session": export_session,
    "search": search,
    "get_files": get_files,
    "get_diff": get_diff,
    "checkout": checkout_files,
}

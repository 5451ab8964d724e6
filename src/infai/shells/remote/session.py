"""A session on ``infai serve``, driven as the TUI drives a local one.

:class:`RemoteSession` offers what the TUI uses of an
:class:`~infai.agent.AgentSession`: its id, working directory and model name,
the event picked to continue from (:meth:`~RemoteSession.select`, ``POST
…/select``), a turn slot (:meth:`~RemoteSession.start` is ``POST …/prompt``,
:meth:`~RemoteSession.cancel` is ``POST …/cancel``), compaction, and the
session's events on an :class:`~infai.agent.EventHub` as the agent's own types
(``Saved(Event)``, ``Streamed(TextDelta)``, ``TurnEnded``…), translated from the
session's server-sent ``/stream`` read in a thread. The turn this client
started is published on :attr:`~RemoteSession.hub`, exactly as a local
session's turn; a turn started elsewhere (another client, or one running when
this client attached) and events appended outside a turn are published on
:attr:`~RemoteSession.others`, for the TUI to show as they come. A permission
question (``approval``) goes to the approver the shell set, whoever's turn
asks, and its answer is posted back; one answered elsewhere (or timed out)
closes the dialog. A question waiting when the client attaches is sent first
by the server, so it is asked at once.

:class:`RemoteHarness` and :class:`RemoteStore` are the few harness and store
members the TUI reads (the local history's home, a session's metadata, search,
an index reader, a rename); what the API has no form for says so with a clear error.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from infai.agent import AgentEvent, EventHub, Hub, Saved, SlotConflict, Streamed, Turn, TurnEnded
from infai.checkpoints import FilesState, OnRestore, Restored, RestoreRefused
from infai.llm import Notice, ReasoningDelta, TextDelta
from infai.store import Event, InvalidInput, SearchHit, SearchResults, SessionInfo
from infai.tools import AllowAlways, Approver, Ask, DenyWith, Reply, Rule

from .client import Frame, Remote, RemoteError, patch, post_data, watch
from .view import RemoteView, event_of

#: seconds to wait for the stream's ``ready`` when a session is opened
READY_WAIT = 10.0
#: seconds between two tries to open a stream that broke off
RECONNECT = 1.0
#: the fields of :class:`~infai.store.SessionInfo` in the API's session objects
INFO_FIELDS = (
    *("id", "format", "name", "working_dir", "model", "created_at", "updated_at"),
    *("parent_session", "parent_event", "extra"),
)


def info_of(obj: dict[str, Any]) -> SessionInfo:
    """A session's metadata from the API's session object."""
    return SessionInfo.from_obj({k: v for k, v in obj.items() if k in INFO_FIELDS}, "the server")


@dataclass
class RemoteModel:
    """The session's model as the server names it, with its context window as the
    server says (``GET /sessions/{id}``; 0: the server cannot build it)."""

    name: str
    context_window: int = 0


#: the model's name where the server did not say it (a server older than ``model_in_use``)
SERVERS_MODEL = "(the server's)"


def model_in_use(detail: dict[str, Any]) -> str:
    """The name of the model a session's next prompt uses, from its ``GET
    /sessions/{id}``: the server says it (the session's own, else its default)."""
    return str(detail.get("model_in_use") or detail.get("model") or SERVERS_MODEL)


def ask_of(data: dict[str, Any]) -> Ask:
    """A question of the ``approval`` frame, as an approver is asked it."""
    tool = str(data.get("tool", "?"))
    return Ask(
        tool=tool,
        subject=str(data.get("subject", "")),
        reason=str(data.get("reason", "")),
        always=tuple(Rule("allow", tool, str(p)) for p in data.get("always") or ()),
        note=str(data.get("note") or ""),
        caller=str(data.get("caller") or ""),
        arguments=dict(data.get("arguments") or {}),
    )


def answer_body(question: str, reply: Reply) -> dict[str, Any]:
    """``POST …/approvals``'s body for an approver's reply."""
    if isinstance(reply, AllowAlways):
        return {"id": question, "answer": "allow-always", "patterns": list(reply.patterns)}
    if isinstance(reply, DenyWith):
        return {"id": question, "answer": "deny", "reason": reply.reason}
    return {"id": question, "answer": "deny" if reply == "timeout" else reply}


def _outcome(said: object) -> Literal["done", "error", "cancelled"]:
    if said == "done" or said == "cancelled":
        return said
    return "error"


def agent_event(frame: Frame) -> AgentEvent | None:
    """The agent event a ``delta`` or ``turn_ended`` frame carries (None: another kind)."""
    data = frame.data
    if frame.name == "turn_ended":
        return TurnEnded(_outcome(data.get("outcome")), data.get("error"))
    if frame.name != "delta":
        return None
    kind = data.get("kind")
    if kind == "text":
        return Streamed(TextDelta(str(data.get("text", ""))))
    if kind == "reasoning":
        return Streamed(ReasoningDelta(str(data.get("text", ""))))
    if kind == "notice":
        return Streamed(Notice(str(data.get("message", ""))))
    return None  # a tool call's arguments as they stream: shown once settled


@dataclass(frozen=True)
class Asking:
    """A permission question of the server (an ``approval`` frame's data), for the
    shell to ask with :meth:`RemoteSession.ask` in its own context."""

    question: dict[str, Any]


@dataclass
class RemoteStore:
    """The store members the TUI reads, answered by the server."""

    remote: Remote
    #: the local home: the prompt history is this machine's
    home: Path
    shared_writers: bool = False  # the session's stream says what others append
    recovery_notes: dict[str, list[str]] = field(default_factory=dict)

    def info(self, session_id: str) -> SessionInfo:
        return info_of(self.remote.get(f"/sessions/{session_id}"))

    def open_reader(self, session_id: str) -> RemoteView:
        return RemoteView(self.remote, session_id)

    def search(self, query: str, limit: int = 20) -> SearchResults:
        """The server's ``GET /search`` hits, best first."""
        found = self.remote.get("/search", q=query, limit=limit)
        return SearchResults(_hit(obj) for obj in found["hits"])

    def update_info(self, session_id: str, **changes: Any) -> SessionInfo:
        """Rename the session on the server (``PATCH /sessions/{id}``); its other
        metadata is the server's (the model is chosen when the session is made)."""
        if set(changes) - {"name"}:
            raise InvalidInput(f"cannot change {sorted(set(changes) - {'name'})} with --remote")
        return info_of(patch(self.remote, f"/sessions/{session_id}", changes))


def _hit(obj: dict[str, Any]) -> SearchHit:
    fields = {k: v for k, v in obj.items() if k in SearchHit.__slots__}
    fields["marks"] = [(int(a), int(b)) for a, b in obj.get("marks", ())]
    return SearchHit(**fields)


class RemoteHarness:
    """The harness members the TUI reads, for a server's sessions."""

    def __init__(
        self, remote: Remote, home: Path, working_dir: Path, server_dir: str | None = None
    ) -> None:
        self.remote = remote
        self.store = RemoteStore(remote, home)
        #: this machine's directory (the prompt history's key)
        self.working_dir = working_dir
        #: where new sessions work on the server (None: the server's own directory)
        self.server_dir = server_dir
        self.model = RemoteModel(SERVERS_MODEL)
        self.approver: Approver | None = None

    def take_notices(self) -> list[str]:
        return []

    def mcp(self, working_dir: Path | None) -> None:
        return None  # the server's MCP servers are the server's

    async def aclose(self) -> None:
        """Nothing of its own to close: the client is the command line's."""


class RemoteSession:
    """A server's session, as the TUI drives an :class:`~infai.agent.AgentSession`."""

    def __init__(self, space: RemoteHarness, detail: dict[str, Any]) -> None:
        self.space = space
        self.remote = space.remote
        self.session_id = str(detail["id"])
        self.working_dir = Path(detail.get("working_dir") or ".")
        self.model = RemoteModel(model_in_use(detail), int(detail.get("context_window") or 0))
        self.view = RemoteView(self.remote, self.session_id)
        self.hub = EventHub()  # this client's turns
        #: other turns, appends outside a turn, and every question
        self.others: Hub[AgentEvent | Asking] = Hub()
        #: what :attr:`others` carries, held from the start until it is read (a turn
        #: in flight is sent before the stream is live, and the shell reads it after)
        self.followed = self.others.subscribe(limit=sys.maxsize)
        self.turn: Turn | None = None
        self.notices: list[str] = []
        self.on_restore = OnRestore()
        self.parked = False  # nothing to look for: the stream says what others append
        self._pending: str | None = detail.get("pending_parent")
        self._choice: OnRestore | None = None  # the restore's, for the next prompt
        self._starting = False  # a prompt is being posted: the next turn is ours
        self._mine: str | None = None  # the id of this client's turn
        self._running: str | None = None  # the turn the stream is in
        self._ended: dict[str, TurnEnded] = {}
        self._endings: dict[str, asyncio.Future[TurnEnded]] = {}
        self._asking: dict[str, asyncio.Task[None]] = {}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._failed: str | None = None  # why the stream could not be opened
        self._loop: asyncio.AbstractEventLoop | None = None
        self._context = contextvars.copy_context()
        self._thread: threading.Thread | None = None
        self.detached = False

    # -- the stream ------------------------------------------------------------------

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start reading the session's stream (a thread) and wait until it is live:
        the turn in flight and the questions waiting have been sent by then."""
        self._loop = loop
        self._context = contextvars.copy_context()  # the shell's (a TUI's active app)
        self._thread = threading.Thread(target=self._read, name="infai-remote", daemon=True)
        self._thread.start()
        if not self._ready.wait(READY_WAIT):
            raise RemoteError(f"{self.remote.url}: the session's stream did not start")
        if self._failed is not None:
            raise RemoteError(self._failed)

    def _read(self) -> None:
        """Follow the stream until :meth:`detach`; a stream that breaks off (a
        server restarting, a network gone) is opened again after the last settled
        event, which the server replays first; a session deleted ends it."""
        last: str | None = None
        again = False
        try:
            while not self._stop.is_set():
                try:
                    last = self._follow(last, again)  # ended by the server: open it again
                except RemoteError as exc:
                    if self._stop.is_set():
                        return
                    if not self._ready.is_set():  # the first: opening the session fails
                        self._failed = str(exc)
                        return
                    if exc.status == 404 or not again:
                        gone = exc.status == 404
                        self._hand(Frame("broken", {"error": str(exc), "gone": gone}))
                    if exc.status == 404:  # the session was deleted
                        return
                again = True
                self._stop.wait(RECONNECT)
        finally:
            self._ready.set()

    def _follow(self, last: str | None, again: bool) -> str | None:
        """One connection of the stream (``after`` the last settled event seen);
        the id of the last settled event when it ends. On a reconnection the
        deltas sent before ``ready`` are the message in flight again: left out
        (what was missed is in the settled message)."""
        path = f"/sessions/{self.session_id}/stream"
        live = False
        for frame in watch(self.remote, path, after=last):
            if self._stop.is_set():
                break
            if frame.name == "ready":
                live = True
                self._ready.set()
            elif frame.name == "settled":
                last = frame.id or last
                frame = Frame("settled", self._settled(frame.data), frame.id)
            elif again and not live and frame.name == "delta":
                continue
            self._hand(frame)
        return last

    def _settled(self, data: dict[str, Any]) -> dict[str, Any]:
        """A settled event with its parent's seq and its record (fetched when the
        stream left a blob's out), in the reading thread."""
        data = {**data, "parent_seq": self.view.parent_seq(data)}
        if data.get("record") is None and data.get("digest"):
            with contextlib.suppress(RemoteError):
                got = self.remote.get(f"/sessions/{self.session_id}/events/{data['id']}")
                data["record"] = got.get("record")
        return data

    def _hand(self, frame: Frame) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                loop.call_soon_threadsafe(self._take, frame, context=self._context)

    def _take(self, frame: Frame) -> None:
        """One frame, on the loop: routed to :attr:`hub` or :attr:`others`."""
        data = frame.data
        if frame.name == "turn_started":
            self._started(str(data.get("turn")))
        elif frame.name == "settled":
            event = event_of(data)
            self.view.add(event)
            self._pending = None  # an append continues from the pick: it is HEAD now
            self._publish(Saved(event))
        elif frame.name == "approval":  # asked by the shell, in its own context
            self.others.publish(Asking(data))
        elif frame.name == "approval_resolved":
            asking = self._asking.pop(str(data.get("id")), None)
            if asking is not None and not asking.done():
                asking.cancel()  # answered elsewhere, or timed out: the dialog closes
        elif frame.name == "selected":
            self._pending = data.get("pending_parent")
        elif frame.name == "ready":
            self._caught_up(data.get("turn"))
        elif frame.name in ("closed", "lagged", "broken"):
            said = data.get("reason") or data.get("error") or "fell behind"
            again = "" if data.get("gone") else "; following it again"
            self.others.publish(Streamed(Notice(f"the server's stream ended ({said}){again}")))
        else:
            self._agent_frame(frame)

    def _agent_frame(self, frame: Frame) -> None:
        event = agent_event(frame)
        if event is None:
            return
        self._publish(event)
        if isinstance(event, TurnEnded):
            turn = str(frame.data.get("turn"))
            self._ended[turn] = event
            ending = self._endings.pop(turn, None)
            if ending is not None and not ending.done():
                ending.set_result(event)
            if self._mine == turn:
                self._mine = None
            self._running = None

    def _caught_up(self, running: object) -> None:
        """The stream is live (again): a turn followed before it broke off that
        the server no longer runs ended meanwhile, unseen; it is ended here."""
        gone = self._running
        if gone is not None and gone != running:
            said = "the turn ended while the server's stream was broken off"
            self._agent_frame(
                Frame("turn_ended", {"turn": gone, "outcome": "error", "error": said})
            )

    def _publish(self, event: AgentEvent) -> None:
        mine = self._running is not None and self._running == self._mine
        (self.hub if mine else self.others).publish(event)

    def _started(self, turn_id: str) -> None:
        self._running = turn_id
        if self._starting and self._mine is None:
            self._mine = turn_id
        self._turn_of(turn_id)

    def _turn_of(self, turn_id: str) -> Turn:
        """The :class:`~infai.agent.Turn` for a turn of the server (made once)."""
        if self.turn is not None and self.turn.id == turn_id:
            return self.turn
        turn = Turn(turn_id)
        turn.task = asyncio.ensure_future(self._until_ended(turn))
        self.turn = turn
        return turn

    async def _until_ended(self, turn: Turn) -> TurnEnded:
        try:
            ended = self._ended.get(turn.id)
            if ended is None:
                ending = self._endings.setdefault(
                    turn.id, asyncio.get_running_loop().create_future()
                )
                ended = await ending
            turn.outcome = ended
            return ended
        finally:
            if self.turn is turn:
                self.turn = None

    async def ask(self, asking: Asking) -> None:
        """Ask the shell's approver ``asking``'s question and post its answer; one
        answered elsewhere first (or timed out) is cancelled (see :meth:`_take`)."""
        approver, question = self.space.approver, str(asking.question["id"])
        task = asyncio.current_task()
        if approver is None or task is None or self.detached:
            return
        self._asking[question] = task
        try:
            reply = await approver(ask_of(asking.question))
        finally:
            self._asking.pop(question, None)
        body = answer_body(question, reply)
        with contextlib.suppress(RemoteError):  # answered elsewhere, or expired, meanwhile
            await asyncio.to_thread(self.remote.post, self._path("approvals"), body)

    def _path(self, what: str) -> str:
        return f"/sessions/{self.session_id}/{what}"

    # -- the session's members the TUI uses ------------------------------------------

    @property
    def busy(self) -> str | None:
        return "a turn" if self.turn is not None else None

    @property
    def pending_parent(self) -> str | None:
        return self._pending

    def select(self, event_id: str | None) -> None:
        """The next prompt continues from ``event_id`` (None: HEAD), on the server."""
        answer = self.remote.post(self._path("select"), {"event_id": event_id})
        self._pending = answer.get("pending_parent") if answer else event_id

    async def start(self, text: str, from_event: str | None = None) -> Turn:
        """Post the prompt (answered once it is stored); the turn runs on the server.
        A refusal (a turn running, files changed outside the agent) is a
        :class:`~infai.agent.SlotConflict` saying the server's reason."""
        if self.turn is not None:
            raise SlotConflict(f"session {self.session_id} is busy: a turn is running")
        body: dict[str, Any] = {"text": text}
        if from_event is not None:
            body["from"] = from_event
        choice, self._choice = self._choice, None
        if choice is not None:  # answered before (:meth:`continue_from`)
            body.update(force=choice.force, keep=[*choice.keep], keep_files=choice.keep_files)
        self._starting = True
        try:
            answer = await asyncio.to_thread(self.remote.post, self._path("prompt"), body)
        except RemoteError as exc:
            raise SlotConflict(str(exc)) from exc
        finally:
            self._starting = False
        turn_id = str(answer["turn"])
        if self._mine is None and turn_id not in self._ended:
            self._mine = turn_id
        return self._turn_of(turn_id)

    async def cancel(self, turn_id: str | None = None) -> TurnEnded:
        """Cancel the server's turn (answered once it has stopped)."""
        body = {"turn": turn_id} if turn_id else {}
        try:
            answer = await asyncio.to_thread(self.remote.post, self._path("cancel"), body)
        except RemoteError as exc:
            raise SlotConflict(str(exc)) from exc
        return TurnEnded(_outcome(answer.get("outcome")))

    async def compact(self) -> Event:
        """Compact on the server (its summary comes on the stream, as any append)."""
        try:
            got = await asyncio.to_thread(self.remote.post, self._path("compact"), {})
        except RemoteError as exc:
            raise SlotConflict(str(exc)) from exc
        return event_of(got)

    async def continue_from(
        self,
        event_id: str | None,
        choice: OnRestore | None = None,
        *,
        ask: Callable[[RestoreRefused], Awaitable[OnRestore | None]] | None = None,
    ) -> Restored | None:
        """As :meth:`~infai.agent.AgentSession.continue_from`, on the server: the
        restore is planned there first (``POST …/checkout`` with ``dry_run``), a
        refusal asked about with ``ask`` (None: given up, raised), and the choice
        goes with the next prompt, before which the server restores the files
        (what it did comes as the turn's first events). Nothing is restored here,
        so None is returned."""
        self._choice = None
        if event_id is None:
            return None
        choice = choice or OnRestore()
        while not choice.keep_files:
            refused = await asyncio.to_thread(self._planned, event_id, choice)
            if refused is None:
                break
            answer = await ask(refused) if ask is not None else None
            if answer is None:
                raise refused
            choice = answer
        self._choice = choice
        return None

    def _planned(self, event_id: str, choice: OnRestore) -> RestoreRefused | None:
        """The server's plan for restoring ``event_id``'s files: its refusal, if any."""
        body = {"event": event_id, "dry_run": True, "force": choice.force, "keep": [*choice.keep]}
        status, answer = post_data(self.remote, self._path("checkout"), body)
        plan = dict(answer.get("plan") or {})
        others = [str(other) for other in answer.get("others") or ()]
        unanswered = [p for p in plan.get("conflicts") or () if p not in choice.keep]
        if status == 409 or (unanswered and not choice.force):
            said = answer.get("error") or f"{len(unanswered)} file(s) changed outside the agent"
            return RestoreRefused(str(said), plan, others)
        return None

    async def files_state(self) -> FilesState | None:
        return None  # the files are the server's: not looked at from here

    def detach(self) -> None:
        """Stop following the session, leaving its turn running on the server."""
        self.detached = True
        self._stop.set()
        for asking in self._asking.values():
            asking.cancel()
        for ending in self._endings.values():
            if not ending.done():
                ending.set_result(TurnEnded("cancelled", "detached"))
        self.turn = None

    def close(self) -> None:
        self.detach()
        self.hub.close("closed")
        self.others.close("closed")


__all__ = [
    "SERVERS_MODEL",
    "Asking",
    "RemoteHarness",
    "RemoteModel",
    "RemoteSession",
    "RemoteStore",
    "agent_event",
    "answer_body",
    "ask_of",
    "info_of",
    "model_in_use",
]

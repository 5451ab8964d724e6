"""Another node's turn, as this node's watchers see it: the mirror of one session.

Why: with several servers on one database, a client may watch a session on
node B while its turn runs on node A. A writes what its own watchers are sent
during the turn to the store's live table (:mod:`.nodes` forwards it); B reads
those rows in the order A made them and publishes them on its own channel, so
B's watchers get the same frames: ``turn_started``, the deltas, the settled
events, the questions and their answers, ``turn_ended``.

Settled events are not copied: a live row names the sequence number A
published, and B reads the events up to it from the store, so they keep their
place between the deltas. While a remote turn runs, what the store's change
feed says about the session waits for those rows (or for the turn's end,
after which everything stored is caught up), so a delta never arrives after
the event it is part of. A node that opens the session mid-turn (or whose
listener reconnected) reads the turn so far from the store first
(:meth:`Mirror.sync`): the deltas since its last settled event and the
questions still waiting.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from infai.tools import AllowAlways, DenyWith, Reply

from .channel import Frame, frame

if TYPE_CHECKING:
    from .served import Served

log = logging.getLogger("infai.server")

#: live row ids remembered per session, so one read twice is applied once
SEEN = 10_000


class LiveRow(Protocol):
    """One live frame as the store gives it back."""

    @property
    def id(self) -> int: ...
    @property
    def session_id(self) -> str: ...
    @property
    def turn(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def data(self) -> dict[str, Any]: ...


class Live(Protocol):
    """What a store shared by several nodes offers them (``PgStore.live``)."""

    @property
    def node(self) -> str: ...
    def start(self) -> None: ...
    def close(self) -> None: ...
    def publish(
        self, session: str, turn: str, frames: Sequence[tuple[str, dict[str, Any]]]
    ) -> None: ...
    def fetch(self, ids: Sequence[int]) -> Sequence[LiveRow]: ...
    def running(self, session: str) -> tuple[str, str, Sequence[LiveRow]] | None: ...
    def request_cancel(self, session: str, turn: str | None = None) -> str | None: ...
    def cancels_asked(self) -> list[tuple[str, str]]: ...
    def turn_ended(self, turn: str) -> tuple[bool, str | None]: ...
    def lost_turns(self) -> list[tuple[str, str]]: ...
    def end_lost(self, session: str) -> int: ...
    def ask(self, session: str, turn: str | None, question: dict[str, Any]) -> None: ...
    def answer(self, session: str, question: str, answer: dict[str, Any]) -> str | None: ...
    def answer_of(self, question: str) -> dict[str, Any] | None: ...
    def pending(self, session: str) -> list[dict[str, Any]]: ...
    def tidy(self) -> None: ...
    def listen(
        self, callback: Callable[[str | None, dict[str, Any]], None], stop: threading.Event
    ) -> None: ...


def reply_obj(reply: Reply, by: str = "api") -> dict[str, Any]:
    """An answer as the store records it (as ``approval_resolved`` says it)."""
    if isinstance(reply, AllowAlways):
        return {"answer": "allow-always", "patterns": list(reply.patterns), "by": by}
    if isinstance(reply, DenyWith):
        return {"answer": "deny", "reason": reply.reason, "by": by}
    return {"answer": "deny" if reply == "timeout" else reply, "by": by}


def reply_of(obj: dict[str, Any]) -> Reply:
    """The reply a recorded answer gives the policy (anything unknown denies)."""
    answer = obj.get("answer")
    patterns, reason = obj.get("patterns"), obj.get("reason")
    if answer == "allow-always" and isinstance(patterns, list) and patterns:
        return AllowAlways(tuple(str(p) for p in patterns))
    if answer == "deny" and isinstance(reason, str) and reason:
        return DenyWith(reason)
    if answer in ("allow", "allow-always"):
        return "allow" if answer == "allow" else "allow-always"
    return "deny"


@dataclass
class Remote:
    """A turn running on another node, as far as this node has heard."""

    turn: str
    node: str
    #: deltas since its last settled event: the message in flight
    deltas: list[Frame] = field(default_factory=list)
    #: set once this node's watchers have been sent its ``turn_ended``
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class Mirror:
    """Other nodes' live rows of one session, applied in order to its channel."""

    def __init__(self, served: Served, live: Live) -> None:
        self.served = served
        self.live = live
        #: the turn running on another node (None: none heard of)
        self.remote: Remote | None = None
        #: other nodes' questions waiting for an answer, by id
        self.questions: dict[str, dict[str, Any]] = {}
        #: the latest turns whose end this node's watchers were sent
        self.ended: deque[str] = deque(maxlen=100)
        self._seen: set[int] = set()
        self._order: deque[int] = deque()
        self._inbox: asyncio.Queue[LiveRow | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        #: set once the session's state so far has been read (:meth:`sync`)
        self.ready = asyncio.Event()

    def begin(self) -> None:
        """Read the turn so far, then apply rows as they come (on the event loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def offer(self, rows: Sequence[LiveRow]) -> None:
        """Rows heard for this session (applied in order, each once)."""
        for row in rows:
            self._inbox.put_nowait(row)

    def resync(self) -> None:
        """The listener reconnected: read the state so far again, in turn."""
        self._inbox.put_nowait(None)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        self.ready.set()

    async def _run(self) -> None:
        try:
            await self.sync()
        except Exception:
            log.exception("session %s: reading other nodes' turn failed", self.served.session_id)
        finally:
            self.ready.set()
        while True:
            row = await self._inbox.get()
            try:
                if row is None:
                    await self.sync()
                elif self._fresh(row.id):
                    await self.apply(row)
            except Exception:
                log.exception("session %s: applying %r failed", self.served.session_id, row)

    def _fresh(self, row_id: int) -> bool:
        if row_id in self._seen:
            return False
        self._seen.add(row_id)
        self._order.append(row_id)
        if len(self._order) > SEEN:
            self._seen.discard(self._order.popleft())
        return True

    async def sync(self) -> None:
        """Read the remote turn so far and the questions waiting, from the store."""
        sid = self.served.session_id
        state = await asyncio.to_thread(self.live.running, sid)
        pending = await asyncio.to_thread(self.live.pending, sid)
        local = self.served.questions
        self.questions = {q["id"]: q for q in pending if q.get("id") not in local}
        if state is None:
            if self.remote is not None:  # it ended while this node was not listening
                await self._end(self.remote.turn, None)
            return
        turn, node, rows = state
        if self.remote is None or self.remote.turn != turn:
            self.remote = Remote(turn, node)
            self.served.publish(frame("turn_started", {"turn": turn}))
        remote = self.remote
        remote.deltas.clear()
        for row in rows:
            self._fresh(row.id)
            if row.name == "delta":
                remote.deltas.append(frame("delta", row.data))
            elif row.name == "settled":
                remote.deltas.clear()
        await self.served.catch_up_to(None)

    async def apply(self, row: LiveRow) -> None:
        """One row, as the node that wrote it published it."""
        remote, name, data = self.remote, row.name, row.data
        if name == "turn_started":
            if self.served.turn is None and (remote is None or remote.turn != row.turn):
                self.remote = Remote(row.turn, row.node)
                self.served.publish(frame(name, data))
        elif name == "delta":
            if remote is not None and remote.turn == row.turn:
                made = frame(name, data)
                remote.deltas.append(made)
                self.served.publish(made)
        elif name == "settled":
            if remote is not None and remote.turn == row.turn:
                remote.deltas.clear()
            await self.served.catch_up_to(int(data["seq"]))
        elif name == "approval":
            if data.get("id") not in self.questions:
                self.questions[data["id"]] = data
                self.served.publish(frame(name, data))
        elif name == "approval_resolved":
            if self.questions.pop(data.get("id", ""), None) is not None:
                self.served.publish(frame(name, data))
        elif name == "turn_ended":
            await self._end(row.turn, frame(name, data))

    async def _end(self, turn: str, ended: Frame | None) -> None:
        """The remote turn ended: everything stored is caught up, then its end sent
        (``ended`` None: it ended unheard, while this node's listener was away)."""
        remote = self.remote
        mine = remote is not None and remote.turn == turn
        if mine:
            self.remote = None
        if turn in self.ended:  # told already (found ended unheard, then heard)
            return
        for qid in [q for q, d in self.questions.items() if d.get("turn") == turn]:
            del self.questions[qid]
        await self.served.catch_up_to(None)
        if ended is None and mine:
            ended = frame(
                "turn_ended", {"turn": turn, "outcome": "error", "error": "ended unheard"}
            )
        if ended is not None:
            self.served.publish(ended)
        if remote is not None and mine:
            remote.ended.set()
        self.ended.append(turn)

    def watch_frames(self) -> list[Frame]:
        """The remote turn so far and other nodes' questions, for a new watcher."""
        now: list[Frame] = []
        if self.remote is not None:
            now.append(frame("turn_started", {"turn": self.remote.turn}))
            now.extend(self.remote.deltas)
        now.extend(frame("approval", q) for q in self.questions.values())
        return now

    async def wait_ended(self, turn: str, timeout: float) -> None:
        """Wait (at most ``timeout``) until this node's watchers were sent ``turn``'s end."""
        deadline = asyncio.get_running_loop().time() + timeout
        while turn not in self.ended and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)

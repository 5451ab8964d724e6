"""One session open in the server: its agent, its turn slot, questions and watchers.

Each open session has one slot for work that writes: a prompt runs as a
background task (the request that started it has long been answered), a
compaction or a summarised branch switch runs while its request waits; anything
else that would write meanwhile gets "busy" (409). The slot is claimed before
any store work starts, so the store work (taking the lease, re-reading HEAD)
can run in a worker thread without another request writing in between.

Everything watchers see goes through one :class:`~.channel.Channel` per session,
as SSE frames encoded once for all of them: settled events, deltas, turn
boundaries, permission questions and their answers. Settled events are
published exactly once and in sequence order, which is the store's order: those
the loop hands over directly, and those appended out of its sight (the marker of
a cancelled turn, a compaction, a branch summary) read back from the writer. So
a watcher that replays the store up to :attr:`Served.published` and then follows
the channel misses nothing and sees nothing twice. The deltas since the turn's
last settled event are kept in memory, so a watcher that joins mid-message is
sent the whole message so far.

A permission question (the policy said "ask") waits for an answer through the
API, is published on the stream, and is denied when nobody answers in time.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from infai.agent import AgentSession, Saved, Streamed
from infai.llm import close_model
from infai.store import (
    Event,
    SessionLog,
    SessionStore,
    ToolCallRecord,
    ToolResultRecord,
)
from infai.tools import AllowAlways, Approver, Ask, Reply, Rule

from .channel import Channel, Feed, Frame, frame, settled_frame
from .errors import Conflict

log = logging.getLogger("infai.server")

T = TypeVar("T")


def new_id() -> str:
    return str(uuid.uuid4())


def _stamp(seconds: float) -> str:
    return (
        datetime.fromtimestamp(seconds, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


@dataclass
class Question:
    """A permission question waiting for an answer through the API."""

    id: str
    tool: str
    subject: str
    reason: str
    always: tuple[Rule, ...]
    turn: str | None
    call_event_id: str | None
    arguments: dict[str, Any] | None
    asked_at: str
    expires_at: str
    answer: asyncio.Future[Reply]

    def to_obj(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool": self.tool,
            "subject": self.subject,
            "reason": self.reason,
            "always": [rule.pattern for rule in self.always],
            "turn": self.turn,
            "call_event_id": self.call_event_id,
            "arguments": self.arguments,
            "asked_at": self.asked_at,
            "expires_at": self.expires_at,
        }


@dataclass
class Turn:
    """A prompt being answered."""

    id: str
    task: asyncio.Task[None] | None = None
    #: deltas since the turn's last settled event: the message in flight
    deltas: list[Frame] = field(default_factory=list)
    #: tool calls of the turn still waiting for their result, oldest first
    calls: deque[Event] = field(default_factory=deque)
    outcome: str | None = None


class Served:
    """One session open in the server: its agent, its turn slot, questions and watchers."""

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        *,
        open_agent: Callable[[Approver], AgentSession],
        approval_timeout: float,
        observe: Callable[[Event], None] | None = None,
    ) -> None:
        """Open the session's agent with ``open_agent`` (given this session's approver):
        blocking store work (the writer lock), so construct it in a worker thread."""
        self.store = store
        self.approval_timeout = approval_timeout
        self.questions: dict[str, Question] = {}
        self.channel = Channel()
        self.turn: Turn | None = None
        #: what occupies the slot for writes, if anything
        self.busy: str | None = None
        #: slot work other than a turn (compaction, branch switch), cancelled on close
        self.job: asyncio.Task[Any] | None = None
        #: when it last did or published anything (monotonic), for closing idle ones
        self.last_active = time.monotonic()
        self._observe = observe
        #: set once :meth:`close` began: nothing new starts
        self.closed = False
        #: held while another process's appends are read in (and the writer refreshed)
        self._hearing = asyncio.Lock()
        self.agent = open_agent(self.ask)
        self.session_id = self.agent.session_id
        #: the sequence number and id of the last settled event published
        self.published = self.writer.count - 1
        self.published_head: str | None = self.writer.head

    @property
    def writer(self) -> SessionLog:
        log: SessionLog = self.agent.writer
        return log

    @property
    def idle(self) -> bool:
        """Nothing in flight, nobody watching, nothing asked: closing loses nothing."""
        return (
            self.busy is None
            and self.turn is None
            and self.job is None
            and not self.questions
            and self.channel.watchers == 0
        )

    def publish(self, item: Frame) -> None:
        self.last_active = time.monotonic()
        if self.turn is not None and item.name == "delta":
            self.turn.deltas.append(item)
        self.channel.publish(item)

    # -- settled events ------------------------------------------------------

    def _settled(self, event: Event, *, remote: bool = False) -> None:
        """Publish a settled event, after any appended before it that were not.

        A ``remote`` event (another process appended it) leaves the turn in flight
        here as it is: its message so far and its waiting calls are this node's.
        """
        if event.seq <= self.published:
            return
        if event.seq > self.published + 1 and not remote:
            self._fill_gap(event.seq)
        turn = self.turn
        if turn is not None and not remote:
            turn.deltas.clear()
            if event.kind == "tool_call":
                turn.calls.append(event)
            elif isinstance(event.record, ToolResultRecord):
                call_id = event.record.call_id
                turn.calls = deque(
                    c
                    for c in turn.calls
                    if not (isinstance(c.record, ToolCallRecord) and c.record.call_id == call_id)
                )
        self.published = event.seq
        self.published_head = event.id
        self.channel.publish(settled_frame(event))
        if self._observe is not None:
            self._observe(event)

    def _unpublished(self, until: int | None = None) -> list[Event]:
        """The writer's events after the last one published (up to ``until``)."""
        end = self.writer.count if until is None else until
        return [
            self.writer.event(self.writer.entry_at(n).id) for n in range(self.published + 1, end)
        ]

    def _fill_gap(self, until: int) -> None:
        """Mid-turn, publish what the turn appended without handing it over (the turn is
        paused at its yield, so this reads the writer in place)."""
        for event in self._unpublished(until):
            self._settled(event)

    async def catch_up(self) -> None:
        """Publish what was appended out of the loop's sight (an interruption marker, a
        compaction, a branch summary), read back from the writer in a worker thread:
        called when the slot's work has ended, so nothing else uses the writer."""
        for event in await asyncio.to_thread(self._unpublished):
            self._settled(event)

    async def catch_up_remote(self, seq: int) -> None:
        """Publish what another process appended (up to at least ``seq``).

        An idle session's writer is refreshed, so its next turn starts from the
        latest HEAD. During a turn it is left as it was: that turn was decided on
        an older HEAD, and its next append must fail with a conflict rather than
        land on events it never saw; the new events are read with a fresh reader.
        Either way the store is read in a worker thread; claiming the slot waits
        until that is done, so a refresh never runs beside a turn.
        """
        async with self._hearing:
            if self.closed or 0 <= seq <= self.published:
                return
            if self.busy is None:
                for event in await asyncio.to_thread(self._refreshed):
                    self._settled(event)
                return
            for event in await asyncio.to_thread(self._read_remote):
                self._settled(event, remote=True)

    def _refreshed(self) -> list[Event]:
        refresh = getattr(self.writer, "refresh", None)
        if refresh is not None:
            refresh()
        return self._unpublished()

    def _read_remote(self) -> list[Event]:
        with self.store.open_reader(self.session_id) as reader:
            numbers = range(self.published + 1, reader.count)
            return [reader.event(reader.entry_at(n).id) for n in numbers]

    def watch(self) -> tuple[Feed, list[Frame], int]:
        """Subscribe: the feed, the turn in flight so far, and where replay must stop.

        Taken at one instant (no await), so replaying the store up to the returned
        sequence number and then reading the feed is gapless and has no duplicate.
        """
        feed = self.channel.subscribe()
        now: list[Frame] = []
        if self.turn is not None:
            now.append(frame("turn_started", {"turn": self.turn.id}))
            now.extend(self.turn.deltas)
        now.extend(frame("approval", q.to_obj()) for q in self.questions.values())
        return feed, now, self.published + 1

    # -- the slot ------------------------------------------------------------

    async def _claim(self, what: str) -> None:
        """Take the slot for ``what``, or :class:`Conflict` if something holds it."""
        async with self._hearing:  # not while another process's appends are read in
            if self.busy is not None:
                raise Conflict(f"session {self.session_id} is busy: {self.busy}")
            self.busy = what
            self.last_active = time.monotonic()

    async def start(self, text: str, from_event: str | None = None) -> Turn:
        """Start a turn in the background; raises :class:`Conflict` if one is in flight.

        The slot is claimed first; then the store work (selecting the parent, the
        lease, which re-reads HEAD) runs in a worker thread.
        """
        await self._claim("a turn is in flight")
        try:
            await asyncio.to_thread(self._prepare, from_event)
        except BaseException:
            self.busy = None
            raise
        if self.closed:  # closed while the lease was being taken
            self.agent.release()
            raise Conflict(f"session {self.session_id} was closed before the turn started")
        try:
            await self.catch_up()  # what the lease's refresh found that others appended
        except BaseException:
            self.agent.release()
            self.busy = None
            raise
        turn = Turn(new_id())
        self.busy = f"turn {turn.id} is in flight"
        self.turn = turn
        self.channel.publish(frame("turn_started", {"turn": turn.id}))
        turn.task = asyncio.get_running_loop().create_task(self._run(turn, text))
        return turn

    def _prepare(self, from_event: str | None) -> None:
        """Select the turn's parent and take the lease (no turn elsewhere meanwhile)."""
        if from_event is not None:
            self.agent.select(from_event)
        self.agent.acquire()

    async def _run(self, turn: Turn, text: str) -> None:
        outcome: str = "error"
        error: str | None = "the turn ended without an outcome"
        try:
            async for item in self.agent.prompt(text):
                if isinstance(item, Saved):
                    self._settled(item.event)
                elif isinstance(item, Streamed):
                    inner = item.event
                    data = {k: getattr(inner, k) for k in inner.__slots__}
                    self.publish(frame("delta", {"turn": turn.id, **data}))
                else:
                    outcome, error = item.outcome, item.error
        except asyncio.CancelledError:
            outcome, error = "cancelled", None
            raise
        except Exception as exc:  # a store failure: the turn ends, the server stays up
            log.exception("turn %s of session %s failed", turn.id, self.session_id)
            outcome, error = "error", f"{type(exc).__name__}: {exc}"
        finally:
            try:
                await self.catch_up()
            finally:
                self.agent.release()
                turn.outcome = outcome
                self.turn = None
                self.busy = None
                data = {"turn": turn.id, "outcome": outcome, "error": error}
                self.channel.publish(frame("turn_ended", data))

    async def cancel(self, turn_id: str | None = None) -> Turn:
        """Cancel the turn in flight and wait until it has stopped."""
        turn = self.turn
        if turn is None or turn.task is None or (turn_id is not None and turn_id != turn.id):
            which = f"turn {turn_id}" if turn_id else "no turn"
            raise Conflict(f"{which} is not in flight in session {self.session_id}")
        turn.task.cancel()
        await asyncio.wait([turn.task])
        return turn

    async def _job(self, work: Coroutine[Any, Any, T]) -> T:
        """Run slot work (a compaction, a summarised switch) that closing can cancel."""
        task = asyncio.get_running_loop().create_task(work)
        self.job = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and not (current is not None and current.cancelling()):
                why = f"session {self.session_id} was closed before this finished"
                raise Conflict(why) from None
            raise
        finally:
            self.job = None

    async def compact(self) -> Event:
        await self._claim("compacting")
        try:
            return await self._job(self.agent.compact())
        finally:
            try:
                await self.catch_up()
            finally:
                self.busy = None

    async def select(self, event_id: str | None, summarize: bool) -> Event | None:
        """Choose the next prompt's parent; with ``summarize``, switch branches now."""
        summary = None
        if summarize and event_id is not None:
            await self._claim("switching branches")
            try:
                summary = await self._job(self.agent.switch(event_id, summarize=True))
            finally:
                try:
                    await self.catch_up()
                finally:
                    self.busy = None
        else:
            async with self._hearing:  # no claim, no refresh meanwhile
                if self.busy is not None:
                    raise Conflict(f"session {self.session_id} is busy: {self.busy}")
                await asyncio.to_thread(self.agent.select, event_id)
        self.channel.publish(frame("selected", self.head()))
        return summary

    def head(self) -> dict[str, Any]:
        return {"head": self.published_head, "pending_parent": self.writer.pending_parent}

    # -- permission questions ------------------------------------------------

    async def ask(self, ask: Ask) -> Reply:
        """The policy's approver: publish the question, wait for the API's answer."""
        turn = self.turn
        call = turn.calls[0] if turn is not None and turn.calls else None
        record = call.record if call is not None else None
        if not (isinstance(record, ToolCallRecord) and record.name == ask.tool):
            call, record = None, None
        now = time.time()
        question = Question(
            id=new_id(),
            tool=ask.tool,
            subject=ask.subject,
            reason=ask.reason,
            always=ask.always,
            turn=turn.id if turn is not None else None,
            call_event_id=call.id if call is not None else None,
            arguments=dict(record.arguments) if record is not None else None,
            asked_at=_stamp(now),
            expires_at=_stamp(now + self.approval_timeout),
            answer=asyncio.get_running_loop().create_future(),
        )
        self.questions[question.id] = question
        self.publish(frame("approval", question.to_obj()))
        answer: Reply = "deny"
        by = "cancelled"
        try:
            answer = await asyncio.wait_for(question.answer, self.approval_timeout)
            by = "api"
        except TimeoutError:
            answer, by = "timeout", "timeout"
        finally:
            del self.questions[question.id]
            data: dict[str, Any] = {"id": question.id, "answer": None, "by": by}
            if isinstance(answer, AllowAlways):
                data.update(answer="allow-always", patterns=list(answer.patterns))
            elif by != "cancelled":
                data["answer"] = "deny" if answer == "timeout" else answer
            self.publish(frame("approval_resolved", data))
        return answer

    def answer(self, question_id: str, answer: Reply) -> bool:
        """Answer a pending question; False if there is none by that id (or answered)."""
        question = self.questions.get(question_id.lower())
        if question is None or question.answer.done():
            return False
        question.answer.set_result(answer)
        return True

    # -- closing -------------------------------------------------------------

    async def close(self, reason: str) -> None:
        """Cancel the turn in flight, end every watcher's stream, release the writer."""
        self.closed = True
        turn = self.turn
        for task in (turn.task if turn is not None else None, self.job):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.wait([task])
        self.channel.close(frame("closed", {"reason": reason}))
        try:
            async with self._hearing:  # no refresh reads the writer meanwhile
                await asyncio.to_thread(self.agent.close)  # the writer's last sync, its lock
        finally:
            await close_model(self.agent.model)

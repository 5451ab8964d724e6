"""One session open in the server: its agent, its turn, questions and watchers.

The session's one slot for work that writes is its agent's
(:meth:`~infai.agent.AgentSession.start`, :meth:`~infai.agent.AgentSession.cancel`,
``busy``): a prompt runs as a background task (the request that started it has
long been answered), a compaction or a summarised branch switch runs while its
request waits; anything else that would write meanwhile gets
:class:`~infai.agent.Busy` (409).

Everything watchers see goes through one hub of SSE frames per session
(:data:`~.channel.Channel`), encoded once for all of them: settled events,
deltas, turn boundaries, permission questions and their answers. The agent
publishes every event it appends on its own hub the moment it is durable (the
interruption marker, a compaction, a branch summary included); one task per
served session (the pump, :meth:`Served.begin`) turns them into frames, in
order. Settled events are published exactly once and in sequence order, which
is the store's order: the agent's as the pump hands them over, and those
another process appended (a shared database) read from the store when its
``watch`` tells of them, or when the agent's next event shows a gap (its
lease's refresh saw them first). So a watcher that replays the store up to
:attr:`Served.published` and then follows the channel misses nothing and sees
nothing twice. (On the file store, where nothing is heard from other
processes, what a terminal appended between two turns is that gap: the agent's
writer is released between its turns, :attr:`~infai.agent.AgentSession.park_between_turns`.)
The deltas since the turn's last settled event are kept in
memory, so a watcher that joins mid-message is sent the whole message so far.
A turn's ``turn_ended`` goes out once the agent's slot is free again, so a
client that saw it can start the next turn at once.

A permission question (the policy said "ask") waits for an answer through the
API, is published on the stream, and is denied when nobody answers in time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import Any, TypeVar

from infai.agent import (
    AgentEvent,
    AgentSession,
    Hub,
    Lagged,
    OnRestore,
    Saved,
    Streamed,
    Turn,
)
from infai.llm import Notice
from infai.store import Event, SessionStore, ToolCallRecord
from infai.tools import AllowAlways, Approver, Ask, DenyWith, Reply

from .channel import (
    FEED_LIMIT,
    Channel,
    Feed,
    Frame,
    delta_frame,
    ended_frame,
    frame,
    settled_frame,
)
from .errors import Conflict
from .remote import Live, Mirror, reply_obj, reply_of
from .turnstate import Question, Running, follow, new_id, stamp

log = logging.getLogger("infai.server")

T = TypeVar("T")

#: agent events the pump may fall behind by (it only waits for a turn's end or a
#: read of another process's appends, so it never should)
PUMP_LIMIT = 1_000_000
#: how long a new turn waits for the last frames of the one before (handed over at once)
ENDING_SECONDS = 5.0
#: the frames other nodes' watchers are sent too, while a turn of this node runs
FORWARDED = frozenset(
    {"turn_started", "delta", "settled", "approval", "approval_resolved", "turn_ended"}
)
#: a turn's frame for the other nodes: (session, turn, frame name, data)
Forward = Callable[[str, str, str, dict[str, Any]], None]


class Served:
    """One session open in the server: its agent, its turn, questions and watchers."""

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
        blocking store work (the writer lock), so construct it in a worker thread,
        then call :meth:`begin` on the event loop."""
        self.store = store
        self.approval_timeout = approval_timeout
        self.questions: dict[str, Question] = {}
        self.channel: Channel = Hub(FEED_LIMIT)
        #: the turn watchers are following (from ``turn_started`` to ``turn_ended``)
        self.turn: Running | None = None
        #: the last turn's end here (``turn_ended``'s data), for ``ready``: a client
        #: that fell behind and watches again learns how the turn it lost ended
        self.last_end: dict[str, Any] | None = None
        #: slot work other than a turn (compaction, branch switch), cancelled on close
        self.job: asyncio.Task[Any] | None = None
        #: when it last did or published anything (monotonic), for closing idle ones
        self.last_active = time.monotonic()
        self._observe = observe
        #: where the frames of this node's turns go for other nodes (a shared store)
        self.forward: Forward | None = None
        #: the store's shared state of the work in flight (None: one node only)
        self.live: Live | None = None
        #: other nodes' turn in this session, as its watchers here see it
        self.mirror: Mirror | None = None
        #: set once :meth:`close` began: nothing new starts
        self.closed = False
        #: held while another process's appends are read in (and the view refreshed),
        #: and while the slot is claimed: a refresh never runs beside the slot's work
        self._hearing = asyncio.Lock()
        self.agent = open_agent(self.ask)
        self.session_id = self.agent.session_id
        view = self.agent.view
        #: the sequence number and id of the last settled event published
        self.published = view.count - 1
        self.published_head: str | None = view.head
        # The writer (the file store's lock) is held only while a turn, a compaction
        # or a switch runs: between them a terminal's `infai session append` or
        # `infai run --session` does not wait behind this server, and the next turn
        # opens a writer that starts from what they appended.
        self.agent.park_between_turns = True
        try:
            self.agent.park()
        except BaseException:
            self.agent.close()
            raise
        self._events = self.agent.hub.subscribe(PUMP_LIMIT)
        self._pump: asyncio.Task[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def begin(self, live: Live | None = None, forward: Forward | None = None) -> None:
        """Start handing the agent's events to the watchers (on the event loop);
        with ``live``, also other nodes' turns, and this node's to them (``forward``)."""
        if live is not None and self.mirror is None:
            self.live, self.forward = live, forward
            self.mirror = Mirror(self, live)
            self.mirror.begin()
        if self._pump is None:
            self._pump = asyncio.get_running_loop().create_task(self._forward())

    @property
    def busy(self) -> str | None:
        """What occupies the agent's slot for work that writes (None: free)."""
        return self.agent.busy

    @property
    def idle(self) -> bool:
        """Nothing in flight, nobody watching, nothing asked: closing loses nothing."""
        return (
            self.agent.busy is None
            and self.turn is None
            and self.job is None
            and not self.questions
            and self.channel.subscribers == 0
            and (self.mirror is None or (self.mirror.remote is None and not self.mirror.questions))
        )

    def publish(self, item: Frame, turn: str | None = None) -> None:
        """Send ``item`` to the watchers; a frame of this node's turn (``turn``, else
        the one in flight) goes to the other nodes' too."""
        self.last_active = time.monotonic()
        self.channel.publish(item)
        if self.forward is not None and item.name in FORWARDED:
            turn = turn or (self.turn.id if self.turn is not None else None)
            if turn is not None:
                data = {"seq": item.seq} if item.name == "settled" else item.data
                self.forward(self.session_id, turn, item.name, data)

    @property
    def turn_id(self) -> str | None:
        """The turn in flight in this session, here or on another node."""
        if self.turn is not None:
            return self.turn.id
        remote = self.mirror.remote if self.mirror is not None else None
        return remote.turn if remote is not None else None

    # -- the agent's events --------------------------------------------------

    async def _forward(self) -> None:
        """The pump: the agent's events, in order, as frames for the watchers."""
        try:
            async for batch in self._events.batches():
                for item in batch:
                    try:
                        await self._forward_one(item)
                    except Exception:  # one bad read or observer must not stop the rest
                        log.exception("session %s: forwarding %r failed", self.session_id, item)
        except Lagged:  # the pump itself stalled: watchers replay from the store
            log.error("session %s: the server fell behind its own agent", self.session_id)
            self.channel.close("fell behind", last=frame("lagged", {"reason": "server behind"}))
        finally:
            self._wake_waiters(everyone=True)

    async def _forward_one(self, item: AgentEvent) -> None:
        running = self.turn
        if isinstance(item, Saved):
            event = item.event
            if running is not None:
                follow(running, event)
            if event.seq > self.published + 1:  # another process appended in between
                await self._hear_gap(event.seq)
            self._settled(event)
        elif isinstance(item, Streamed):
            if running is not None:
                delta = delta_frame(item, running.id)
                running.deltas.append(delta)
                self.publish(delta)
        elif running is not None:  # TurnEnded: sent once the slot is free again, so a
            try:  # client that saw it can start the next turn
                await running.turn.wait()
            finally:
                self.turn = None
                ended = ended_frame(item, running.id)
                self.last_end = ended.data
                self.publish(ended, running.id)
                running.ended.set()

    def _settled(self, event: Event) -> None:
        """Publish a settled event, unless it already was (events go out in seq order)."""
        if event.seq <= self.published:
            return
        self.published = event.seq
        self.published_head = event.id
        self.publish(settled_frame(event))
        self._wake_waiters()
        if self._observe is not None:
            self._observe(event)

    def _wake_waiters(self, *, everyone: bool = False) -> None:
        waiting, self._waiters = self._waiters, []
        for seq, future in waiting:
            if everyone or seq <= self.published:
                if not future.done():
                    future.set_result(None)
            else:
                self._waiters.append((seq, future))

    async def _published_up_to(self, seq: int) -> None:
        """Wait until the pump has published event ``seq`` (or stopped)."""
        if seq <= self.published or self._pump is None or self._pump.done():
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((seq, future))
        await future

    # -- other processes' appends --------------------------------------------

    async def _hear_gap(self, until: int) -> None:
        """Publish what another process appended before the agent's next event (its
        lease's refresh saw them before the store's ``watch`` told us)."""
        for event in await asyncio.to_thread(self._read_remote, until):
            self._settled(event)

    async def catch_up_remote(self, seq: int) -> None:
        """Publish what another process appended (up to at least ``seq``).

        An idle session's view is refreshed, so what it shows (and selecting an
        event) is the latest. During the slot's work it is left as it was: a
        turn decided on an older HEAD must fail its next append with a conflict
        rather than land on events it never saw; the new events are read with a
        fresh reader. Either way the store is read in a worker thread; claiming
        the slot waits until that is done, so a refresh never runs beside a turn.
        """
        if self.mirror is not None and self.mirror.remote is not None:
            return  # another node's turn: its live rows place these (see .remote)
        async with self._hearing:
            if self.closed or 0 <= seq <= self.published:
                return
            read = self._refreshed if self.agent.busy is None else self._read_remote
            for event in await asyncio.to_thread(read):
                self._settled(event)

    async def catch_up_to(self, seq: int | None) -> None:
        """Publish what is stored up to event ``seq`` (None: everything), read with a
        fresh reader: another node's turn said it settled (see :mod:`.remote`)."""
        async with self._hearing:
            if self.closed or (seq is not None and seq <= self.published):
                return
            until = None if seq is None else seq + 1
            for event in await asyncio.to_thread(self._read_remote, until):
                self._settled(event)

    def _refreshed(self) -> list[Event]:
        view = self.agent.view
        view.refresh()
        return [view.event(view.entry_at(n).id) for n in range(self.published + 1, view.count)]

    def _read_remote(self, until: int | None = None) -> list[Event]:
        with self.store.open_reader(self.session_id) as reader:
            end = reader.count if until is None else min(until, reader.count)
            return [reader.event(reader.entry_at(n).id) for n in range(self.published + 1, end)]

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
        now.extend(frame("approval", q.to_obj()) for q in self.questions.values() if q.shown)
        if self.mirror is not None:
            now.extend(self.mirror.watch_frames())
        return feed, now, self.published + 1

    # -- the slot ------------------------------------------------------------

    async def start(
        self, text: str, from_event: str | None = None, said: tuple[str, ...] = ()
    ) -> Running:
        """Start a turn in the background (:meth:`AgentSession.start`); raises
        :class:`~infai.agent.Busy` if the slot is taken. ``said``: notices of the
        work done for it before it started (the restore of the picked event's
        files), sent as its first deltas, where its watchers see them."""
        previous = self.turn
        if previous is not None and previous.task is not None and previous.task.done():
            with suppress(TimeoutError):  # over: its last frames are on their way
                await asyncio.wait_for(previous.ended.wait(), ENDING_SECONDS)
        async with self._hearing:  # not while another process's appends are read in
            if self.closed:
                raise Conflict(f"session {self.session_id} was closed before the turn started")
            if from_event is not None:  # Busy if a turn is in flight; the store checks the id
                await asyncio.to_thread(self.agent.select, from_event)
            turn = await self.agent.start(text)
            running = Running(turn)
            self.turn = running
            self.publish(frame("turn_started", {"turn": turn.id}))
            for text_said in said:
                delta = delta_frame(Streamed(Notice(text_said)), turn.id)
                running.deltas.append(delta)
                self.publish(delta)
        return running

    async def cancel(self, turn_id: str | None = None) -> Turn:
        """Cancel the turn in flight and wait until it has stopped
        (:class:`~infai.agent.NotInFlight` if there is no such turn)."""
        return await self.agent.cancel(turn_id)

    async def _job(self, work: Coroutine[Any, Any, T]) -> T:
        """Run slot work (a compaction, a summarised switch) that closing can cancel."""
        async with self._hearing:  # the work claims the slot in its first step
            if self.closed:
                work.close()
                raise Conflict(f"session {self.session_id} is closed")
            task = asyncio.get_running_loop().create_task(work)
            self.job = task
            self.last_active = time.monotonic()
            await asyncio.sleep(0)
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
        summary = await self._job(self.agent.compact())
        await self._published_up_to(summary.seq)
        return summary

    async def select(
        self, event_id: str | None, summarize: bool, choice: OnRestore | None = None
    ) -> Event | None:
        """Choose the next prompt's parent; with ``summarize``, switch branches now
        (restoring the event's files as ``choice`` says: a refusal raises
        :class:`~infai.agent.RestoreRefused`, nothing changed)."""
        summary = None
        if summarize and event_id is not None:
            work = self.agent.switch(event_id, summarize=True, choice=choice)
            summary = await self._job(work)
            if summary is not None:  # and the restore after it, if one was recorded
                head = await asyncio.to_thread(self._head_seq)
                await self._published_up_to(max(summary.seq, head))
        else:
            async with self._hearing:  # no refresh meanwhile
                await asyncio.to_thread(self.agent.select, event_id)
        self.publish(frame("selected", self.head()))
        return summary

    def _head_seq(self) -> int:
        view = self.agent.view
        return -1 if view.head is None else view.seq_of(view.head)

    def head(self) -> dict[str, Any]:
        return {"head": self.published_head, "pending_parent": self.agent.pending_parent}

    # -- permission questions ------------------------------------------------

    async def ask(self, ask: Ask) -> Reply:
        """The policy's approver: publish the question, wait for the API's answer.

        The agent published the call this is about before asking; one step of the
        loop lets the pump hand it over (it runs first, woken when it was
        published), so the question follows its call and names it.
        """
        await asyncio.sleep(0)
        turn = self.turn
        call = turn.calls[0] if turn is not None and turn.calls else None
        record = call.record if call is not None else None
        if ask.caller or not (isinstance(record, ToolCallRecord) and record.name == ask.tool):
            call, record = None, None  # a subagent's call is not the turn's own
        arguments = dict(record.arguments) if record is not None else dict(ask.arguments) or None
        now = time.time()
        question = Question(
            id=new_id(),
            tool=ask.tool,
            subject=ask.subject,
            reason=ask.reason,
            always=ask.always,
            turn=turn.id if turn is not None else None,
            call_event_id=call.id if call is not None else None,
            arguments=arguments,
            asked_at=stamp(now),
            expires_at=stamp(now + self.approval_timeout),
            answer=asyncio.get_running_loop().create_future(),
            note=ask.note,
            caller=ask.caller,
        )
        self.questions[question.id] = question  # an answer heard from now on is taken
        if self.live is not None:  # durable before any client can see it
            try:
                await asyncio.to_thread(
                    self.live.ask, self.session_id, question.turn, question.to_obj()
                )
            except BaseException:
                del self.questions[question.id]
                raise
        question.shown = True
        self.publish(frame("approval", question.to_obj()))
        answer: Reply = "deny"
        by = "cancelled"
        try:
            answer = await asyncio.wait_for(question.answer, self.approval_timeout)
            by = "api"
        except TimeoutError:
            answer, by = "timeout", "timeout"
            if self.live is not None:  # unless an answer was recorded first, anywhere
                given = await self._record(question.id, "timeout", by)
                if given is not None:
                    answer, by = given, "api"
        finally:
            if by == "cancelled" and self.live is not None:
                self._spawn_record(question.id)
            del self.questions[question.id]
            data: dict[str, Any] = {"id": question.id, "answer": None, "by": by}
            if isinstance(answer, AllowAlways):
                data.update(answer="allow-always", patterns=list(answer.patterns))
            elif isinstance(answer, DenyWith):
                data.update(answer="deny", reason=answer.reason)
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

    async def answer_any(self, question_id: str, answer: Reply) -> bool:
        """Answer a question asked here or on another node: the first answer the
        store records wins, once (one node only: :meth:`answer`)."""
        if self.live is None:
            return self.answer(question_id, answer)
        question = self.questions.get(question_id)
        if question is not None and question.answer.done():
            return False
        won = await asyncio.to_thread(
            self.live.answer, self.session_id, question_id, reply_obj(answer)
        )
        if won is None:
            return False
        self.answer(question_id, answer)  # asked here: at once (another node hears it)
        return True

    async def heard_answer(self, question_id: str) -> None:
        """Another node recorded the answer of a question asked here: go on with it."""
        question = self.questions.get(question_id)
        if question is None or question.answer.done() or self.live is None:
            return
        given = await asyncio.to_thread(self.live.answer_of, question_id)
        if given is not None and not question.answer.done():
            question.answer.set_result(reply_of(given))

    async def _record(self, question_id: str, answer: Reply, by: str) -> Reply | None:
        """Record this node's own end of a question; the answer recorded first instead,
        if there was one."""
        assert self.live is not None
        won = await asyncio.to_thread(
            self.live.answer, self.session_id, question_id, reply_obj(answer, by)
        )
        if won is not None:
            return None
        given = await asyncio.to_thread(self.live.answer_of, question_id)
        return reply_of(given) if given is not None else None

    def _spawn_record(self, question_id: str) -> None:
        """Record a question dropped with its turn (in a worker thread, not waited for)."""
        live, sid = self.live, self.session_id
        assert live is not None
        obj = {"answer": None, "by": "cancelled"}
        loop = asyncio.get_running_loop()
        loop.run_in_executor(None, _quietly, lambda: live.answer(sid, question_id, obj))

    # -- closing -------------------------------------------------------------

    async def close(self, reason: str) -> None:
        """Cancel what is in flight (the agent records the interruption), hand its last
        events to the watchers, end their streams, and close the agent (its writer, its
        lock, the model it owns)."""
        self.closed = True
        job = self.job
        if job is not None and not job.done():
            job.cancel()
            await asyncio.wait([job])
        try:
            async with self._hearing:  # no refresh reads the view meanwhile
                await self.agent.aclose()
        finally:
            if self._pump is not None:
                if not self.agent.hub.closed:  # aclose failed before closing it
                    self._pump.cancel()
                await asyncio.wait([self._pump])  # the agent's hub is closed: it ends
            self._wake_waiters(everyone=True)
            if self.mirror is not None:
                await self.mirror.close()
            self.channel.close(reason, last=frame("closed", {"reason": reason}))


def _quietly(work: Callable[[], Any]) -> None:
    try:
        work()
    except Exception:  # best effort: the turn is gone either way
        log.warning("recording a dropped question failed", exc_info=True)

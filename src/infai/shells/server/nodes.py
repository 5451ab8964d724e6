"""This server as one node of several on a shared store: what it tells and hears.

Why: any node serves any client, with no session affinity (see
``docs/postgresql.md``). A node:

- *tells* the others what its own turns show: every frame its watchers are
  sent during a turn goes, in order, to the store's live table
  (:class:`Forwarder`: one thread, so one connection writes them in order);
- *hears* the store's three channels on one listening connection: appends
  (fanned out as settled events), other nodes' live rows (applied to the
  session's :class:`~.remote.Mirror`), and requests for its own turns (a
  cancel, an answer to one of its questions);
- *reaps* turns whose node was lost (:meth:`Node.reap`, polled every
  :data:`REAP_SECONDS`): holding the session's lease, it records the turn as
  interrupted in the session and ends it, so every node's watchers see the end.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from infai.agent import NotInFlight, record_unfinished
from infai.store import SessionBusy, SessionStore, StoreError

from .remote import Live

if TYPE_CHECKING:
    from .served import Served

log = logging.getLogger("infai.server")

#: seconds between looks for turns whose node was lost
REAP_SECONDS = 1.0
#: rounds between tidying the live rows of ended turns (a minute)
TIDY_ROUNDS = 60
#: rounds between looks at remote turns whose end may not have been heard
STALE_ROUNDS = 5
#: seconds a prompt's answer waits for its turn to be told to the other nodes
FLUSH_WAIT = 5.0
#: frames one forwarding transaction takes at most
FORWARD_BATCH = 200

Item = tuple[str, str, str, dict[str, Any]]
#: what the forwarding thread is given: a frame, a call once all before it are
#: written (:meth:`Forwarder.flush`), or None to stop
Queued = Item | Callable[[], None] | None


class Forwarder:
    """This node's turns' frames, written to the live table in order by one thread."""

    def __init__(self, live: Live) -> None:
        self.live = live
        self._queue: queue.SimpleQueue[Queued] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="infai-forward", daemon=True)
        self._thread.start()

    def put(self, session: str, turn: str, name: str, data: dict[str, Any]) -> None:
        """Queue one frame (never waits)."""
        self._queue.put((session, turn, name, data))

    async def flush(self) -> None:
        """Wait until every frame queued so far is written (or failed to be)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not done.done():
                done.set_result(None)

        def written() -> None:
            loop.call_soon_threadsafe(settle)

        self._queue.put(written)
        with suppress(TimeoutError):  # a store that hangs: the turn goes on regardless
            await asyncio.wait_for(done, FLUSH_WAIT)

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then stop."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        items: list[Item] = []
        while True:
            got = self._queue.get() if not items else self._next()
            if isinstance(got, tuple):
                items.append(got)
                if len(items) < FORWARD_BATCH:
                    continue
            self._write(items)
            items = []
            if got is None:
                return
            if callable(got):
                got()

    def _next(self) -> Queued | bool:
        """The next item if one is queued; else False (write what is held now)."""
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return False

    def _write(self, items: list[Item]) -> None:
        start = 0
        for end in range(1, len(items) + 1):  # a run of one session's turn per write
            if end == len(items) or items[end][:2] != items[start][:2]:
                session, turn = items[start][:2]
                frames = [(name, data) for _, _, name, data in items[start:end]]
                try:
                    self.live.publish(session, turn, frames)
                except Exception:  # other nodes miss these; this node goes on
                    log.exception("telling other nodes of turn %s failed", turn)
                start = end


class Node:
    """The listening, forwarding and reaping of one server on a shared store."""

    def __init__(
        self,
        store: SessionStore,
        live: Live,
        open_sessions: dict[str, Served],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        heard: Callable[[str | None, int], None],
    ) -> None:
        self.store = store
        self.live = live
        self.open = open_sessions
        self._spawn = spawn
        self._heard_append = heard
        self.forwarder: Forwarder | None = None
        self._stop = threading.Event()
        self._listener: threading.Thread | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._fetching: asyncio.Queue[tuple[str, list[int]]] = asyncio.Queue()
        self._fetcher: asyncio.Task[None] | None = None
        #: remote turns found ended in the store but not yet heard ending
        self._stale: set[str] = set()

    async def start(self) -> None:
        """Be a node: its lock, its listener, its forwarder and its reaper."""
        try:
            await asyncio.to_thread(self.live.start)
        except StoreError:  # the database is away: the lock is taken with the first write
            log.warning("the store is unreachable; this node joins when it is back")
        self.forwarder = Forwarder(self.live)
        loop = asyncio.get_running_loop()

        def heard(channel: str | None, payload: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(self._heard, channel, payload)

        self._listener = threading.Thread(
            target=self.live.listen, args=(heard, self._stop), name="infai-listen", daemon=True
        )
        self._listener.start()
        self._fetcher = loop.create_task(self._fetch())
        self._reaper = loop.create_task(self._reap_loop())

    def forward(self, session: str, turn: str, name: str, data: dict[str, Any]) -> None:
        if self.forwarder is not None:
            self.forwarder.put(session, turn, name, data)

    async def flush(self) -> None:
        """Wait until the frames forwarded so far are written: a turn acknowledged
        is then known to every node (a cancel anywhere finds it)."""
        if self.forwarder is not None:
            await self.forwarder.flush()

    async def stop_hearing(self) -> None:
        """Stop listening and reaping (the sessions are closed next)."""
        self._stop.set()
        for task in (self._reaper, self._fetcher):
            if task is not None:
                task.cancel()
                await asyncio.wait([task])
        if self._listener is not None:
            await asyncio.to_thread(self._listener.join, 5)

    async def close(self) -> None:
        """Write what is left to forward (the ends of the turns closing cancelled),
        then stop being a node."""
        if self.forwarder is not None:
            await asyncio.to_thread(self.forwarder.close)
        await asyncio.to_thread(self.live.close)

    # -- hearing -----------------------------------------------------------------

    def _heard(self, channel: str | None, payload: dict[str, Any]) -> None:
        if channel is None:  # reconnected: anything may have been missed
            self._heard_append(None, -1)
            for served in self.open.values():
                if served.mirror is not None:
                    served.mirror.resync()
            self._spawn(self._missed_requests())
            return
        session = str(payload.get("s") or payload.get("session") or "")
        if channel == "infai_events":
            with suppress(KeyError, TypeError, ValueError):
                self._heard_append(session, int(payload["seq"]))
        elif channel == "infai_live":
            ids = payload.get("ids")
            if session in self.open and isinstance(ids, list):
                self._fetching.put_nowait((session, [int(i) for i in ids]))
        elif payload.get("node") == self.live.node:
            self._request(session, payload)

    def _request(self, session: str, payload: dict[str, Any]) -> None:
        """A cancel of one of this node's turns, or an answer to one of its questions."""
        served = self.open.get(session)
        if served is None:
            return
        if "cancel" in payload:
            turn = str(payload["cancel"])
            if served.turn is not None and served.turn.id == turn:
                self._spawn(_cancel(served, turn))
        elif "answer" in payload:
            self._spawn(served.heard_answer(str(payload["answer"])))

    async def _missed_requests(self) -> None:
        """After a reconnect: the cancels asked meanwhile, and answers recorded."""
        for session, turn in await asyncio.to_thread(self.live.cancels_asked):
            self._request(session, {"cancel": turn})
        for served in list(self.open.values()):
            for qid in list(served.questions):
                self._spawn(served.heard_answer(qid))

    async def _fetch(self) -> None:
        """Read the rows notified, in the order notified, and hand them to the mirrors."""
        while True:
            batch = [await self._fetching.get()]
            while not self._fetching.empty():
                batch.append(self._fetching.get_nowait())
            ids = [i for _, part in batch for i in part]
            try:
                rows = await asyncio.to_thread(self.live.fetch, ids)
            except StoreError:
                log.exception("reading other nodes' live frames failed")
                continue
            for row in rows:
                served = self.open.get(row.session_id)
                mirror = served.mirror if served is not None else None
                if mirror is not None and row.node != self.live.node:
                    mirror.offer([row])

    # -- reaping -----------------------------------------------------------------

    async def _reap_loop(self) -> None:
        rounds = 0
        while True:
            await asyncio.sleep(REAP_SECONDS)
            rounds += 1
            try:
                for session, _ in await asyncio.to_thread(self.live.lost_turns):
                    await asyncio.to_thread(self.reap, session)
                if rounds % STALE_ROUNDS == 0:
                    await self._unstick()
                if rounds % TIDY_ROUNDS == 0:
                    await asyncio.to_thread(self.live.tidy)
            except StoreError:
                log.warning("looking for lost turns failed", exc_info=True)

    async def _unstick(self) -> None:
        """A remote turn whose end this node never heard (its row says it ended: a
        row that could not be written, say) is read again, so its session's
        settled events no longer wait for it."""
        stale: set[str] = set()
        for served in list(self.open.values()):
            mirror = served.mirror
            remote = mirror.remote if mirror is not None else None
            if mirror is not None and remote is not None:
                ended, _ = await asyncio.to_thread(self.live.turn_ended, remote.turn)
                if ended and mirror.remote is remote:
                    stale.add(remote.turn)
                    if remote.turn in self._stale:  # twice: not merely on its way
                        mirror.resync()
        self._stale = stale

    def reap(self, session: str) -> bool:
        """Record the lost turn of ``session`` as interrupted and end it, holding the
        lease (blocking); False if the lease is held (a turn runs: it did that)."""
        take = getattr(self.store, "lease", None)
        if take is None:
            return False
        try:
            lease = take(session, wait=0.0)
        except SessionBusy:
            return False
        try:
            with self.store.open_writer(session) as writer:
                record_unfinished(writer)
            self.live.end_lost(session)
        finally:
            lease.release()
        return True


async def _cancel(served: Served, turn: str) -> None:
    with suppress(NotInFlight):
        await served.cancel(turn)

"""The sessions a server has open: opened on first use, closed when idle or deleted.

A session is opened in the server lazily, on the first request that needs it
(a prompt, a stream, a selection, a compaction), and stays open until it is
deleted, has been idle (no turn, watcher or question) for the configured time,
or the server stops. It holds the store's writer (the file store's lock) only
while a turn, a compaction or a branch switch runs (see :mod:`.served`): a
terminal's ``infai session append`` or ``infai run --session`` between two
turns does not wait, and the next turn starts from what it appended. One that
runs *during* a turn waits for the lock and then fails clearly (as does the
server's next turn during theirs); nothing ever writes beside another writer.

Opening, closing and deleting a session are serialised per session id by
:class:`Locks`, whose entry for an id lives only while someone holds or awaits
it: ids of sessions that were never found, failed to open, or are closed leave
nothing behind. The store work of opening (reading the session's metadata,
taking its writer) runs in a worker thread, never on the event loop.

Each session is opened under its own working directory's configuration (the
harness reads it once per directory, see
:meth:`~infai.agent.Harness.config_for`), not that of the directory the
server was started in; what such a file left out is logged once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from infai.agent import AgentSession, ConfigError, Harness
from infai.llm import ModelUnavailable
from infai.store import REMOVED, Event, SessionInfo, SessionNotFound, SessionStore
from infai.tools import Approver

from .channel import frame
from .errors import Conflict
from .nodes import Node
from .remote import Live
from .served import Served

log = logging.getLogger("infai.server")

#: the errors that say a model name cannot be built (the user's to fix, not a bug)
MODEL_ERRORS: tuple[type[Exception], ...] = (ModelUnavailable, ConfigError)


class Locks:
    """One :class:`asyncio.Lock` per key, kept only while someone holds or awaits it.

    A plain dict of locks would keep an entry for every id ever asked for (a
    client probing random ids would grow it without bound); here the last one
    out removes the entry.
    """

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def __call__(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)


class Sessions:
    """The sessions this server has open, opened on first use."""

    def __init__(
        self,
        harness: Harness,
        *,
        approval_timeout: float = 300.0,
        observe: Callable[[Event], None] | None = None,
    ) -> None:
        #: where every session's agent is opened (config, model, policy, tools)
        self.harness = harness
        self.store: SessionStore = harness.store
        self.approval_timeout = approval_timeout
        self.observe = observe
        self.open: dict[str, Served] = {}
        self._watcher: threading.Thread | None = None
        self._closer: asyncio.Task[None] | None = None
        self._stop_watching = threading.Event()
        self._locks = Locks()
        #: fan-out of other processes' appends, and closing what they removed
        self._background: set[asyncio.Task[None]] = set()
        self.closing = False
        #: each (model name, working directory)'s context window, once asked (None: unbuildable)
        self._windows: dict[tuple[str, str | None], int | None] = {}
        live: Live | None = getattr(self.store, "live", None)
        #: this server as one node of several on a shared store (None: the only one)
        self.node = (
            None if live is None else Node(self.store, live, self.open, self._spawn, self._heard)
        )

    async def serve(self, session_id: str) -> Served:
        """The open session (opening it reads the store and takes the writer lock, in a
        worker thread); :class:`~infai.store.SessionNotFound` if there is none."""
        served = self.open.get(session_id)
        if served is None:
            async with self._locks(session_id):
                served = self.open.get(session_id)
                if served is None:
                    if self.closing:
                        raise Conflict("the server is shutting down")
                    served = await self._open(session_id)
                    self.open[session_id] = served  # first: rows heard meanwhile are kept
                    node = self.node
                    served.begin(node.live if node else None, node.forward if node else None)
        if served.mirror is not None:  # another node's turn so far, read once
            await served.mirror.ready.wait()
        return served

    async def _open(self, session_id: str) -> Served:
        """Open the session's agent through the harness, with this session's
        approver (questions go to the API) and the model stored in the session
        (its own, closed with it; none named: the harness's)."""
        info = await asyncio.to_thread(self.store.info, session_id)

        def open_agent(approver: Approver) -> AgentSession:
            try:
                return self.harness.open(session_id, approver=approver, model_name=info.model)
            except MODEL_ERRORS as exc:
                raise Conflict(f"cannot open session {session_id}: {exc}") from None
            finally:  # the session's own directory's configuration: what it left out
                for notice in self.harness.take_notices():
                    log.warning("%s", notice)

        served = await asyncio.to_thread(
            partial(
                Served,
                self.store,
                session_id,
                open_agent=open_agent,
                approval_timeout=self.approval_timeout,
                observe=self.observe,
            )
        )
        return served

    def start_closing_idle(self, after: float | None) -> None:
        """Close sessions idle for ``after`` seconds (None: never), freeing their
        memory (their writers were released when their last turn ended)."""
        if after is None or self._closer is not None:
            return

        async def close_idle() -> None:
            while True:
                await asyncio.sleep(min(30.0, max(after / 4, 0.05)))
                now = time.monotonic()
                for sid, served in list(self.open.items()):
                    if served.idle and now - served.last_active >= after:
                        async with self._locks(sid):
                            if self.open.get(sid) is served and served.idle:
                                del self.open[sid]
                                await served.close("idle")

        self._closer = asyncio.get_running_loop().create_task(close_idle())

    async def start_node(self) -> None:
        """Hear other processes' appends (a shared database): fan them out here too;
        on a store that several servers share, also be a node (:mod:`.nodes`)."""
        if self.node is not None:
            await self.node.start()
        else:
            self.start_watching()

    def start_watching(self) -> None:
        """Hear other processes' appends (a shared database): fan them out here too."""
        if self._watcher is not None:
            return
        loop = asyncio.get_running_loop()

        def heard(session_id: str | None, seq: int) -> None:
            loop.call_soon_threadsafe(self._heard, session_id, seq)

        self._stop_watching.clear()
        self._watcher = threading.Thread(
            target=self.store.watch,
            args=(heard, self._stop_watching),
            name="infai-listen",
            daemon=True,
        )
        self._watcher.start()

    def _heard(self, session_id: str | None, seq: int) -> None:
        """Another process appended (``session_id`` None: maybe to any session)."""
        targets = list(self.open.values()) if session_id is None else [self.open.get(session_id)]
        for served in targets:
            if served is None:
                continue
            if seq == REMOVED:  # removed by another process: close it here too
                self._forget(served, "session deleted")
            else:
                self._spawn(self._hear(served, seq))

    async def _hear(self, served: Served, seq: int) -> None:
        try:
            await served.catch_up_remote(seq)
        except SessionNotFound:
            self._forget(served, "session deleted")
        except Exception:
            log.exception("fanning out session %s failed", served.session_id)

    def _forget(self, served: Served, reason: str) -> None:
        async def close() -> None:
            async with self._locks(served.session_id):
                if self.open.get(served.session_id) is served:
                    del self.open[served.session_id]
                    await served.close(reason)

        self._spawn(close())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in the background, kept referenced until it is done."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def stop_watching(self) -> None:
        node = self.node
        if node is not None:
            await node.stop_hearing()
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            self._stop_watching.set()
            await asyncio.to_thread(watcher.join, 5)

    def model_name(self, info: SessionInfo) -> str:
        """The name of the model the session's next prompt uses: its own (stored when
        it was made), else the harness's (``infai serve --model``, else the
        configuration's), as :meth:`open` builds it, so a client can say which."""
        return info.model or self.harness.model_name

    async def context_window(self, info: SessionInfo) -> int | None:
        """The context window of the model the session's next prompt uses: the open
        agent's, else :meth:`model_name`'s as the session's directory defines it,
        built once per name and directory; None when it cannot be built."""
        served = self.open.get(info.id)
        if served is not None:
            return served.agent.model.context_window
        key = (self.model_name(info), info.working_dir)
        if key not in self._windows:
            try:
                self._windows[key] = await self.harness.model_window(*key)
            except MODEL_ERRORS:
                self._windows[key] = None
        return self._windows[key]

    async def delete(self, session_id: str) -> None:
        """Close the session here if open, then remove it from the store."""
        async with self._locks(session_id):
            served = self.open.pop(session_id, None)
            if served is not None:
                await served.close("session deleted")
            await asyncio.to_thread(self.store.remove_session, session_id)

    def end_streams(self, reason: str) -> None:
        """End every watcher's stream (the server is about to stop)."""
        for served in self.open.values():
            served.channel.close(reason, last=frame("closed", {"reason": reason}))

    async def aclose(self) -> None:
        """Stop every turn and release every writer."""
        self.closing = True
        await self.stop_watching()
        closer, self._closer = self._closer, None
        if closer is not None:
            closer.cancel()
            await asyncio.wait([closer])
        while self.open:
            _, served = self.open.popitem()
            try:
                await served.close("server shutting down")
            except Exception:
                log.exception("closing session %s failed", served.session_id)
        if self.node is not None:
            await self.node.close()

"""One agent session object that every shell drives (CLI, TUI, server).

:class:`AgentSession` owns the session's writer (so it holds the writer lock
while open), the model, the tools and the permission policy. Shells call
:meth:`AgentSession.prompt` and render the events; they choose an older event
to continue from with :meth:`AgentSession.select` (HEAD moves only when the next
prompt is stored) and never touch the store or the model themselves.

Where several processes share a session (a database store), a turn, a
compaction or a summarised switch first takes the session's lease
(:meth:`AgentSession.slot`): another process trying the same gets
:class:`~infai.store.SessionBusy` at once instead of racing it.

What the user answered "allow always" is kept with the session (its metadata's
``extra.allowed``, as ``tool pattern`` texts) and applies again whenever the
session is opened, in any shell.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from infai.llm import Model
from infai.store import Event, InvalidInput, SessionInfo, SessionStore
from infai.tools import Permissions, Policy, Rule, Toolbox, ToolContext

from .compaction import DEFAULT_THRESHOLD, compact, summarize_branch
from .context import ContextCache
from .hub import EventHub
from .loop import AgentEvent, run_turn
from .prompt import system_prompt

#: the key in a session's ``extra`` metadata that keeps its "allow always" rules
KEPT_RULES = "allowed"


def kept_rules(info: SessionInfo) -> list[Rule]:
    """The allow rules kept with a session; a damaged entry is an error naming it."""
    texts: Any = info.extra.get(KEPT_RULES, [])
    where = f"session {info.id} metadata, extra.{KEPT_RULES}"
    if not isinstance(texts, list) or not all(isinstance(t, str) and t.strip() for t in texts):
        raise InvalidInput(f"{where}: expected a list of 'tool pattern' texts")
    return [Rule.parse("allow", text) for text in texts]


class AgentSession:
    """A session opened for an agent: prompt it, branch it, close it."""

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        *,
        model: Model,
        toolbox: Toolbox,
        permissions: Permissions,
        instructions: str = "",
        compact_at: float | None = DEFAULT_THRESHOLD,
    ) -> None:
        self.store = store
        info = store.info(session_id)
        self.working_dir = Path(info.working_dir or ".").resolve()
        self.model = model
        self.toolbox = toolbox
        self.permissions = permissions
        self.instructions = instructions
        #: auto-compaction threshold (fraction of the context window; None: off)
        self.compact_at = compact_at
        if isinstance(permissions, Policy):
            permissions.rules.extend(kept_rules(info))
            permissions.remember = self._keep
        self.writer = store.open_writer(session_id)
        self.session_id = self.writer.session_id
        self._lease: Any = None
        self._held = 0
        self.cache = ContextCache(self.writer)
        #: every event of this session's turns, for watchers other than the caller
        self.hub = EventHub()
        if info.model != model.name:
            try:
                store.update_info(self.session_id, model=model.name)
            except BaseException:
                self.writer.close()  # never leave the lock held by a session nobody has
                raise

    def _keep(self, rules: list[Rule]) -> None:
        info = self.store.info(self.session_id)
        kept = [f"{rule.tool} {rule.pattern}" for rule in kept_rules(info)]
        kept += [text for rule in rules if (text := f"{rule.tool} {rule.pattern}") not in kept]
        self.store.update_info(self.session_id, extra={**info.extra, KEPT_RULES: kept})

    def use_model(self, model: Model, toolbox: Toolbox) -> None:
        """Answer with ``model`` from the next request on, keeping the session open
        (its writer, its lock and any event picked to continue from)."""
        self.store.update_info(self.session_id, model=model.name)
        self.model, self.toolbox = model, toolbox

    def acquire(self) -> None:
        """Take the session's lease for a turn (nested takes are counted).

        A store whose writers are exclusive anyway (the file store's lock) has no
        lease. Taking one re-reads HEAD, so the turn starts from the latest event
        any process appended. Raises :class:`~infai.store.SessionBusy`.
        """
        if self._held == 0:
            take = getattr(self.store, "lease", None)
            if take is not None:
                self._lease = take(self.session_id)
                try:
                    refresh = getattr(self.writer, "refresh", None)
                    if refresh is not None:
                        refresh()
                except BaseException:
                    self._lease.release()
                    self._lease = None
                    raise
        self._held += 1

    def release(self) -> None:
        self._held -= 1
        if self._held == 0 and self._lease is not None:
            lease, self._lease = self._lease, None
            lease.release()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold the session's lease for the block (see :meth:`acquire`)."""
        self.acquire()
        try:
            yield
        finally:
            self.release()

    def select(self, event_id: str | None) -> None:
        """Continue from ``event_id`` with the next prompt (None: from HEAD)."""
        self.writer.select(event_id)

    async def prompt(self, text: str) -> AsyncIterator[AgentEvent]:
        """Run one prompt to completion; see :func:`~infai.agent.loop.run_turn`."""
        with self.slot():
            async for event in self._turn(text):
                yield event

    async def _turn(self, text: str) -> AsyncIterator[AgentEvent]:
        async for event in run_turn(
            self.writer,
            self.model,
            text,
            toolbox=self.toolbox,
            permissions=self.permissions,
            context=ToolContext(self.working_dir, self.session_id),
            system=system_prompt(self.working_dir, self.instructions),
            cache=self.cache,
            compact_at=self.compact_at,
        ):
            self.hub.publish(event)
            yield event

    async def switch(self, event_id: str, *, summarize: bool = True) -> Event | None:
        """Move to another branch at ``event_id``.

        With ``summarize``, the abandoned branch is summarised into a
        ``branch_summary`` event after ``event_id`` (HEAD moves there now);
        without, this is :meth:`select` (HEAD moves with the next prompt).
        """
        if not summarize:
            self.select(event_id)
            return None
        with self.slot():
            return await summarize_branch(self.writer, self.model, event_id)

    async def compact(self) -> Event:
        """Compact now; raises :class:`~infai.agent.compaction.CompactionFailed`."""
        with self.slot():
            return await compact(self.writer, self.model)

    def close(self) -> None:
        if self._lease is not None:
            self._held = 0
            lease, self._lease = self._lease, None
            lease.release()
        self.writer.close()

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""One agent session object that every shell drives (CLI, TUI, server).

:class:`AgentSession` owns the session's writer (so it holds the writer lock
while open), the model, the tools and the permission policy. Shells call
:meth:`AgentSession.prompt` and render the events; they choose an older event
to continue from with :meth:`AgentSession.select` (HEAD moves only when the next
prompt is stored) and never touch the store or the model themselves.

What the user answered "allow always" is kept with the session (its metadata's
``extra.allowed``, as ``tool pattern`` texts) and applies again whenever the
session is opened, in any shell.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
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

    def select(self, event_id: str | None) -> None:
        """Continue from ``event_id`` with the next prompt (None: from HEAD)."""
        self.writer.select(event_id)

    async def prompt(self, text: str) -> AsyncIterator[AgentEvent]:
        """Run one prompt to completion; see :func:`~infai.agent.loop.run_turn`."""
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
        return await summarize_branch(self.writer, self.model, event_id)

    async def compact(self) -> Event:
        """Compact now; raises :class:`~infai.agent.compaction.CompactionFailed`."""
        return await compact(self.writer, self.model)

    def close(self) -> None:
        self.writer.close()

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""How the server builds a session's machinery: its model, policy, tools and agent.

This is the one place the server assembles lower-layer parts; every other
module of the server only drives the :class:`~infai.agent.AgentSession` it is
handed. When the agent layer offers one composition root for every shell,
:class:`Assembly` is what gets replaced by it, and nothing else changes.

A model is built only to be used and is always closed: a session's model
belongs to its :class:`~.served.Served` (closed when it closes, or at once when
opening fails), and a name checked on creating a session is built in a worker
thread (an SDK client may load certificates) and closed straight after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from infai.agent import AgentSession
from infai.agent.compaction import DEFAULT_THRESHOLD
from infai.agent.config import ConfigError
from infai.agent.subagent import TaskTool
from infai.llm import Model, close_model
from infai.llm.providers import ModelUnavailable
from infai.store import SessionStore
from infai.tools import Policy, Rule, Tool, Toolbox, builtin_tools
from infai.tools.policy import Approver

from .errors import ApiError, Conflict

#: builds a session's model from its stored name (None: the server's default)
ModelFactory = Callable[[str | None], Model]
#: the errors that say a model name cannot be built (the user's to fix, not a bug)
MODEL_ERRORS: tuple[type[Exception], ...] = (ModelUnavailable, ConfigError)


@dataclass(frozen=True)
class Assembly:
    """The server's recipe for a session's agent: model by name, tools, rules."""

    store: SessionStore
    model_factory: ModelFactory
    tools: Callable[[], Iterable[Tool]] = builtin_tools
    rules: Sequence[Rule] = field(default_factory=tuple)
    compact_at: float | None = DEFAULT_THRESHOLD

    async def check_model(self, name: str) -> None:
        """Raise :class:`ApiError` (422) if ``name`` names no model that can be built.

        The model made to find out is closed before this returns: one is made per
        request, and an SDK client left open would leak its connections.
        """
        try:
            model = await asyncio.to_thread(self.model_factory, name)
        except MODEL_ERRORS as exc:
            raise ApiError(422, f"body.model: {exc}") from None
        await close_model(model)

    def model(self, session_id: str, name: str | None) -> Model:
        """The model of a session being opened; :class:`Conflict` if it cannot be built."""
        try:
            return self.model_factory(name)
        except MODEL_ERRORS as exc:
            raise Conflict(f"cannot open session {session_id}: {exc}") from None

    def agent(self, session_id: str, model: Model, approver: Approver) -> AgentSession:
        """Open the session's agent (takes its writer): blocking, run it in a thread.

        Every served session offers subagents (the ``task`` tool), as in every shell.
        """
        policy = Policy(list(self.rules), approver=approver)
        tools = list(self.tools())
        if not any(tool.spec.name == "task" for tool in tools):
            tools.append(TaskTool(self.store, model, list(tools), policy))
        return AgentSession(
            self.store,
            session_id,
            model=model,
            toolbox=Toolbox(tools),
            permissions=policy,
            compact_at=self.compact_at,
        )


__all__ = ["MODEL_ERRORS", "Assembly", "ModelFactory"]

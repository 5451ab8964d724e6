"""The one composition root: where a working directory's agent machinery is assembled.

Every shell needs the same few steps before it can drive an
:class:`~infai.agent.AgentSession`: read the configuration for the working
directory, build the named model, assemble the permission policy (configured
rules, the shell's own ``--allow`` rules, and an approver for "ask"), offer
the standard tools (``task``, the subagent tool, included), and open or create
the session. :class:`Workspace` is the only place that does them, so the CLI,
the TUI and the server cannot drift apart: a shell names lower-layer types only
to render or answer them (deltas, notices, approval questions), never to build
machinery.

Models: the workspace holds one model (its default, :attr:`Workspace.model`),
which the sessions it opens share unless a session asks for another model by
name (the server opens each session with the model stored in it); such a
session owns its model and closes it when it is closed
(:meth:`AgentSession.aclose`). :meth:`Workspace.check_model` validates a name
by building the model and closing it again, so asking leaks no SDK client.
"""

from __future__ import annotations

import os
from pathlib import Path

from infai.llm import Model, close_model
from infai.llm.registry import build_model
from infai.store import SessionInfo, SessionStore
from infai.tools import Policy, Rule, Sandbox, Toolbox, builtin_tools
from infai.tools.base import Permissions
from infai.tools.offload import off_loop
from infai.tools.policy import Approver

from .config import Config, load_config
from .session import AgentSession
from .subagent import TaskTool


class Workspace:
    """The store, configuration and policy for sessions run in ``working_dir``.

    Raises :class:`~infai.agent.config.ConfigError` for a bad configuration
    file, :class:`~infai.tools.policy.RuleError` for a bad ``allow`` rule and
    :class:`~infai.llm.providers.ModelUnavailable` for a model that cannot be
    built; all are :class:`~infai.errors.InfaiError`, the user's to fix.
    """

    def __init__(
        self,
        store: SessionStore,
        working_dir: Path,
        *,
        model_name: str | None = None,
        allow: tuple[str, ...] = (),
        approver: Approver | None = None,
        config: Config | None = None,
    ) -> None:
        self.store = store
        self.working_dir = working_dir.resolve()
        self.config = config or load_config(self.working_dir)
        self.model_name = model_name or self.config.default_model
        self.rules = [*self.config.rules, *(Rule.parse("allow", text) for text in allow)]
        #: the approver of sessions opened without one of their own
        self.approver = approver
        self.model = self.build_model(self.model_name)
        self._retired: list[Model] = []
        self._sandbox: Sandbox | None = None

    # -- models ----------------------------------------------------------------

    def build_model(self, name: str) -> Model:
        """A new model called ``name`` (the caller closes it); raises ModelUnavailable."""
        return build_model(name, self.config.models)

    async def check_model(self, name: str) -> str:
        """Whether ``name`` can be built: its display name, or ModelUnavailable.

        What was built to check is closed again (an SDK client holds connections);
        it is built in a worker thread (an SDK client may load certificates).
        """
        model = await off_loop(self.build_model, name)
        try:
            return model.name
        finally:
            await close_model(model)

    def use_model(self, session: AgentSession, name: str) -> Model:
        """Switch ``session`` (and sessions opened later) to the model ``name``, keeping
        the session open; returns the model it used before, for the caller to close.

        Raises :class:`~infai.llm.providers.ModelUnavailable` and changes nothing if
        the model cannot be built.
        """
        model = self.build_model(name)
        if session.owns_model:  # its own model gives way to the workspace's: closed later
            self._retired.append(session.model)
        session.use_model(model, self._tools(model, session.permissions))
        session.owns_model = False  # the workspace's model now, closed by the workspace
        old, self.model_name, self.model = self.model, name, model
        return old

    async def aclose(self) -> None:
        """Close the workspace's own model (sessions close theirs)."""
        retired, self._retired = self._retired, []
        for model in (*retired, self.model):
            await close_model(model)

    # -- sessions --------------------------------------------------------------

    def sessions(self) -> list[SessionInfo]:
        """This store's sessions, most recently active first."""
        return self.store.list_sessions()

    def latest_here(self) -> SessionInfo | None:
        """The most recently active session of this working directory (a subagent's
        child session is not one to continue: its parent is)."""
        here = str(self.working_dir)
        mine = (i for i in self.sessions() if i.working_dir == here and not i.parent_session)
        return next(mine, None)

    def new_session(
        self,
        name: str | None = None,
        *,
        working_dir: Path | None = None,
        model_name: str | None = None,
    ) -> str:
        """Create a session (here, with this workspace's model unless named) and
        return its id; nothing is opened."""
        info = self.store.create_session(
            name=name,
            working_dir=str((working_dir or self.working_dir).resolve()),
            model=model_name or self.model.name,
        )
        return info.id

    def policy(self, approver: Approver | None = None) -> Policy:
        """A fresh policy: the configured and ``allow`` rules, and ``approver``
        (else the workspace's) for what they say to ask about."""
        return Policy(list(self.rules), approver=approver or self.approver)

    @property
    def sandbox(self) -> Sandbox:
        """Where shell commands run (:mod:`infai.tools.sandbox`), from the configuration:
        infai's own config and store directories are protected, the configured
        models' key variables are secrets. ``sandbox.notice`` is what to say once."""
        if self._sandbox is None:
            from infai.agent.config import user_config_path

            config_file = user_config_path()
            protected = [config_file if os.environ.get("INFAI_CONFIG") else config_file.parent]
            home = getattr(self.store, "home", None)
            if isinstance(home, Path):
                protected.append(home)
            keys = tuple(spec.key_env for spec in self.config.models.values() if spec.key_env)
            self._sandbox = Sandbox(
                self.config.sandbox, protected=tuple(protected), secret_env=keys
            )
        return self._sandbox

    def toolbox(self, model: Model, policy: Policy) -> Toolbox:
        """The standard tools, ``task`` (subagents under ``policy``) included; ``bash``
        runs under :attr:`sandbox`, for subagents too."""
        return self._tools(model, policy)

    def _tools(self, model: Model, permissions: Permissions) -> Toolbox:
        tools = builtin_tools(self.sandbox)
        return Toolbox([*tools, TaskTool(self.store, model, tools, permissions)])

    def open(
        self,
        session_id: str | None = None,
        *,
        approver: Approver | None = None,
        model_name: str | None = None,
    ) -> AgentSession:
        """Open ``session_id`` (None: a new session) for the agent.

        ``approver`` answers this session's permission questions (default: the
        workspace's). With ``model_name`` (other than the workspace's model),
        the session gets a model of its own, which it closes when closed; else
        it shares the workspace's. Blocks while another writer holds the
        session: call it in a worker thread from async code.
        """
        if session_id is None:
            session_id = self.new_session()
        own = model_name is not None and model_name != self.model_name
        model = self.build_model(model_name) if own and model_name else self.model
        policy = self.policy(approver)
        try:
            session = AgentSession(
                self.store,
                session_id,
                model=model,
                toolbox=self.toolbox(model, policy),
                permissions=policy,
                compact_at=self.config.compact_at,
                owns_model=own,
            )
        except BaseException:
            if own:
                _close_quietly(model)
            raise
        return session


def _close_quietly(model: Model) -> None:
    """Close a model built for a session that failed to open (no loop may be running
    in this thread: the model never streamed, so closing it needs none of its own)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(close_model(model))
        return
    # in a loop's thread: hand the close to the loop
    asyncio.get_running_loop().create_task(close_model(model))


__all__ = ["Workspace"]

"""A working directory's agent setup: store, configuration, and how sessions open.

Every shell needs the same few steps before it can drive an
:class:`~infai.agent.AgentSession`: read the configuration for the working
directory, build the named model, assemble the permission policy (configured
rules, the shell's own ``--allow`` rules, and the shell's approver for "ask"),
offer the standard tools, and open or create the session. :class:`Workspace`
does them once, so the CLI, the TUI and the server cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

from infai.agent import AgentSession
from infai.agent.config import Config, load_config
from infai.agent.subagent import standard_toolbox
from infai.llm import Model
from infai.llm.registry import build_model
from infai.store import SessionInfo, SessionStore
from infai.tools import Policy, Rule
from infai.tools.policy import Approver


class Workspace:
    """The store, configuration and policy for sessions run in ``working_dir``.

    Raises :class:`~infai.agent.config.ConfigError` for a bad configuration
    file and :class:`~infai.llm.providers.ModelUnavailable` for a model that
    cannot be built; both are the user's to fix, and shells report them so.
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
        self.approver = approver
        self.model = self.build_model(self.model_name)

    def build_model(self, name: str) -> Model:
        return build_model(name, self.config.models)

    def sessions(self) -> list[SessionInfo]:
        """This store's sessions, most recently active first."""
        return self.store.list_sessions()

    def latest_here(self) -> SessionInfo | None:
        """The most recently active session of this working directory (a subagent's
        child session is not one to continue: its parent is)."""
        here = str(self.working_dir)
        mine = (i for i in self.sessions() if i.working_dir == here and not i.parent_session)
        return next(mine, None)

    def new_session(self, name: str | None = None) -> str:
        info = self.store.create_session(
            name=name, working_dir=str(self.working_dir), model=self.model.name
        )
        return info.id

    def use_model(self, session: AgentSession, name: str) -> Model:
        """Switch ``session`` (and sessions opened later) to the model ``name``, keeping
        the session open; returns the model it used before, for the caller to close.

        Raises :class:`~infai.llm.providers.ModelUnavailable` and changes nothing if
        the model cannot be built.
        """
        model = self.build_model(name)
        permissions = session.permissions
        session.use_model(model, standard_toolbox(self.store, model, permissions))
        old, self.model_name, self.model = self.model, name, model
        return old

    def open(self, session_id: str | None = None) -> AgentSession:
        """Open ``session_id`` (None: a new session) for the agent."""
        if session_id is None:
            session_id = self.new_session()
        permissions = Policy(list(self.rules), approver=self.approver)
        return AgentSession(
            self.store,
            session_id,
            model=self.model,
            toolbox=standard_toolbox(self.store, self.model, permissions),
            permissions=permissions,
            compact_at=self.config.compact_at,
        )

"""The one composition root: where a working directory's agent machinery is assembled.

Every shell needs the same few steps before it can drive an
:class:`~infai.agent.AgentSession`: read the configuration for the working
directory, build the named model, assemble the permission policy (configured
rules, the shell's own ``--allow`` rules, and an approver for "ask"), offer
the standard tools (``task``, the subagent tool, included), and open or create
the session. :class:`Harness` is the only place that does them, so the CLI,
the TUI and the server cannot drift apart: a shell names lower-layer types only
to render or answer them (deltas, notices, approval questions), never to build
machinery.

Configuration: a session runs under its own working directory's configuration
(the user's file and that directory's ``.infai/config.toml``), wherever the
shell was started: its rules, its models, its compaction threshold. The
server and the TUI open sessions of any directory through one harness, so
:meth:`Harness.config_for` loads each directory's configuration once and
keeps it (a repository's file never governs another directory's session, and
a session never escapes its own project's deny rules); what a newly loaded file
had left out is queued for the shell to say (:meth:`Harness.take_notices`).
A harness given its configuration (tests, embedding) uses that one for every
session. The shell's own ``--allow`` rules apply to every session.

Models: the harness holds one model (its default, :attr:`Harness.model`),
which the sessions it opens share unless a session asks for another model by
name (the server opens each session with the model stored in it); such a
session owns its model and closes it when it is closed
(:meth:`AgentSession.aclose`). :meth:`Harness.check_model` validates a name
by building the model and closing it again, so asking leaks no SDK client.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from infai.checkpoints import SessionCheckpoints, too_wide
from infai.llm import Model, close_model
from infai.llm.registry import build_model, spec_for
from infai.store import EventNotFound, InvalidInput, SessionInfo, SessionStore
from infai.tools import Policy, Rule, Sandbox, Toolbox, builtin_tools
from infai.tools.base import Permissions
from infai.tools.offload import off_loop
from infai.tools.sandbox_verified import unverified

from .config import Config, load_config, user_config_path
from .plugins import load_context_rules, plugin_tools
from .questions import AnyApprover, as_approver
from .session import AgentSession
from .subagent import TaskTool

if TYPE_CHECKING:
    from infai.tools.mcp import McpHub


class Harness:
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
        approver: AnyApprover | None = None,
        config: Config | None = None,
        model: Model | None = None,
        models: Callable[[str], Model] | None = None,
    ) -> None:
        """``config``: every session's configuration, no file read (default: each
        working directory's files). ``model``: the harness's model object (any
        :class:`~infai.llm.Model`: a provider's, a scripted one, your own), which
        it closes in :meth:`aclose`; else the one named ``model_name``, else the
        configuration's default. ``models`` builds every model by name instead of
        the configuration's registry (the harness's own, each session's, one
        checked): for embedding and tests that supply models of their own, as
        ``create_app(model_factory=...)`` does, without subclassing.
        ``approver`` answers permission questions (an async function, or a plain
        one run in a worker thread: :func:`as_approver`).
        """
        self._models = models
        self.store = store
        #: whether :meth:`aclose` closes the store (one :meth:`for_directory` opened)
        self.owns_store = False
        self.working_dir = working_dir.resolve()
        #: a configuration given is every session's; else each directory's own
        self._fixed = config is not None
        self.config = config or load_config(self.working_dir)
        #: the name of the harness's model
        self.model_name: str = (
            model.name if model is not None else model_name or self.config.default_model
        )
        #: the shell's own ``--allow`` rules, added to every session's configured ones
        self.allow = [Rule.parse("allow", text) for text in allow]
        self.rules = [*self.config.rules, *self.allow]
        self._configs: dict[Path, Config] = {self.working_dir: self.config}
        self._notices: list[str] = []
        self._said: set[str] = set()  # notices already queued once
        self._configs_lock = threading.Lock()
        #: the approver of sessions opened without one of their own
        self.approver = as_approver(approver) if approver is not None else None
        self.model = model if model is not None else self.build_model(self.model_name)
        self._retired: list[Model] = []
        self._sandbox: Sandbox | None = None
        self._hubs: dict[Path, McpHub] = {}
        self._hubs_lock = threading.Lock()

    @classmethod
    def for_directory(
        cls,
        directory: Path | str = ".",
        *,
        store: SessionStore | Path | str | None = None,
        model: Model | str | None = None,
        allow: tuple[str, ...] = (),
        approver: AnyApprover | None = None,
    ) -> Harness:
        """The harness for ``directory`` as the command line builds it: the user's
        configuration file and the directory's ``.infai/config.toml`` (a project's
        risky settings only if trusted), the configured default model (or
        ``model``: a name or a model object), the permission rules plus
        ``allow``, the sandbox; sessions in ``store`` (a store, a directory or a
        ``postgresql://`` URL; default: ``$INFAI_STORE``, else ``$INFAI_HOME``,
        else ``~/.config/infai/harness``), which the harness then closes.

        What the configuration left out and whether the sandbox is missing are in
        :meth:`start_notices`. A ``directory`` that is not one is
        :class:`~infai.store.InvalidInput`, with no store opened. Blocks on the
        disk (and a database's connection).
        """
        if not Path(directory).is_dir():  # checked before anything is opened or created
            raise InvalidInput(f"Harness.for_directory: {directory} is not a directory")
        opened = store is None or isinstance(store, Path | str)
        if isinstance(store, Path | str) or store is None:
            from infai.store import open_store

            sessions: SessionStore = open_store(store or os.environ.get("INFAI_STORE") or None)
        else:
            sessions = store
        try:
            name = model if isinstance(model, str) else None
            harness = cls(
                sessions,
                Path(directory),
                model_name=name,
                allow=allow,
                approver=approver,
                model=None if isinstance(model, str) else model,
            )
        except BaseException:
            if opened:
                sessions.close()
            raise
        harness.owns_store = opened
        return harness

    def start_notices(self) -> list[str]:
        """What to say once when the harness starts (the shells print it): what the
        configuration files left out, and that shell commands run unconfined."""
        notices = list(self.config.warnings)
        if self.sandbox.notice:
            notices.append(self.sandbox.notice)
        return notices

    async def __aenter__(self) -> Harness:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- models ----------------------------------------------------------------

    def build_model(self, name: str) -> Model:
        """A new model called ``name`` (the caller closes it); raises ModelUnavailable.

        Built by the ``models`` factory given, else from the configuration."""
        if self._models is not None:
            return self._models(name)
        return build_model(name, self.config.models)

    def _build(self, name: str, config: Config) -> Model:
        """A new model called ``name`` as ``config`` defines it (the harness's own
        configuration, or any with a ``models`` factory, goes through
        :meth:`build_model`, which subclasses replace)."""
        if config is self.config or self._models is not None:
            return self.build_model(name)
        return build_model(name, config.models)

    async def check_model(self, name: str, working_dir: Path | str | None = None) -> str:
        """Whether ``name`` can be built (for a session in ``working_dir``, under its
        configuration): its display name, or ModelUnavailable (or ConfigError).

        What was built to check is closed again (an SDK client holds connections);
        it is built in a worker thread (an SDK client may load certificates, and
        reading a directory's configuration touches the disk).
        """
        config = await off_loop(self.config_for, working_dir)
        model = await off_loop(self._build, name, config)
        try:
            return model.name
        finally:
            await close_model(model)

    async def model_window(self, name: str, working_dir: Path | str | None = None) -> int:
        """The context window of the model ``name`` (for a session in ``working_dir``),
        so a client can show how full a session's context is before it runs a turn;
        built and closed as :meth:`check_model` does."""
        config = await off_loop(self.config_for, working_dir)
        model = await off_loop(self._build, name, config)
        try:
            return model.context_window
        finally:
            await close_model(model)

    def use_model(self, session: AgentSession, name: str) -> Model:
        """Switch ``session`` (and sessions opened later) to the model ``name``, keeping
        the session open; returns the model it used before, for the caller to close.

        Raises :class:`~infai.llm.providers.ModelUnavailable` and changes nothing if
        the model cannot be built.
        """
        model = self._build(name, self.config_for(session.working_dir))
        if session.owns_model:  # its own model gives way to the harness's: closed later
            self._retired.append(session.model)
        box = self._with_mcp(
            self._tools(model, session.permissions), session.permissions, session.working_dir
        )
        _hook_subagents(session, box)
        session.use_model(model, box)
        session.owns_model = False  # the harness's model now, closed by the harness
        old, self.model_name, self.model = self.model, name, model
        return old

    async def aclose(self) -> None:
        """Stop the MCP servers and close the harness's own model (sessions close theirs)."""
        with self._hubs_lock:
            hubs, self._hubs = list(self._hubs.values()), {}
        for hub in hubs:
            await hub.aclose()
        retired, self._retired = self._retired, []
        try:
            for model in (*retired, self.model):
                await close_model(model)
        finally:
            if self.owns_store:
                self.owns_store = False
                await off_loop(self.store.close)

    # -- configuration ---------------------------------------------------------

    def config_for(self, working_dir: Path | str | None) -> Config:
        """The configuration of sessions in ``working_dir`` (None: the harness's):
        read once per directory and kept; its warnings queue for :meth:`take_notices`.

        Raises :class:`~infai.agent.config.ConfigError` for a bad file there (and
        keeps nothing, so a fixed file is read again). Blocks on the disk.
        """
        if self._fixed or not working_dir:
            return self.config
        here = Path(working_dir).resolve()
        with self._configs_lock:
            config = self._configs.get(here)
            if config is None:
                config = self._configs[here] = load_config(here)
                self._notices.extend(config.warnings)
            return config

    def take_notices(self) -> list[str]:
        """What configurations read since the last call left out, to say once (the
        harness's own directory's is the shell's to say at start: ``config.warnings``)."""
        with self._configs_lock:
            notices, self._notices = self._notices, []
        return notices

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

    def session_of_event(self, event_id: str) -> str | None:
        """The session of this working directory that holds ``event_id`` (None: none
        does). Each is asked through its index, newest first; sessions elsewhere are
        not searched (name the session instead)."""
        here = str(self.working_dir)
        for info in self.sessions():
            if info.working_dir != here:
                continue
            with self.store.open_reader(info.id) as reader:
                try:
                    reader.entry(event_id)
                except EventNotFound:
                    continue
            return info.id
        return None

    def new_session(
        self,
        name: str | None = None,
        *,
        working_dir: Path | None = None,
        model_name: str | None = None,
    ) -> str:
        """Create a session (here, with this harness's model unless named) and
        return its id; nothing is opened."""
        info = self.store.create_session(
            name=name,
            working_dir=str((working_dir or self.working_dir).resolve()),
            model=model_name or self.model.name,
        )
        return info.id

    def policy(self, approver: AnyApprover | None = None, config: Config | None = None) -> Policy:
        """A fresh policy: ``config``'s rules (default: the harness's) and the
        ``allow`` rules, and ``approver`` (else the harness's) for what they say
        to ask about."""
        rules = [*(config or self.config).rules, *self.allow]
        policy = Policy(
            rules,
            approver=as_approver(approver) if approver is not None else self.approver,
            protected=self.protected_roots(),
            # where commands cannot be confined, every shell command asks (unless the
            # user turned the sandbox off: then the rules are theirs to trust)
            shell_confined=self.sandbox.confined or self.sandbox.mode == "off",
        )
        policy.sandboxed = self._sandboxed_mode(config or self.config)
        return policy

    def _sandboxed_mode(self, config: Config) -> Literal["files", "commands"] | None:
        """The approval mode for a verified sandbox (:mod:`infai.tools.sandbox_verified`)
        where the configuration asks for it and ``infai doctor`` passed with this
        sandbox; else None, and a notice says why (once)."""
        settings = config.sandbox
        if settings.approvals != "sandboxed":
            return None
        probe = self.sandbox.probe()
        why = unverified(Path(self.store.home), probe.bwrap if probe.ok else None, settings)
        if why:
            notice = f'sandbox.approvals = "sandboxed" does not apply: {why}; asking as usual'
            with self._hubs_lock:
                if notice not in self._said:
                    self._said.add(notice)
                    self._notices.append(notice)
            return None
        return "files" if settings.network else "commands"

    def protected_roots(self) -> tuple[Path, ...]:
        """What no tool may write, whatever the rules: infai's own configuration and
        store, even inside the working directory (an agent run in ``$HOME``).

        The configuration's directory is protected when it is the platform's
        (``~/.config/infai``); a file named by ``$INFAI_CONFIG`` is protected
        itself. The store's home is, unless the working directory lies inside
        it, when its sessions are.
        """
        config = user_config_path().resolve()
        roots = [config if os.environ.get("INFAI_CONFIG") else config.parent]
        home = Path(self.store.home).resolve()
        wd = self.working_dir
        roots.append(home / "sessions" if wd == home or home in wd.parents else home)
        return tuple(roots)

    @property
    def sandbox(self) -> Sandbox:
        """Where shell commands run (:mod:`infai.tools.sandbox`), from the configuration:
        infai's own config and store directories are protected and hidden, the
        configured models' key variables are secrets. ``sandbox.notice`` is what to say once."""
        if self._sandbox is None:
            keys = tuple(spec.key_env for spec in self.config.models.values() if spec.key_env)
            home = Path(self.store.home).resolve()
            self._sandbox = Sandbox(
                self.config.sandbox,
                protected=self.protected_roots(),
                secret_env=keys,
                # no command reads infai's config or store (other sessions, the server's
                # token); its sessions and objects not even when run in the store's home
                private=(self.protected_roots()[0], home, home / "sessions", home / "objects"),
            )
        return self._sandbox

    def toolbox(self, model: Model, policy: Policy) -> Toolbox:
        """The standard tools, ``task`` (subagents under ``policy``) included; ``bash``
        runs under :attr:`sandbox`, for subagents too."""
        return self._tools(model, policy)

    def _tools(self, model: Model, permissions: Permissions) -> Toolbox:
        tools = builtin_tools(self.sandbox)
        task = TaskTool(self.store, model, tools, permissions, sources=(plugin_tools(),))
        box = Toolbox([*tools, task])
        box.attach(plugin_tools())  # installed plugins' tools, imported at the first request
        return box

    def _with_mcp(
        self, box: Toolbox, permissions: Permissions, working_dir: Path | str | None
    ) -> Toolbox:
        """``box`` with the MCP servers of ``working_dir`` attached (if any are
        configured there), whose trusted read-only tools ``permissions`` (a policy)
        may then allow by default (:attr:`~infai.tools.Policy.defaults`). Its
        ``task`` tool offers the same hub to every subagent (whose delegated policy
        keeps those defaults), so a child never starts a server of its own."""
        hub = self.mcp(working_dir)
        if hub is not None:
            box.attach(hub)
            task = box.get("task")
            if isinstance(task, TaskTool) and hub not in task.sources:
                task.sources = (*task.sources, hub)
            if isinstance(permissions, Policy):
                permissions.defaults = hub.default_allow
        return box

    def mcp(self, working_dir: Path | str | None = None) -> McpHub | None:
        """The MCP servers of sessions in ``working_dir`` (None: the harness's), one
        hub per directory, shared by its sessions (and their subagents) and stopped by
        :meth:`aclose`; None when none is configured. Nothing starts until a request
        needs them."""
        here = Path(working_dir).resolve() if working_dir else self.working_dir
        servers = self.config_for(here).mcp_servers
        if not servers:
            return None
        with self._hubs_lock:
            hub = self._hubs.get(here)
            if hub is None:
                from infai.tools.mcp import McpHub  # the SDK: only with a server configured

                hub = self._hubs[here] = McpHub(servers, self.sandbox, here)
            return hub

    def files_for(self, config: Config, working_dir: str | None) -> SessionCheckpoints | None:
        """The session's files on its timeline (None: ``[checkpoints] enabled =
        false``, or a store without objects)."""
        if not config.checkpoints.enabled or getattr(self.store, "objects", None) is None:
            return None
        here = Path(working_dir or self.working_dir).resolve()
        if here in too_wide():  # a first snapshot would hash everything the user has
            with self._hubs_lock:
                self._notices.append(
                    f"files are not snapshotted in {here} (your home directory,"
                    " or a directory above it): "
                    "start infai in a project's directory to have files on the timeline"
                )
            return None
        return SessionCheckpoints(self.store, here, config.checkpoints)

    def open(
        self,
        session_id: str | None = None,
        *,
        approver: AnyApprover | None = None,
        model_name: str | None = None,
    ) -> AgentSession:
        """Open ``session_id`` (None: a new session) for the agent.

        The session runs under its working directory's configuration
        (:meth:`config_for`): its rules, its models, its compaction threshold.
        ``approver`` answers this session's permission questions (default: the
        harness's). With ``model_name`` (other than the harness's model), or
        where the session's configuration defines the harness's model name
        otherwise, the session gets a model of its own, which it closes when
        closed; else it shares the harness's. Blocks on the disk, and while
        another writer holds the session: call it in a worker thread from async
        code.
        """
        if session_id is None:
            session_id = self.new_session()
        if notices := load_context_rules():  # installed context rules (none: nothing imported)
            with self._configs_lock:
                self._notices.extend(notices)
        config_dir = self.store.info(session_id).working_dir
        config = self.config_for(config_dir)
        name = model_name or self.model_name
        own = name != self.model_name or (
            config is not self.config
            and spec_for(name, config.models) != spec_for(name, self.config.models)
        )
        model = self._build(name, config) if own else self.model
        policy = self.policy(approver, config)
        try:
            session = AgentSession(
                self.store,
                session_id,
                model=model,
                toolbox=self._with_mcp(self.toolbox(model, policy), policy, config_dir),
                permissions=policy,
                compact_at=config.compact_at,
                owns_model=own,
                files=self.files_for(config, config_dir),
                default_dir=self.working_dir,
                hooks=config.hooks,
                context_rules=config.context_rules,
                max_steps=config.max_steps,
            )
            _hook_subagents(session)
        except BaseException:
            if own:
                _close_quietly(model)
            raise
        return session

    @asynccontextmanager
    async def session(
        self,
        session_id: str | None = None,
        *,
        resume: bool = False,
        approver: AnyApprover | None = None,
        model_name: str | None = None,
    ) -> AsyncIterator[AgentSession]:
        """``async with harness.session() as session:``: a new session (or
        ``session_id``; ``resume``: this directory's newest, as ``--continue``),
        opened in a worker thread and closed with :meth:`AgentSession.aclose`
        (a turn still running is cancelled and recorded as interrupted). Raises
        :class:`~infai.store.InvalidInput` when there is nothing to resume."""
        if resume and session_id is None:
            latest = await off_loop(self.latest_here)
            if latest is None:
                raise InvalidInput(f"no session to continue in {self.working_dir}")
            session_id = latest.id
        session = await off_loop(
            functools.partial(self.open, session_id, approver=approver, model_name=model_name)
        )
        try:
            yield session
        finally:
            await session.aclose()


def _hook_subagents(session: AgentSession, toolbox: Toolbox | None = None) -> None:
    """Give the ``task`` tool of ``toolbox`` (default: the session's) the session's
    hooks: its subagents' turns fire them too."""
    task = (toolbox or session.toolbox).get("task")
    if isinstance(task, TaskTool) and session.hooks is not None:
        task.hooks = session.hooks


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


__all__ = ["Harness"]

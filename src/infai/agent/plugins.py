"""Plugins: tools, providers, context rules and hook handlers from pip packages.

A package extends infai by declaring entry points (``[project.entry-points]``
in its ``pyproject.toml``) in these groups, each entry's name being what
infai knows it by:

- ``infai.tools``: a tool (a function decorated with
  :func:`~infai.tools.tool`, or any object with a ``spec`` and an async
  ``run``); the entry's name is the tool's name. Offered to the model with the
  built-in tools, behind the same policy (:mod:`~infai.tools.effects`).
- ``infai.providers``: a :class:`~infai.llm.provider_registry.ProviderInfo`
  (e.g. from :func:`~infai.llm.provider_registry.openai_compatible`) whose
  name is the entry's: ``provider = "NAME"`` in a ``[models.X]`` table, or
  ``--model NAME:MODEL``.
- ``infai.context``: a context rule, handed to ``infai.agent.register_context_rule``
  (the context pipeline's registration) when a session is opened.
- ``infai.hooks``: a hook handler, a callable taking Claude Code's hook
  payload (a dict) and returning None, a string (as a hook's stdout) or a dict
  (as its JSON answer); configured as ``[[hooks.EVENT]] handler = "NAME"``.

Nothing is imported at start-up: entry points are read from the installed
packages' metadata, and a plugin's module is imported the first time it is
used (the tools at a session's first model request, a provider when a model
names it, context rules when a session opens, a hook handler when its hook
fires). A plugin that fails (its import raises, its object has the wrong
type or name) is skipped with a one-line notice saying which plugin, from
which package, and why; never a traceback. ``infai plugins`` lists every
entry with its package, version and whether it loads.

Who may load a plugin: plugins are packages the user installed into infai's
environment (``pip install``), so they are trusted as the user's own
configuration is: their code runs with the user's rights, in infai's process,
outside the sandbox. A project's files cannot add one (a repository can ship a
package, but only the user installs it).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infai.errors import InfaiError
from infai.llm.provider_registry import ModelUnavailable, ProviderInfo, add_finder
from infai.tools.base import Tool
from infai.tools.effects import add_name_finder

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

#: the entry-point groups infai reads, and what each entry is
GROUPS = {
    "infai.tools": "tool",
    "infai.providers": "provider",
    "infai.context": "context rule",
    "infai.hooks": "hook handler",
}


class PluginError(InfaiError):
    """A plugin cannot be used: its import raised, or it is not what its group takes.
    Kept as the plugin's status and said in one line; a session goes on without it."""


@dataclass(frozen=True, slots=True)
class Plugin:
    """One entry point of an installed package, and whether it loads."""

    name: str
    group: str
    #: ``module:attribute`` as the package declares it
    value: str
    package: str
    version: str
    #: "ok", "error", or "not loaded" (nothing has used it yet)
    status: str
    error: str = ""

    def notice(self) -> str:
        """The one line that says this plugin was skipped, and why."""
        kind = GROUPS.get(self.group, self.group)
        return f"plugin {kind} {self.name!r} ({self.package} {self.version}) skipped: {self.error}"


_lock = threading.RLock()
_loaded: dict[tuple[str, str], Any] = {}
_failed: dict[tuple[str, str], str] = {}


def entries(group: str) -> list[EntryPoint]:
    """The installed entry points of ``group`` (metadata only: nothing imported),
    read once per process (a package installed meanwhile counts from the next run)."""
    return list(_entries(group))


@functools.cache
def _entries(group: str) -> tuple[EntryPoint, ...]:
    from importlib.metadata import entry_points

    return tuple(sorted(entry_points(group=group), key=lambda ep: ep.name))


def _package(ep: EntryPoint) -> tuple[str, str]:
    dist = ep.dist
    if dist is None:
        return "?", "?"
    return str(dist.metadata["Name"] or dist.name), str(dist.version)


def _check_tool(ep: EntryPoint, found: Any) -> Any:
    spec = getattr(found, "spec", None)
    run = getattr(found, "run", None)
    if spec is None or not inspect.iscoroutinefunction(run):
        raise PluginError(
            f"{ep.value} is a {type(found).__name__}, not a tool "
            "(decorate a function with infai.tools.tool)"
        )
    if getattr(spec, "name", None) != ep.name:
        raise PluginError(
            f"{ep.value} is the tool {spec.name!r}, but its entry point is named {ep.name!r}"
        )
    return found


def _check_provider(ep: EntryPoint, found: Any) -> Any:
    if not isinstance(found, ProviderInfo):
        raise PluginError(f"{ep.value} is a {type(found).__name__}, not a ProviderInfo")
    if found.name != ep.name:
        raise PluginError(
            f"{ep.value} is the provider {found.name!r}, but its entry point is named {ep.name!r}"
        )
    return found


def _check_callable(ep: EntryPoint, found: Any) -> Any:
    if not callable(found):
        raise PluginError(f"{ep.value} is a {type(found).__name__}, not callable")
    return found


_CHECKS: dict[str, Callable[[EntryPoint, Any], Any]] = {
    "infai.tools": _check_tool,
    "infai.providers": _check_provider,
    "infai.hooks": _check_callable,
}


def load(ep: EntryPoint) -> Any:
    """The object ``ep`` names, imported and checked once per process; PluginError
    (saying why, in one line) when it cannot be used, every time it is asked."""
    key = (ep.group, ep.name)
    with _lock:
        if key in _loaded:
            return _loaded[key]
        if key in _failed:
            raise PluginError(_failed[key])
        try:
            found = ep.load()
            check = _CHECKS.get(ep.group)
            if check is not None:
                found = check(ep, found)
        except PluginError as exc:
            _failed[key] = str(exc)
            raise
        except Exception as exc:  # a plugin's import may raise anything: reported, not raised
            _failed[key] = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise PluginError(_failed[key]) from None
        _loaded[key] = found
        return found


def _status(ep: EntryPoint) -> Plugin:
    package, version = _package(ep)
    key = (ep.group, ep.name)
    with _lock:
        if key in _loaded:
            return Plugin(ep.name, ep.group, ep.value, package, version, "ok")
        if key in _failed:
            return Plugin(ep.name, ep.group, ep.value, package, version, "error", _failed[key])
    return Plugin(ep.name, ep.group, ep.value, package, version, "not loaded")


def load_all(group: str) -> tuple[list[Any], list[str]]:
    """Every plugin of ``group`` that loads, and a notice for each that does not."""
    found, notices = [], []
    for ep in entries(group):
        try:
            found.append(load(ep))
        except PluginError:
            notices.append(_status(ep).notice())
    return found, notices


def plugin_report(*, load_them: bool = True) -> list[Plugin]:
    """Every installed plugin of every group, by group and name, each loaded first
    (unless ``load_them`` is False) so its status says whether it works."""
    rows = []
    for group in GROUPS:
        if load_them and group == "infai.context":
            load_context_rules()
        for ep in entries(group):
            if load_them:
                with contextlib.suppress(PluginError):
                    load(ep)
            rows.append(_status(ep))
    return rows


# -- tools ---------------------------------------------------------------------------------------


_registered_tools: dict[str, Tool] = {}


def register_tool(tool: Tool) -> Tool:
    """Offer ``tool`` (a :func:`~infai.tools.tool`-decorated function, or any
    :class:`~infai.tools.Tool`) in every session a :class:`~infai.agent.Harness`
    of this process opens from now on, as an installed plugin's would be; returns
    it. A second tool of the same name replaces the first."""
    name = getattr(getattr(tool, "spec", None), "name", None)
    if not isinstance(name, str):
        raise TypeError(f"{tool!r} is not a tool (decorate a function with infai.tools.tool)")
    with _lock:
        _registered_tools[name] = tool
    return tool


def unregister_tool(name: str) -> None:
    """Stop offering the tool ``name`` that :func:`register_tool` registered."""
    with _lock:
        _registered_tools.pop(name, None)


class PluginTools:
    """The tools registered in this process (:func:`register_tool`) and the
    installed plugins' tools, as a toolbox's source: the plugins are imported at
    the first model request that needs the tools (not at start-up); a broken one
    is left out with a notice, said once."""

    def __init__(self) -> None:
        self._tools: list[Tool] | None = None

    def tools(self) -> list[Tool]:
        """The registered tools, then the plugin tools that loaded (none of those
        before the first :meth:`prepare`)."""
        with _lock:
            mine = list(_registered_tools.values())
        return [*mine, *(self._tools or ())]

    async def prepare(self) -> list[str]:
        """Load the tools the first time; the notices of those that failed."""
        if self._tools is not None:
            return []
        from infai.tools.offload import off_loop

        found, notices = await off_loop(load_all, "infai.tools")
        self._tools = found
        return notices


_shared: PluginTools | None = None


def plugin_tools() -> PluginTools:
    """The process's one source of plugin tools (each plugin is imported once)."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = PluginTools()
        return _shared


def _tool_named(name: str) -> bool:
    """Whether an installed plugin declares a tool ``name`` (rules may name it)."""
    return any(ep.name == name for ep in entries("infai.tools"))


# -- providers -----------------------------------------------------------------------------------


def _find_provider(name: str) -> ProviderInfo | None:
    """The plugin provider ``name`` (None: no plugin has one); a broken one is a
    ModelUnavailable saying which package and why."""
    for ep in entries("infai.providers"):
        if ep.name != name:
            continue
        try:
            found: ProviderInfo = load(ep)
        except PluginError:
            raise ModelUnavailable(_status(ep).notice()) from None
        return found
    return None


# -- context rules and hook handlers -------------------------------------------------------------


def _register_context(rule: Any) -> bool:
    """Hand ``rule`` to the context pipeline's ``register_context_rule`` (False:
    this infai has none)."""
    register = getattr(importlib.import_module("infai.agent"), "register_context_rule", None)
    if register is None:
        return False
    register(rule)
    return True


_registered_rules: set[tuple[str, str]] = set()


def load_context_rules() -> list[str]:
    """Register the installed context rules (once each); notices of those that fail.
    Nothing is imported when no package declares one."""
    notices = []
    for ep in entries("infai.context"):
        key = (ep.group, ep.name)
        with _lock:
            if key in _registered_rules:
                continue
            try:
                rule = load(ep)
                if not _register_context(rule):
                    return [f"context rule plugins are not supported by this infai ({ep.name!r})"]
            except PluginError:
                notices.append(_status(ep).notice())
                continue
            except Exception as exc:  # the registry refused it (a wrong type)
                _failed[key] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                _loaded.pop(key, None)
                notices.append(_status(ep).notice())
                continue
            _registered_rules.add(key)
    return notices


def hook_handler(name: str) -> Callable[..., Any]:
    """The installed hook handler ``name``; PluginError saying why it cannot be used."""
    for ep in entries("infai.hooks"):
        if ep.name == name:
            found: Callable[..., Any] = load(ep)
            return found
    known = ", ".join(ep.name for ep in entries("infai.hooks")) or "none installed"
    raise PluginError(f"no hook handler plugin named {name!r} ({known})")


def install() -> None:
    """Let the provider registry and the rule parser know the installed plugins'
    names (reading metadata only when a name is not otherwise known). Idempotent."""
    add_finder(_find_provider)
    add_name_finder(_tool_named)


__all__ = [
    "GROUPS",
    "Plugin",
    "PluginError",
    "PluginTools",
    "entries",
    "hook_handler",
    "install",
    "load",
    "load_all",
    "load_context_rules",
    "plugin_report",
    "plugin_tools",
    "register_tool",
    "unregister_tool",
]

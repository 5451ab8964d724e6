"""What a tool that is not built in declares it touches, for the permission policy.

The built-in tools' effects are known to the policy by name (``read_file``
reads its ``path``, ``write_file`` writes it, ``bash`` runs a command). A tool
written in Python (:func:`~infai.tools.decorator.tool`) or shipped by a plugin
declares its own: the arguments that name files it reads, those that name
files it writes, and whether it reaches the network. The policy then rules on
those effects as it does on the built-ins' (:meth:`~infai.tools.Policy.rule_on`):
a read is judged as ``read_file``'s would be, a write as ``write_file``'s.

Declarations are kept here by tool name, for the process: a tool is a
definition, like a function, and a toolbox holds one tool per name anyway.
Rules may name a declared tool (``allow my_tool src/*``); a name known only
as an installed plugin's (not yet loaded) counts as declared through the name
finders the agent layer adds (:func:`add_name_finder`), so a configuration
naming a plugin's tool is read before the plugin is imported.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Effects:
    """What a tool touches: the arguments naming files it reads and writes (each
    a path, relative to the working directory or absolute), and the network."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    network: bool = False
    #: the path a ``reads``/``writes`` argument the model leaves out stands for
    defaults: tuple[tuple[str, str], ...] = ()

    def paths(self, arguments: Mapping[str, Any]) -> list[tuple[str, str]]:
        """``(effect, path)`` for each path the call touches: ``read`` or ``write``,
        and the argument as given (else its default); an absent one touches nothing."""
        defaults = dict(self.defaults)
        found = []
        for effect, names in (("read", self.reads), ("write", self.writes)):
            for name in names:
                value = arguments.get(name)
                value = defaults.get(name) if value is None else value
                if value is not None:
                    found.append((effect, str(value)))
        return found

    @property
    def none(self) -> bool:
        """Whether the tool declares it touches nothing (no file, no network)."""
        return not (self.reads or self.writes or self.network)


_lock = threading.Lock()
_declared: dict[str, Effects] = {}
_finders: list[Callable[[str], bool]] = []


def declare(name: str, effects: Effects) -> None:
    """Record that the tool ``name`` has ``effects`` (a later declaration replaces it)."""
    with _lock:
        _declared[name] = effects


def forget(name: str) -> None:
    """Drop the declaration of ``name`` (tests defining tools of their own)."""
    with _lock:
        _declared.pop(name, None)


def effects_of(name: str) -> Effects | None:
    """The effects the tool ``name`` declared (None: it declared none: a built-in,
    an MCP server's tool, or no tool at all)."""
    with _lock:
        return _declared.get(name)


def add_name_finder(finder: Callable[[str], bool]) -> None:
    """Also count as a tool name what ``finder`` says is one (a plugin's, unloaded)."""
    with _lock:
        if finder not in _finders:
            _finders.append(finder)


def known_tool(name: str) -> bool:
    """Whether a rule may name ``name``: a declared tool, or one a finder knows."""
    with _lock:
        if name in _declared:
            return True
        finders = list(_finders)
    return any(finder(name) for finder in finders)


__all__ = ["Effects", "add_name_finder", "declare", "effects_of", "forget", "known_tool"]

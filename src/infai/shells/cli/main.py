"""The whole ``infai`` command line: the root group with every command named.

This is the only module that knows every command module and names it to the
root (:mod:`.root`); command modules import neither the root nor each other's
groups, so there is no circle and a command can be tested on its own. A
command's module is imported only when that command runs (the root is a
:class:`~.root.LazyGroup`), and each command module imports only click and
the store at import time; the agent, the TUI and the server are imported
when their command runs, which keeps ``infai run`` and ``infai session …``
fast (``benchmarks/startup_bench.py`` measures it).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

import click

from .root import root

#: each command's name, and the module of this package and the name it is defined as
COMMANDS: dict[str, tuple[str, str]] = {
    "attach": ("attach", "attach_command"),
    "chat": ("agent", "chat"),
    "compact": ("agent", "compact_command"),
    "config": ("config_cmd", "config_group"),
    "login": ("remote", "login_command"),
    "logout": ("remote", "logout_command"),
    "plugins": ("plugins", "plugins_command"),
    "doctor": ("doctor", "doctor_command"),
    "import": ("imports", "import_command"),
    "mcp": ("mcp", "mcp_group"),
    "models": ("agent", "models_command"),
    "run": ("agent", "run"),
    "sandbox": ("doctor", "sandbox_group"),
    "search": ("search", "search_command"),
    "serve": ("serve", "serve_command"),
    "session": ("session", "session"),
    "store": ("store", "store_group"),
    "tui": ("tui", "tui"),
}


def load(name: str) -> click.Command:
    """The command ``name``, its module imported now (``session`` with the
    commands of files on the timeline added to it)."""
    module, attribute = COMMANDS[name]
    command: click.Command = getattr(import_module(f"{__package__}.{module}"), attribute)
    if name == "session" and isinstance(command, click.Group) and "files" not in command.commands:
        from .share import share_command
        from .workfiles import checkout_command, diff_command, files_command

        for sub in (files_command, diff_command, checkout_command, share_command):
            command.add_command(sub)
    return command


def _loader(name: str) -> Callable[[], click.Command]:
    return lambda: load(name)


def _remote_form(name: str) -> click.Command:
    """What ``--remote`` runs instead of ``infai NAME`` (:mod:`.remote_forms`)."""
    from .remote_forms import remote_command

    return remote_command(name)


root.lazy.update({name: _loader(name) for name in COMMANDS})
root.remote_forms = _remote_form

#: the assembled command line (``infai``)
main = root


def entry() -> None:
    """The console script ``infai`` (and ``python -m infai``)."""
    main()


__all__ = ["COMMANDS", "entry", "load", "main"]

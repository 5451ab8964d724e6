"""The whole ``infai`` command line: the root group with every command added.

This is the only module that imports every command module and adds it to the
root (:mod:`.root`); command modules import neither the root nor each other's
groups, so there is no circle and a command can be tested on its own. Each
command module imports only click and the store at import time; the agent,
the TUI and the server are imported when their command runs, which keeps
``infai session …`` fast.
"""

from __future__ import annotations

import click

from .agent import chat, compact_command, models_command, run
from .doctor import doctor_command, sandbox_group
from .imports import import_command
from .mcp import mcp_group
from .plugins import plugins_command
from .remote import login_command, logout_command, remote_command
from .root import root
from .search import search_command
from .serve import serve_command
from .session import session
from .share import share_command
from .store import store_group
from .tui import tui
from .workfiles import checkout_command, diff_command, files_command

COMMANDS: tuple[click.Command, ...] = (
    session,
    store_group,
    run,
    chat,
    compact_command,
    models_command,
    tui,
    serve_command,
    import_command,
    doctor_command,
    sandbox_group,
    search_command,
    mcp_group,
    login_command,
    logout_command,
    plugins_command,
)

root.remote_forms = remote_command  # what --remote runs instead
for _command in COMMANDS:
    root.add_command(_command)
for _command in (files_command, diff_command, checkout_command):  # files on the timeline
    session.add_command(_command)
session.add_command(share_command)  # one HTML file to hand on, secrets redacted

#: the assembled command line (``infai``)
main = root


def entry() -> None:
    """The console script ``infai`` (and ``python -m infai``)."""
    main()


__all__ = ["COMMANDS", "entry", "main"]

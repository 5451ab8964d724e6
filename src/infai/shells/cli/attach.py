"""``infai --remote URL`` with no command, and ``infai attach URL [SESSION]``: the
terminal UI against ``infai serve``.

The same app as plain ``infai`` (:class:`~infai.shells.tui.InfaiApp`), over a
server's sessions instead of a local store (:mod:`infai.shells.tui.remote_io`):
prompts, live deltas, approvals, Ctrl-C, the timeline, picking an event,
search and an event's files travel over the API. The token is ``--token``,
else ``$INFAI_SERVER_TOKEN``, else the one ``infai login URL`` kept. Before the
screen opens the server is asked for its sessions, so an unreachable server,
a refused token or an unknown session is a one-line error, not a broken UI;
so is a ``--dir`` the server refuses (a new session there is made first).
Closing the app leaves a turn running on the server (with its question, if
one waits): ``infai attach URL SESSION`` from any machine shows it again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from .common import echo
from .errors import BadInput, mapped_errors
from .tui import NOT_A_TERMINAL, stdin_is_terminal


def remote_tui(
    ctx: click.Context,
    url: str,
    token: str | None,
    session_id: str | None,
    resume: bool,
    server_dir: str | None = None,
) -> None:
    """Open the TUI over the server at ``url`` (``session_id``, or its newest with
    ``resume``, else a new session: in ``server_dir`` on the server if given)."""
    if server_dir is not None and (session_id is not None or resume):
        raise BadInput("--dir is where a new session works: not with SESSION or --continue")
    if server_dir is not None and not os.path.isabs(server_dir):
        raise BadInput(f"--dir {server_dir!r}: give an absolute directory of the server")
    if not stdin_is_terminal():
        raise BadInput(NOT_A_TERMINAL)
    from infai.shells.remote.session import RemoteHarness
    from infai.store import default_home

    from ..tui import InfaiApp
    from ..tui.remote_io import RemoteBackend, new_session
    from .remote import connect, guard

    client = connect(url, token)
    ctx.call_on_close(client.close)
    listed: list[dict[str, Any]] = guard(lambda: client.get("/sessions"))["sessions"]
    if session_id is None and resume:
        if not listed:
            raise BadInput(f"--continue: {client.url} has no session yet")
        session_id = str(listed[0]["id"])
    if session_id is not None:
        sid = session_id
        guard(lambda: client.get(f"/sessions/{sid}"))  # an unknown one: said now
    made = None
    if server_dir is not None:  # made now: a directory the server refuses is said here
        made = str(guard(lambda: new_session(client, server_dir))["id"])
    home = ctx.find_root().params.get("home") or default_home()
    space = RemoteHarness(client, Path(home), Path(os.getcwd()), server_dir)
    backend = RemoteBackend(made)  # `made` goes away again if it is left unused
    app = InfaiApp(space, session_id or made, backend=backend)
    app.run()
    if app.left_session is not None:
        echo(
            f"infai: session {app.left_session} on {client.url}; come back with: "
            f"infai attach {url} {app.left_session}",
            err=True,
        )


@click.command("attach")
@click.argument("url")
@click.argument("session_id", metavar="[SESSION]", required=False)
@click.option("--token", help="The server's token (default: $INFAI_SERVER_TOKEN, else login).")
@click.option("--continue", "resume", is_flag=True, help="Open the server's newest session.")
@click.option(
    "--dir",
    "server_dir",
    metavar="DIR",
    help="A new session works in DIR on the server (an existing absolute directory there).",
)
@mapped_errors
@click.pass_context
def attach_command(
    ctx: click.Context,
    url: str,
    session_id: str | None,
    token: str | None,
    resume: bool,
    server_dir: str | None,
) -> None:
    """The terminal UI against `infai serve` at URL (as `infai --remote URL`)."""
    remote_tui(ctx, url, token, session_id, resume, server_dir)


__all__ = ["attach_command", "remote_tui"]

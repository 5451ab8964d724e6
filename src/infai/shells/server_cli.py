"""``infai serve``: the command, kept light so that registering it costs the CLI nothing.

The server's modules (Starlette, uvicorn) are imported only when the command
runs. It listens on loopback unless ``--allow-remote`` says otherwise: the
token is then all that stands between the network and the tools.
"""

from __future__ import annotations

import ipaddress
import os
from contextlib import suppress
from pathlib import Path

import click

from infai.store import SessionStore, Store

from .cli import BadInput

DEFAULT_PORT = 8421


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Permit an address other than loopback (the token is then all that guards your files).",
)
@click.option(
    "--token",
    envvar="INFAI_SERVER_TOKEN",
    help="Bearer token (default: $INFAI_SERVER_TOKEN, else made once and kept in "
    "HOME/server-token with mode 0600).",
)
@click.option(
    "--model",
    "model_name",
    help="The model of sessions that name none (default: the config's 'model', else offline).",
)
@click.option(
    "--allow", multiple=True, metavar="RULE", help="Allow calls matching 'TOOL [PATTERN]'."
)
@click.option(
    "--approval-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds a permission question waits for an answer before it is denied.",
)
@click.option(
    "--idle-close",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    help="Seconds before a session nobody uses is closed, freeing it for other "
    "programs (0: keep sessions open).",
)
@click.option(
    "--lock-timeout",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Seconds to wait for a session that another process is writing.",
)
@click.pass_obj
def serve_command(
    store: SessionStore,
    host: str,
    port: int,
    allow_remote: bool,
    token: str | None,
    model_name: str | None,
    allow: tuple[str, ...],
    approval_timeout: float,
    idle_close: float,
    lock_timeout: float,
) -> None:
    """Serve the HTTP API (with live Server-Sent Events) until interrupted."""
    from infai.store import StoreOptions

    from .agent_cli import workspace
    from .server import create_app
    from .server.auth import TokenError, load_token
    from .server.run import InfaiServer, bind, uvicorn_config

    if not (allow_remote or is_loopback(host)):
        raise BadInput(
            f"refusing to listen on {host}: not a loopback address; give --allow-remote "
            "if other machines should reach this server"
        )
    space = workspace(store, Path(os.getcwd()), model_name, allow)  # config, model, rules
    try:
        secret, where = load_token(store.home, token)
    except (TokenError, ValueError) as exc:
        raise BadInput(str(exc)) from None
    if isinstance(store, Store):  # the file store, with the server's lock timeout
        options = StoreOptions(durability=store.options.durability, lock_timeout=lock_timeout)
        store = Store(store.home, options=options)
    app = create_app(
        store,
        token=secret,
        model_factory=lambda name: space.build_model(name or space.model_name),
        rules=space.rules,
        approval_timeout=approval_timeout,
        working_dir=space.working_dir,
        compact_at=space.config.compact_at,
        idle_close=idle_close or None,
    )
    try:
        sock = bind(host, port)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    click.echo(
        f"infai: serving http://{shown}:{sock.getsockname()[1]}/v1 (token: {where})", err=True
    )
    server = InfaiServer(uvicorn_config(app, timeout_graceful_shutdown=10), app.state.sessions)
    with suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    click.echo("infai: server stopped", err=True)


def register(group: click.Group) -> None:
    """Add ``serve`` to the ``infai`` command group."""
    group.add_command(serve_command)

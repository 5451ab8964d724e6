"""``infai serve``: the command, kept light so that adding it costs the CLI nothing.

The server's modules (Starlette, uvicorn) are imported only when the command
runs. It listens on loopback unless ``--allow-remote`` says otherwise: the
token is then all that stands between the network and the tools. Without
``--allow-remote`` it also answers only requests whose ``Host`` header names it
by a loopback name and its port (a web page cannot reach it through DNS
rebinding); with it, any ``Host`` is accepted, and the start line says which.

The store is the command line's own (:func:`~.common.store_of`, every root
option kept), opened with a shorter lock timeout by default: a request should
not wait long for a session another program is writing. The token lives in the
store's home, which ``--home`` names even when sessions live in a database.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from contextlib import suppress
from pathlib import Path
from typing import Any

import click

from infai.store import SessionStore

from .common import StoreSpec, echo, store_of
from .errors import BadInput, mapped_errors

DEFAULT_PORT = 8421
SERVE_LOCK_TIMEOUT = 2.0


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 possibly in brackets) is this machine only."""
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
    help="Permit an address other than loopback, and any Host header (the token is then "
    "all that guards your files).",
)
@click.option(
    "--token",
    envvar="INFAI_SERVER_TOKEN",
    help="Bearer token (default: $INFAI_SERVER_TOKEN, else made once and kept in "
    "HOME/server-token with mode 0600). On the command line every local user can read "
    "it in the process list: prefer --token-file or the variable.",
)
@click.option(
    "--token-file",
    metavar="PATH",
    help="Read the bearer token from PATH (mode 0600 or stricter; '-': standard input).",
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
    help="Seconds before a session nobody uses is closed (0: keep sessions open). "
    "Its writer is released whenever a turn ends, so other programs can write to it "
    "between turns.",
)
@click.option(
    "--lock-timeout",
    type=click.FloatRange(min=0),
    help="Seconds to wait for a session that another process is writing "
    f"(default: infai's --lock-timeout, else {SERVE_LOCK_TIMEOUT:g}).",
)
@mapped_errors
@click.pass_context
def serve_command(
    ctx: click.Context,
    host: str,
    port: int,
    allow_remote: bool,
    token: str | None,
    token_file: str | None,
    model_name: str | None,
    allow: tuple[str, ...],
    approval_timeout: float,
    idle_close: float,
    lock_timeout: float | None,
) -> None:
    """Serve the HTTP API (with live Server-Sent Events) until interrupted."""
    from ..server.run import InfaiServer, bind, uvicorn_config
    from .agent import harness

    if not (allow_remote or is_loopback(host)):
        raise BadInput(
            f"refusing to listen on {host}: not a loopback address; give --allow-remote "
            "if other machines should reach this server"
        )
    token = given_token(ctx, token, token_file)
    store = serve_store(ctx, lock_timeout)
    space = harness(store, Path(os.getcwd()), model_name, allow)  # config, model, rules
    secret, where = server_token(store, token)
    app = build_app(store, space, secret, approval_timeout, idle_close, allow_remote)
    try:
        sock = bind(host, port)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    port = sock.getsockname()[1]
    echo(f"infai: serving http://{shown}:{port}/v1 (token: {where})", err=True)
    echo(f"infai: {accepted_hosts(allow_remote, port)}", err=True)
    echo(f"infai: the web page is http://{shown}:{port}/ (log in with the token)", err=True)
    server = InfaiServer(uvicorn_config(app, timeout_graceful_shutdown=10), app.state.sessions)
    with suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    echo("infai: server stopped", err=True)


def accepted_hosts(allow_remote: bool, port: int) -> str:
    """What the start line says of the ``Host`` headers the server answers."""
    if allow_remote:
        return "accepting any Host header (--allow-remote): the token guards this server"
    return f"accepting Host localhost, 127.0.0.1 or [::1] on port {port} only (DNS rebinding)"


def serve_store(ctx: click.Context, lock_timeout: float | None) -> SessionStore:
    """The command line's store, with serve's lock timeout unless infai was given one."""
    spec = ctx.find_root().find_object(StoreSpec)
    if lock_timeout is None:
        given = spec.lock_timeout if spec is not None else None
        lock_timeout = SERVE_LOCK_TIMEOUT if given is None else given
    return store_of(ctx, lock_timeout=lock_timeout)


#: what ``--token`` on the command line draws, on stderr
TOKEN_ARGV_WARNING = (
    "infai: warning: --token puts the token in the process list, where every local "
    "user can read it; give it by --token-file PATH ('-': standard input) or "
    "$INFAI_SERVER_TOKEN"
)


def given_token(ctx: click.Context, token: str | None, token_file: str | None) -> str | None:
    """The token the user gave: ``--token-file``'s contents, else ``--token`` (from
    the command line, with a warning on stderr: ``ps`` shows it to every local
    user; or from ``$INFAI_SERVER_TOKEN``), else None (the home's file)."""
    from click.core import ParameterSource

    on_line = ctx.get_parameter_source("token") is ParameterSource.COMMANDLINE
    if token_file is None:
        if on_line:
            echo(TOKEN_ARGV_WARNING, err=True)
        return token
    if on_line:
        raise BadInput("give the token by --token or by --token-file, not both")
    if token_file == "-":
        return sys.stdin.read(4096)
    try:
        fd = os.open(token_file, os.O_RDONLY)
        try:
            mode = os.fstat(fd).st_mode & 0o777
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError as exc:
        raise BadInput(f"--token-file {token_file}: cannot read: {exc.strerror}") from None
    if mode & 0o077:
        raise BadInput(
            f"--token-file {token_file}: readable by others (mode {mode:o}): chmod 600 it"
        )
    return data.decode(errors="replace")


def server_token(store: SessionStore, given: str | None) -> tuple[str, str]:
    """The bearer token and where it came from: ``given``, else ``<home>/server-token``."""
    from ..server.auth import TokenError, load_token

    try:
        return load_token(store.home, given)
    except TokenError as exc:
        raise BadInput(str(exc)) from None


def build_app(
    store: SessionStore,
    space: Any,
    secret: str,
    approval_timeout: float,
    idle_close: float,
    allow_remote: bool = False,
) -> Any:
    """The server application over the command line's harness (config, model,
    rules): the app opens every session through it, and closes it when it stops.
    ``allow_remote``: any ``Host`` header is accepted, not only loopback names."""
    from ..server import create_app
    from ..server.hosts import LOOPBACK_HOSTS

    return create_app(
        store,
        token=secret,
        harness=space,
        approval_timeout=approval_timeout,
        working_dir=space.working_dir,
        idle_close=idle_close or None,
        hosts=None if allow_remote else LOOPBACK_HOSTS,
    )


__all__ = [
    "DEFAULT_PORT",
    "SERVE_LOCK_TIMEOUT",
    "accepted_hosts",
    "build_app",
    "given_token",
    "is_loopback",
    "serve_command",
]

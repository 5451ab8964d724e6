"""``infai session share SESSION --html FILE``: the session as one HTML file to hand on.

One self-contained file (no script, no external resource: its own
Content-Security-Policy allows only its one style sheet, by hash): the session's
branch tree with HEAD, the active path's conversation, tool calls and results
folded in ``<details>``, and events off the path folded in the tree. Every
string is redacted first (:mod:`infai.shells.redact`: the secret variables'
values, known token shapes, the home directory) and then HTML-escaped; labels
are cut after redaction, so a cut never leaves half a secret behind. What was
redacted, counted by kind, is printed and shown at the top of the file. The
file is written whole or not at all (as ``session export -o``).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from infai.store import SessionStore

from ..redact import Redactor, secret_values
from ..share_html import shared_html
from .common import echo, pass_store
from .errors import mapped_errors
from .session import write_whole


def _secrets(working_dir: str | None) -> dict[str, str]:
    """The values of the variables infai keeps from commands (built in, configured,
    the models' key variables), as this user's configuration names them."""
    from infai.agent import load_config
    from infai.tools import Sandbox

    where = Path(working_dir) if working_dir and Path(working_dir).is_dir() else Path.cwd()
    config = load_config(where)
    keys = tuple(spec.key_env for spec in config.models.values() if spec.key_env)
    return secret_values(Sandbox(config.sandbox, secret_env=keys).is_secret)


@click.command("share")
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--html",
    "html_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HTML file to write.",
)
@mapped_errors
@pass_store
def share_command(store: SessionStore, session_id: str, html_path: Path) -> None:
    """Write SESSION as one self-contained HTML file, secrets redacted."""
    info = store.info(session_id)
    redactor = Redactor(_secrets(info.working_dir), os.path.expanduser("~"))
    html, count = shared_html(store, session_id, redactor)
    try:
        write_whole(html_path, [html.encode()])
    except OSError as exc:
        raise click.ClickException(f"cannot write {html_path}: {exc.strerror or exc}") from None
    echo(f"shared {count} events of session {info.id} in {html_path}")
    echo("redacted:")
    for line in redactor.summary():
        echo(f"  {line}")


__all__ = ["share_command"]

"""``infai plugins``: the installed plugins, and whether each one loads.

Every entry point in infai's groups (``infai.tools``, ``infai.providers``,
``infai.context``, ``infai.hooks``: :mod:`infai.agent.plugins`) is listed with
the package that declares it and that package's version, after loading it, so
a broken plugin shows here with the reason (an import error, a wrong type), in
one line. Exit code 0 even then: a broken plugin is skipped everywhere else
too; ``--check`` makes it exit 1 instead (for scripts and CI).
"""

from __future__ import annotations

import sys

import click

from .common import echo, emit_json, json_option
from .errors import mapped_errors


@click.command("plugins")
@json_option
@click.option("--check", is_flag=True, help="Exit 1 if any plugin fails to load.")
@mapped_errors
def plugins_command(as_json: bool, check: bool) -> None:
    """List the installed plugins (tools, providers, context rules, hook handlers)."""
    from infai.agent import plugin_report

    rows = plugin_report()
    if as_json:
        emit_json(
            [
                {
                    "name": row.name,
                    "group": row.group,
                    "value": row.value,
                    "package": row.package,
                    "version": row.version,
                    "status": row.status,
                    "error": row.error or None,
                }
                for row in rows
            ]
        )
    elif not rows:
        echo(
            "no plugins installed (entry points in infai.tools, infai.providers, "
            "infai.context, infai.hooks)",
            err=True,
        )
    for row in rows if not as_json else ():
        status = "ok" if row.status == "ok" else f"error: {row.error}"
        echo(f"{row.group:<16} {row.name:<20} {row.package} {row.version}  {status}")
    if check and any(row.status == "error" for row in rows):
        sys.exit(1)


__all__ = ["plugins_command"]

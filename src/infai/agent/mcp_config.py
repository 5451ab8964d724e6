"""The ``[mcp.servers.NAME]`` tables of the configuration files, checked.

Each table describes one MCP server (:class:`~infai.tools.mcp.ServerConfig`):
a program to start (``command``, ``args``, ``env``, ``cwd``, ``network``) or
a URL to connect to (``url``, ``headers``), and, for either, ``enabled``,
``include_tools``/``exclude_tools``, ``startup_timeout``, ``call_timeout``
(seconds) and ``trust_read_only``. ``env`` and ``headers`` values may name
an environment variable as ``${NAME}``. The user's file and the project's
are read in that order; a project's table replaces the user's of the same
name. A project's servers are programs and addresses its repository chose, so
they start only where the user trusts the project (``trusted_projects``);
elsewhere they are left out with a warning. A table infai cannot use is a
:class:`~infai.agent.config.ConfigError` naming the file and the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infai.tools.mcp import ServerConfig
from infai.tools.mcp.config import MAX_SERVER_NAME, SERVER_NAME

#: each key a server table may hold, and what its value must be
KEYS = {
    "command": "a string",
    "args": "a list of strings",
    "env": "a table of strings",
    "cwd": "a string",
    "url": "a string",
    "headers": "a table of strings",
    "enabled": "true or false",
    "include_tools": "a list of strings",
    "exclude_tools": "a list of strings",
    "startup_timeout": "a positive number of seconds",
    "call_timeout": "a positive number of seconds",
    "network": "true or false",
    "trust_read_only": "true or false",
}
STDIO_ONLY = ("args", "env", "cwd", "network")


def _fits(kind: str, value: Any) -> bool:
    if kind == "a string":
        return isinstance(value, str) and bool(value)
    if kind == "a list of strings":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "a table of strings":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    if kind == "true or false":
        return isinstance(value, bool)
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def parse_server(path: Path, name: str, table: Any) -> ServerConfig:
    """One ``[mcp.servers.NAME]`` table of ``path``; ValueError names the key."""
    where = f"mcp.servers.{name}"
    if not SERVER_NAME.match(name) or len(name) > MAX_SERVER_NAME:
        raise ValueError(
            f"{where}: a server's name is letters, digits, '-' and single '_' "
            f"(at most {MAX_SERVER_NAME}), so its tools can be named mcp__{{server}}__{{tool}}"
        )
    if not isinstance(table, dict):
        raise ValueError(f"{where}: must be a table")
    for key, value in table.items():
        kind = KEYS.get(key)
        if kind is None:
            raise ValueError(f"{where}: unknown key {key!r} (known: {', '.join(KEYS)})")
        if not _fits(kind, value):
            raise ValueError(f"{where}.{key}: must be {kind}, not {value!r}")
    if ("command" in table) == ("url" in table):
        raise ValueError(f"{where}: give either command (a program) or url (an HTTP server)")
    if "url" in table:
        if not str(table["url"]).startswith(("http://", "https://")):
            raise ValueError(f"{where}.url: must start with http:// or https://")
        extra = [key for key in STDIO_ONLY if key in table]
        if extra:
            raise ValueError(f"{where}: {', '.join(extra)} apply to a command, not a url")
    elif "headers" in table:
        raise ValueError(f"{where}.headers: apply to a url, not a command")
    return ServerConfig(
        name=name,
        command=table.get("command"),
        args=tuple(table.get("args", ())),
        env=dict(table.get("env", {})),
        cwd=table.get("cwd"),
        url=table.get("url"),
        headers=dict(table.get("headers", {})),
        enabled=table.get("enabled", True),
        include_tools=tuple(table.get("include_tools", ())),
        exclude_tools=tuple(table.get("exclude_tools", ())),
        startup_timeout=float(table.get("startup_timeout", 30.0)),
        call_timeout=float(table.get("call_timeout", 120.0)),
        network=table.get("network", False),
        trust_read_only=table.get("trust_read_only", False),
        source=path,
    )


def parse_mcp(path: Path, value: Any) -> dict[str, ServerConfig]:
    """The ``mcp`` table of ``path``: its servers by name; ValueError names the key."""
    if not isinstance(value, dict):
        raise ValueError("mcp: must be a table (with a servers table)")
    unknown = [key for key in value if key != "servers"]
    if unknown:
        raise ValueError(f"mcp: unknown key {unknown[0]!r} (known: servers)")
    servers = value.get("servers", {})
    if not isinstance(servers, dict):
        raise ValueError("mcp.servers: must be a table of tables")
    return {name: parse_server(path, name, table) for name, table in servers.items()}


__all__ = ["parse_mcp", "parse_server"]

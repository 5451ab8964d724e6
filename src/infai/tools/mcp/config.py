"""What one MCP server is, as the configuration describes it, and the names its tools get.

A server is reached one of two ways: a **stdio** server is a program infai
starts (``command``, ``args``, ``env``, ``cwd``) and talks to over its stdin
and stdout, always inside the sandbox of :mod:`infai.tools.sandbox` (no
network unless ``network``); a **streamable HTTP** server is a URL (``url``,
``headers``) infai connects to. A value in ``env`` or ``headers`` may name
an environment variable of infai's as ``${NAME}`` (``"Bearer ${GITHUB_TOKEN}"``):
it is filled in when the server starts, so the secret stays out of the file;
a variable that is not set keeps that server from starting, and says so.

Tool names: the model sees each tool as ``mcp__SERVER__TOOL``. Providers
accept names of ``[A-Za-z0-9_-]`` up to 64 characters, so every other
character of the server's tool name becomes ``_``, and a name that would be
longer is cut and ends in 8 hex digits of a hash of the tool's own name (so
two long names stay apart). A server's name is checked when the configuration
is read (:data:`SERVER_NAME`): letters, digits, ``-`` and single ``_``, so the
``__`` separators are unambiguous and a rule such as ``mcp__github__*`` covers
exactly that server.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

#: every MCP tool's name starts with this
PREFIX = "mcp__"
#: what a configured server's name must look like
SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*$")
MAX_SERVER_NAME = 32
#: the longest tool name providers accept
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class MissingVariable(Exception):
    """A configured value names an environment variable that is not set."""


@dataclass(frozen=True)
class ServerConfig:
    """One ``[mcp.servers.NAME]`` table, checked (see the module docstring).

    Exactly one of ``command`` (stdio) and ``url`` (streamable HTTP) is set.
    ``include_tools``/``exclude_tools`` are globs over the server's own tool
    names (empty include: all). ``trust_read_only``: a tool the server
    annotates ``readOnlyHint`` is allowed without asking (rules still win).
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    include_tools: tuple[str, ...] = ()
    exclude_tools: tuple[str, ...] = ()
    startup_timeout: float = 30.0
    call_timeout: float = 120.0
    network: bool = False
    trust_read_only: bool = False
    #: the file it came from (for messages)
    source: Path | None = None

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "stdio" if self.command is not None else "http"

    def offers(self, tool: str) -> bool:
        """Whether the server's tool ``tool`` passes include_tools/exclude_tools."""
        if self.include_tools and not any(fnmatchcase(tool, p) for p in self.include_tools):
            return False
        return not any(fnmatchcase(tool, p) for p in self.exclude_tools)

    def working_dir(self, root: Path) -> Path:
        """Where a stdio server runs: ``cwd`` (relative to ``root``), else ``root``."""
        return (root / Path(self.cwd).expanduser()).resolve() if self.cwd else root


def tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``server``'s tool ``tool`` (module docstring)."""
    name = f"{PREFIX}{server}__{_UNSAFE.sub('_', tool) or '_'}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(tool.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def expand(value: str, environ: Mapping[str, str] | None = None) -> str:
    """``value`` with each ``${NAME}`` replaced by that variable (MissingVariable
    names the first one not set)."""
    source = os.environ if environ is None else environ

    def one(match: re.Match[str]) -> str:
        found = source.get(match.group(1))
        if found is None:
            raise MissingVariable(f"${{{match.group(1)}}} is not set")
        return found

    return _VARIABLE.sub(one, value)


def expand_all(what: str, values: Mapping[str, str]) -> dict[str, str]:
    """Every value of ``values`` expanded; MissingVariable names ``what`` and the key."""
    out = {}
    for key, value in values.items():
        try:
            out[key] = expand(value)
        except MissingVariable as exc:
            raise MissingVariable(f"{what} {key}: {exc}") from None
    return out


__all__ = [
    "MAX_NAME",
    "PREFIX",
    "SERVER_NAME",
    "MissingVariable",
    "ServerConfig",
    "expand",
    "expand_all",
    "tool_name",
]

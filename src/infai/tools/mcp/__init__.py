"""MCP tool servers: their tools offered to the model behind the same policy and sandbox.

A configured server (:class:`ServerConfig`: a stdio program infai starts in the
sandbox, or a streamable-HTTP URL) is connected with the official ``mcp`` SDK
by an :class:`McpHub`, which the toolbox consults as a
:class:`~infai.tools.base.ToolSource`: each usable tool appears as
``mcp__SERVER__TOOL`` (:func:`tool_name`), runs through the permission policy
like every tool, and answers with a typed :class:`~infai.tools.base.ToolOutput`.
:mod:`.config` names things, :mod:`.adapt` checks schemas and types results,
:mod:`.connection` keeps one server up, :mod:`.hub` brings them together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import PREFIX, MissingVariable, ServerConfig, tool_name

if TYPE_CHECKING:
    from .hub import McpHub, McpTool

#: the names that load the ``mcp`` SDK: imported when first used (a configured
#: server is connected), so a command with no MCP server never pays for the SDK
_LAZY = frozenset({"McpHub", "McpTool"})


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import hub

    return getattr(hub, name)


__all__ = ["PREFIX", "McpHub", "McpTool", "MissingVariable", "ServerConfig", "tool_name"]

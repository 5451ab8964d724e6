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

from .config import PREFIX, MissingVariable, ServerConfig, tool_name
from .hub import McpHub, McpTool

__all__ = ["PREFIX", "McpHub", "McpTool", "MissingVariable", "ServerConfig", "tool_name"]

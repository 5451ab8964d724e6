"""``infai mcp ls`` and ``infai mcp call``: the configured MCP servers, from the command line.

``ls`` starts every enabled server of the working directory's configuration
(the user's file, and a trusted project's), lists each with its state, its
tools and why any tool is unavailable, and stops them again; a server that
cannot start says why in one line (a configuration file infai cannot use is
an error naming the file and the key, before anything starts).

``call SERVER TOOL --args JSON`` calls one tool, for debugging, through the
same permission policy as the agent: the configured rules and ``--allow``
decide; what they say to ask about is asked on a terminal and refused
otherwise. Whatever a server says (names, descriptions, results, errors) is
printed inert. It exits 0 when the tool answered, 1 when it failed or was
refused, 2 on bad input.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from infai.store import SessionStore

from ..inert import inert_json
from .agent import allow_option, harness
from .common import echo, emit_json, json_option, pass_store
from .errors import BadInput, mapped_errors

if TYPE_CHECKING:
    from infai.agent import Harness
    from infai.tools import Ask, Reply


@click.group("mcp")
def mcp_group() -> None:
    """MCP tool servers: list them, call a tool."""


def _state(row: dict[str, Any]) -> str:
    state = str(row["state"])
    if row["problem"] and state != "ready":
        state += f": {row['problem']}"
    elif row["confined"] is False:
        state += " (not sandboxed)"
    return state


@mcp_group.command("ls")
@json_option
@pass_store
@mapped_errors
def mcp_ls(store: SessionStore, as_json: bool) -> None:
    """List the servers, their state and tools (each enabled server is started)."""
    space = harness(store, Path.cwd(), "offline")

    async def main() -> list[dict[str, Any]]:
        hub = space.mcp()
        try:
            if hub is None:
                return []
            await hub.prepare()
            return hub.status()
        finally:
            await space.aclose()

    rows = asyncio.run(main())
    if as_json:
        emit_json(rows)
        return
    if not rows:
        echo("no MCP servers configured ([mcp.servers.NAME] in your config)")
    for row in rows:
        echo(f"{row['name']}  {row['transport']}  {_state(row)}  {row['target']}")
        for tool in row["tools"]:
            echo(f"  {tool['name']}" + ("  (read-only)" if tool["read_only"] else ""))
        for tool in row["unavailable"]:
            echo(f"  unavailable: {tool['remote']}: {tool['why']}")


async def _ask_on_terminal(ask: Ask) -> Reply:
    """Ask on the terminal (run in a worker thread: input blocks)."""

    def prompt() -> Reply:
        echo(f"{ask.tool} wants to run: {ask.reason}", err=True)
        echo(f"  arguments: {inert_json(dict(ask.arguments))}", err=True)
        answer = click.prompt("allow? [y]es / [n]o", default="n", err=True, show_default=False)
        return "allow" if answer.strip().lower() in ("y", "yes") else "deny"

    return await asyncio.to_thread(prompt)


@mcp_group.command("call")
@click.argument("server")
@click.argument("tool")
@click.option("--args", "args_json", default="{}", help="The tool's arguments, a JSON object.")
@allow_option
@json_option
@pass_store
@mapped_errors
def mcp_call(
    store: SessionStore,
    server: str,
    tool: str,
    args_json: str,
    allow: tuple[str, ...],
    as_json: bool,
) -> None:
    """Call TOOL of SERVER (through the permission policy)."""
    try:
        arguments = json.loads(args_json)
    except json.JSONDecodeError as exc:
        raise BadInput(f"--args: not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise BadInput("--args: must be a JSON object")
    approver = _ask_on_terminal if sys.stdin is not None and sys.stdin.isatty() else None
    space = harness(store, Path.cwd(), "offline", allow, approver)
    output = asyncio.run(_call(space, server, tool, arguments))
    if as_json:
        emit_json(output)
    else:
        echo(output["content"], err=output["is_error"])
    if output["is_error"]:
        sys.exit(1)


async def _call(
    space: Harness, server: str, tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    from infai.tools import ToolContext

    hub = space.mcp()
    try:
        if hub is None or server not in hub.servers:
            raise BadInput(f"no MCP server {server!r} is configured here (`infai mcp ls`)")
        policy = space.policy()
        policy.defaults = hub.default_allow
        for notice in await hub.prepare(server):
            echo(f"infai: {notice}", err=True)
        found = hub.tool(server, tool)
        if found is None:
            missing = f"server {server!r} offers no usable tool {tool!r} (`infai mcp ls`)"
            return {"content": missing, "is_error": True}
        context = ToolContext(space.working_dir, "")
        decision = await policy.decide(found.spec.name, arguments, context)
        verdict = {"verdict": decision.verdict, "by": decision.by, "reason": decision.reason}
        if not decision.allowed:
            content = decision.denial()
            return {"content": content, "is_error": True, "permission": verdict}
        output = await found.run(arguments, context)
        return {
            "content": output.content,
            "is_error": output.is_error,
            "metadata": output.metadata,
            "permission": verdict,
        }
    finally:
        await space.aclose()


__all__ = ["mcp_group"]

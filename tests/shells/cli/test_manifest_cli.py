"""``infai session show`` of a reply shows the tools its request offered: names and
descriptions (inert: an MCP server's text is not trusted), schemas in --json, and a
manifest that is gone is one clear line naming it (issue 16)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from infai.agent import MANIFEST_KEY, AgentSession, manifest_of
from infai.llm import ScriptedModel, ToolSpec
from infai.shells.cli import main
from infai.shells.render import TOOL_MANIFEST
from infai.store import Store
from infai.tools import AllowAll, Toolbox, ToolContext, ToolOutput

HOSTILE = "Lists issues.\n\x1b]0;pwned\x07\x1b[2J then \u202edesrever"


class Tool:
    def __init__(self, name: str, description: str) -> None:
        self.spec = ToolSpec(
            name, description, {"type": "object", "properties": {"q": {"type": "string"}}}
        )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        return ToolOutput("")


def a_reply(home: Path, work: Path) -> tuple[str, str, str]:
    """A session with one turn; its id, the reply's id and the manifest's digest."""
    store = Store(home)
    sid = store.create_session(working_dir=str(work)).id
    tools = Toolbox([Tool("mcp__gh__list_issues", HOSTILE), Tool("echo", "Echo.")])

    async def go() -> None:
        session = AgentSession(
            store, sid, model=ScriptedModel(["hello"]), toolbox=tools, permissions=AllowAll()
        )
        async with session:
            async for _ in session.prompt("hi"):
                pass

    asyncio.run(go())
    with store.open_reader(sid) as reader:
        reply = reader.event(reader.head or "")
    digest = manifest_of(reply)
    store.close()
    assert digest is not None
    return sid, reply.id, digest


def show(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), "session", "show", *args])
    assert result.exit_code == code, (result.output, result.exception)
    return result


def test_show_prints_the_tools_offered_inert(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sid, reply, digest = a_reply(home, tmp_path)
    out = show(home, sid, reply).stdout
    assert f"tools offered (2 tools, manifest {digest}):" in out
    listed = out.split("tools offered", 1)[1].splitlines()
    assert listed[1:] == [
        "  echo",
        "    Echo.",
        "  mcp__gh__list_issues",
        "    Lists issues.",
        "    \\x1b]0;pwned\\x07\\x1b[2J then \\u202edesrever",
    ]
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out


def test_show_json_carries_the_schemas(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sid, reply, digest = a_reply(home, tmp_path)
    raw = show(home, sid, reply, "--json").stdout
    assert "\x1b" not in raw
    shown = json.loads(raw)
    assert shown["record"]["metadata"][MANIFEST_KEY] == digest
    assert shown["tool_manifest"]["digest"] == digest
    tools = shown["tool_manifest"]["tools"]
    assert [t["name"] for t in tools] == ["echo", "mcp__gh__list_issues"]
    assert tools[1]["description"] == HOSTILE
    assert tools[0]["parameters"]["properties"] == {"q": {"type": "string"}}


def test_an_event_without_a_manifest_shows_as_before(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sid, _, _ = a_reply(home, tmp_path)
    with Store(home).open_reader(sid) as reader:
        prompt = next(e for e in reader.path() if e.role == "user")
    out = show(home, sid, prompt.id).stdout
    assert "tools offered" not in out
    assert "tool_manifest" not in json.loads(show(home, sid, prompt.id, "--json").stdout)


def test_a_removed_manifest_is_one_line_naming_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sid, reply, digest = a_reply(home, tmp_path)
    store = Store(home)
    store.objects.remove([digest])
    store.close()
    result = show(home, sid, reply, code=1)
    assert reply in result.stdout  # the event itself is still shown
    assert result.stderr.strip() == (
        f"Error: event {reply}: its tool manifest {digest} is not in the store "
        "(removed, or the session was imported without it)"
    )
    assert "Traceback" not in result.output
    show(home, sid, reply, "--json", code=1)


def test_a_damaged_manifest_is_reported_as_corruption(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sid, reply, digest = a_reply(home, tmp_path)
    store = Store(home)
    conn = store.objects._connect()
    conn.execute("UPDATE objects SET data = ? WHERE digest = ?", (b"{}", digest))
    store.close()
    result = show(home, sid, reply, code=1)
    assert digest in result.stderr and "does not match its content" in result.stderr


def test_the_cli_names_the_agents_manifest_key() -> None:
    assert TOOL_MANIFEST == MANIFEST_KEY  # show loads the agent only for events with one

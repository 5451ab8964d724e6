"""F1 help lists this directory's MCP servers and their tools, as `infai mcp ls` does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from infai.llm import ScriptedModel
from infai.shells.tui import InfaiApp
from infai.shells.tui.modals import HelpScreen, mcp_listing
from tui_pilot import SIZES, harness, inside_screen, run_app, until


@pytest.mark.parametrize("size", SIZES)
def test_f1_lists_the_mcp_servers(tmp_path: Path, size: tuple[int, int]) -> None:
    Path(os.environ["INFAI_CONFIG"]).write_text(
        '[mcp.servers.demo]\ncommand = "demo-mcp-server"\nargs = ["stdio"]\n'
    )
    app = InfaiApp(harness(tmp_path, ScriptedModel(["ok"])))

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        shown = str(app.screen.query_one("#mcp", Static).render())
        assert "MCP servers" in shown and "demo  not started yet" in shown
        assert inside_screen(app, "HelpScreen > Vertical")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen), "the help to close")

    run_app(app, scenario, size)


def test_without_mcp_servers_the_help_has_no_such_part(tmp_path: Path) -> None:
    app = InfaiApp(harness(tmp_path, ScriptedModel(["ok"])))

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        assert not app.screen.query("#mcp")

    run_app(app, scenario, (80, 24))


def test_the_listing_shows_what_servers_said_inert() -> None:
    rows = [
        {
            "name": "gh",
            "state": "down",
            "problem": "exited \x1b[31m at once",
            "tools": [{"name": "mcp__gh__list\x07"}],
            "unavailable": [{"remote": "bad", "why": "schema \x1b]0;x\x07 is not an object"}],
        }
    ]
    plain = mcp_listing(rows).plain
    assert "\x1b" not in plain and "\x07" not in plain
    assert "gh  down, 1 tools" in plain and "bad: schema" in plain

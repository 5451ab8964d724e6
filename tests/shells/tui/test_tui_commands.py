"""Slash commands and dialogs: rename, help, unknown commands, and switching the model.

Driven by Textual's pilot at 80x24 and at a small 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from infai.llm import ScriptedModel
from infai.shells.tui import InfaiApp
from infai.shells.tui.modals import HelpScreen, RenameScreen
from infai.shells.tui.panels import PendingBar, StatusBar, Timeline
from tui_pilot import SIZES, ClosingModel, harness, run_app, send, until, walk


@pytest.mark.parametrize("size", SIZES)
def test_rename_help_and_commands(tmp_path: Path, size: tuple[int, int]) -> None:
    space = harness(tmp_path, ScriptedModel(["x"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, RenameScreen))
        await pilot.press(*"demo", "enter")
        await until(pilot, lambda: not isinstance(app.screen, RenameScreen))
        assert app.session is not None
        assert space.store.info(app.session.session_id).name == "demo"
        await send(pilot, "/help")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await send(pilot, "/model nope")
        await until(pilot, lambda: any("unknown model" in n.message for n in app._notifications))
        await send(pilot, "/model offline")
        await until(pilot, lambda: app.session is not None and app.session.model.name == "offline")
        await send(pilot, "/frobnicate")
        await until(pilot, lambda: any("/frobnicate" in n.message for n in app._notifications))

    run_app(app, scenario, size)


@pytest.mark.parametrize("size", SIZES)
def test_switching_the_model_keeps_the_session_and_the_picked_event(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    model = ClosingModel("an answer")
    space = harness(tmp_path, model)
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        for text in ("one", "two"):
            await send(pilot, text)
            await until(pilot, lambda: not app.busy)
        session = app.session
        assert session is not None
        await pilot.press("ctrl+t")
        picked = [n for n in walk(app.query_one(Timeline).root) if n.data][1]
        app.query_one(Timeline).select_node(picked)
        await until(pilot, lambda: app.query_one(PendingBar).display, "the pending bar")
        await send(pilot, "/model offline")
        await until(pilot, lambda: session.model.name == "offline", "the switch")
        assert app.session is session and model.closed == 1  # the same session, still open
        assert session.pending_parent == picked.data
        assert app.query_one(PendingBar).display and "#1" in str(app.query_one(PendingBar).render())
        assert "offline" in str(app.query_one(StatusBar).render())
        await send(pilot, "three")
        await until(pilot, lambda: not app.busy and not app.query_one(PendingBar).display)
        prompt, answer = session.view.path()[-2:]
        assert prompt.parent_id == picked.data and answer.preview.startswith("offline model")

    run_app(app, scenario, size)

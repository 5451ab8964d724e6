"""Issue 25: a draft is never lost when the TUI ends. What is in the prompt box and
what is still queued when the app quits go to the prompt history file; the next
run's Up brings them back. (The real-terminal side, Ctrl-C and Ctrl-D, is in
test_tui_composer_tmux.py; quitting mid-turn with text typed ahead is driven
here, with a model that never answers, through Textual's pilot.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from infai.shells.tui import InfaiApp, history
from infai.shells.tui.prompt import PromptInput
from tui_pilot import SIZES, GatedModel, harness, run_app, until


@pytest.mark.parametrize("size", SIZES)
def test_the_box_and_the_queue_are_kept_when_the_app_quits(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    model = GatedModel()  # the turn waits: what is typed next is queued, then drafted
    space = harness(tmp_path, model)
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        prompt = app.query_one("#prompt", PromptInput)
        await until(pilot, lambda: app.session is not None, "the session")
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: app.busy, "the turn")
        await pilot.press(*"queued one", "enter")
        await until(pilot, lambda: app.queued == ["queued one"], "queued")
        await pilot.press(*"half", "ctrl+j", *"typed")
        assert prompt.value == "half\ntyped"
        await app.action_quit()

    run_app(app, scenario, size)
    kept = history.load(tmp_path / "home", space.working_dir)
    assert kept == ["go", "queued one", "half\ntyped"]

"""Issue 25: the composer owns the keyboard (pilot side; the real terminal's
bursts are in ``test_tui_keys_tmux.py``): a click on a folded result leaves
the keys with the prompt, the timeline never takes text, and the key map is
written once (F1 and the README show the same list)."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Static
from textual.widgets._collapsible import CollapsibleTitle

from infai.llm import Message, ScriptedModel, ToolCall
from infai.shells.tui import InfaiApp
from infai.shells.tui.keys import KEYMAP, keymap_markdown
from infai.shells.tui.modals import HelpScreen
from infai.shells.tui.panels import PromptInput, Timeline
from tui_pilot import harness, run_app, send, until

README = Path(__file__).resolve().parents[3] / "README.md"


def reads_a_long_file(tmp_path: Path) -> InfaiApp:
    """An app whose model reads a 30-line file (a folded result), then answers."""
    call = ToolCall("r1", "read_file", {"path": "long.txt"})
    space = harness(
        tmp_path, ScriptedModel([Message(role="assistant", tool_calls=(call,)), "ok", "two"])
    )
    (space.working_dir / "long.txt").write_text("".join(f"line {i}\n" for i in range(30)))
    return InfaiApp(space)


def test_keys_off_the_prompt_are_drawn_and_text_comes_back_to_it(tmp_path: Path) -> None:
    """Shift-Tab moves the keys to a folded result: the prompt's border says so,
    and a letter typed there goes to the prompt (with the keys)."""
    app = reads_a_long_file(tmp_path)

    async def scenario(pilot: Pilot[None]) -> None:
        prompt = app.query_one("#prompt", PromptInput)
        await send(pilot, "read it")
        await until(pilot, lambda: not app.busy and bool(app.query(CollapsibleTitle)), "the fold")
        assert prompt.border_title == ""
        await pilot.press("shift+tab")
        await until(pilot, lambda: not prompt.has_focus, "the focus off the prompt")
        assert prompt.border_title.startswith("keys: ")
        await pilot.press("x")
        await until(pilot, lambda: prompt.has_focus and prompt.value == "x", "x in the prompt")
        assert prompt.border_title == ""

    run_app(app, scenario, (100, 30))


def test_the_timeline_never_takes_text_and_ctrl_d_shows_the_diff(tmp_path: Path) -> None:
    app = reads_a_long_file(tmp_path)

    async def scenario(pilot: Pilot[None]) -> None:
        prompt = app.query_one("#prompt", PromptInput)
        await send(pilot, "read it")
        await until(pilot, lambda: not app.busy, "the turn")
        await pilot.press("ctrl+t")
        timeline = app.query_one(Timeline)
        await until(pilot, lambda: timeline.has_focus, "the timeline")
        await pilot.press("d", "space", "d", "backspace", "o")
        await until(pilot, lambda: prompt.value == "d o", "the text in the prompt")
        assert timeline.has_class("shown") and len(app.screen_stack) == 1  # no diff opened
        await pilot.press("escape")  # the prompt has the keys: Esc still closes it
        await until(pilot, lambda: not timeline.has_class("shown"), "the timeline closed")
        await pilot.press("ctrl+t")
        await until(pilot, lambda: timeline.has_focus, "the timeline again")
        await pilot.press("ctrl+d")
        await until(pilot, lambda: len(app.screen_stack) == 2, "the diff of the files")

    run_app(app, scenario, (80, 24))


def test_the_key_map_is_written_once_f1_and_the_readme_show_it(tmp_path: Path) -> None:
    assert keymap_markdown() in README.read_text()
    app = InfaiApp(harness(tmp_path, ScriptedModel([])))

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        helped = " ".join(str(app.screen.query_one(Static).render()).split())
        for _, key, what in KEYMAP:
            assert key in helped and " ".join(what.split()[:3]) in helped, key

    run_app(app, scenario, (80, 24))

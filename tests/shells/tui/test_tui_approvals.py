"""Approvals: an "ask" opens a modal; allow once, deny, allow always (its pattern
edited), and keys typed as it opens.

Driven by Textual's pilot at 80x24 and at a small 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from infai.agent.session import KEPT_RULES
from infai.llm import ScriptedModel
from infai.shells.tui import InfaiApp, modals
from infai.shells.tui.chat import ToolView
from infai.shells.tui.modals import GRACE, ApprovalScreen
from infai.shells.tui.prompt import PromptInput
from infai.store import ToolResultRecord
from tui_pilot import SIZES, asked, harness, inside_screen, run_app, send, until, write_call


@pytest.mark.parametrize("size", SIZES)
def test_an_ask_opens_a_modal_and_allow_once_runs_the_tool(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = harness(tmp_path, ScriptedModel([write_call("out.txt"), "written"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "write it")
        await asked(pilot, app)
        assert "write_file" in str(app.screen.query_one(".title").render())
        assert inside_screen(app, "ApprovalScreen > Vertical")
        await pilot.press("y")
        await until(pilot, lambda: not app.busy, "the turn's end")
        [tool] = app.query(ToolView)
        assert tool.has_result and not tool.has_class("failed")
        assert app.query_one(".diff")  # the write is shown as a diff

    run_app(app, scenario, size)
    assert (space.working_dir / "out.txt").read_text() == "hello\n"


@pytest.mark.parametrize("size", SIZES)
def test_deny_and_allow_always(tmp_path: Path, size: tuple[int, int]) -> None:
    replies: list[Any] = [write_call("a.txt"), "denied", write_call("b.txt"), "ok"]
    replies += [write_call("b.txt"), "again"]
    space = harness(tmp_path, ScriptedModel(replies))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        await asked(pilot, app)
        await pilot.press("n")
        await until(pilot, lambda: not app.busy)
        assert app.query(ToolView)[0].has_class("failed")
        await send(pilot, "two")
        await asked(pilot, app)
        await pilot.press("a")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "three")  # the same call again: no question this time
        await until(pilot, lambda: not app.busy)
        assert not isinstance(app.screen, ApprovalScreen)

    run_app(app, scenario, size)
    assert not (space.working_dir / "a.txt").exists()
    assert (space.working_dir / "b.txt").read_text() == "hello\n"
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        results = [e.record for e in reader.context().events if e.kind == "tool_result"]
    verdicts = [r.metadata["permission"]["by"] for r in results if isinstance(r, ToolResultRecord)]
    assert verdicts[0] == "user" and verdicts[1] == "user" and verdicts[2].startswith("rule")


class _Clock:
    """The dialog's clock, moved by the test: a loaded machine may take longer
    than the grace itself between two pilot key presses, so real time cannot
    tell "still typing" from "paused" here."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_keys_typed_as_the_dialog_opens_go_to_the_input_not_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(modals, "time", clock)
    space = harness(tmp_path, ScriptedModel([write_call("a.txt"), "ok"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the approval modal")
        for key in ("a", "n", "d", "backspace", "y"):  # still typing: not answers
            clock.now += GRACE / 2
            await pilot.press(key)
        assert isinstance(app.screen, ApprovalScreen)
        clock.now += GRACE + 0.05  # the user stops and reads
        await pilot.press("y")
        await until(pilot, lambda: not app.busy)
        assert app.query_one("#prompt", PromptInput).value == "any"

    run_app(app, scenario, (80, 24))
    assert (space.working_dir / "a.txt").read_text() == "hello\n"
    assert KEPT_RULES not in space.store.info(space.store.list_sessions()[0].id).extra


@pytest.mark.parametrize("size", SIZES)
def test_allow_always_with_an_edited_pattern_is_kept_with_the_session(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    replies: list[Any] = [write_call("notes/a.txt"), "ok", write_call("notes/b.txt"), "ok"]
    space = harness(tmp_path, ScriptedModel(replies))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        screen = await asked(pilot, app)
        assert "allow always: write_file notes/*" in str(screen.query_one("#keys").render())
        assert "write_file can change things" in str(screen.query_one(".reason").render())
        await pilot.press("e")
        field = screen.query_one("#pattern", Input)
        assert field.has_focus and field.value == "notes/*"
        assert inside_screen(app, "ApprovalScreen > Vertical")
        await pilot.press("escape")  # back to the question, nothing answered
        assert app.screen is screen and not field.has_focus
        await pilot.press("e")
        field = screen.query_one("#pattern", Input)
        assert field.has_focus and field.value == "notes/*"
        await pilot.press(*"notes/*.txt")  # typing replaces the suggestion (selected)
        await pilot.press("enter")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "two")  # covered by the edited pattern: no question
        await until(pilot, lambda: not app.busy)
        assert not isinstance(app.screen, ApprovalScreen)

    run_app(app, scenario, size)
    [info] = space.store.list_sessions()
    assert info.extra[KEPT_RULES] == ["write_file notes/*.txt"]
    assert (space.working_dir / "notes" / "b.txt").exists()


@pytest.mark.parametrize("size", SIZES)
def test_deny_with_a_reason_gives_the_model_the_users_words(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = harness(tmp_path, ScriptedModel([write_call("a.txt"), "ok"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        screen = await asked(pilot, app)
        assert "deny, saying why" in str(screen.query_one("#keys").render())
        await pilot.press("r")
        field = screen.query_one("#pattern", Input)
        assert field.has_focus and inside_screen(app, "ApprovalScreen > Vertical")
        await pilot.press("escape")  # back to the question, nothing answered
        assert app.screen is screen
        await pilot.press("r")
        await pilot.press(*"not there", "enter")
        await until(pilot, lambda: not app.busy)

    run_app(app, scenario, size)
    assert not (space.working_dir / "a.txt").exists()
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        [result] = [e.record for e in reader.context().events if e.kind == "tool_result"]
    assert isinstance(result, ToolResultRecord) and result.is_error
    assert "denied by the user: not there" in result.content

"""Issue 25, in Textual's pilot: what the approval dialog says of an MCP call, the
denial text the model reads, and when the status bar's "files ≠ HEAD" comes and
goes. (The layouts are checked in a real terminal: test_tui_dialogs_tmux.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Static

from infai.llm import Done, Message, Request, ScriptedModel, StreamEvent
from infai.shells.tui import InfaiApp
from infai.shells.tui.modals import ApprovalScreen
from infai.shells.tui.panels import StatusBar
from infai.store import ToolResultRecord
from infai.tools import Ask, Policy, ToolContext
from tui_pilot import asked, files_workspace, harness, run_app, send, until, write_call


def shown(widget: Static) -> str:
    return str(widget.render())


async def mcp_question(tmp_path: Path) -> Ask:
    """The question the policy really asks for an MCP tool's call with arguments."""
    questions: list[Ask] = []

    async def approver(ask: Ask) -> Any:
        questions.append(ask)
        return "deny"

    policy = Policy(approver=approver)
    arguments = {"folder": "work", "limit": 5}
    await policy.decide("mcp__notes__list_notes", arguments, ToolContext(tmp_path, ""))
    [ask] = questions
    return ask


@pytest.mark.parametrize("size", [(100, 30), (60, 20)])
def test_an_mcp_calls_question_shows_its_arguments_and_the_rule_it_stores(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """It said "(no arguments)" for a call with arguments, and offered "allow
    always" as a bare ``*`` while it stores ``mcp__notes__list_notes *``."""
    ask = asyncio.run(mcp_question(tmp_path))
    assert [f"{r.tool} {r.pattern}" for r in ask.always] == ["mcp__notes__list_notes *"]

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(ApprovalScreen(ask))

    async def go() -> None:
        app = Host()
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the dialog")
            screen = app.screen
            subject = shown(screen.query_one("#subject", Static))
            assert '"folder": "work"' in subject and '"limit": 5' in subject
            assert "no arguments" not in subject
            keys = shown(screen.query_one("#keys", Static))
            assert "allow always: mcp__notes__list_notes *" in keys

    asyncio.run(go())


@pytest.mark.parametrize(("keys", "said"), [(["r", *"not now", "enter"], "not now"), (["n"], "")])
def test_a_denial_reaches_the_model_saying_it_once(
    tmp_path: Path, keys: list[str], said: str
) -> None:
    """It read ``permission denied by user: denied by the user: not now``."""
    model = ScriptedModel([write_call("a.txt"), "ok"])
    space = harness(tmp_path, model)
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        await asked(pilot, app)
        await pilot.press(*("space" if k == " " else k for k in keys))
        await until(pilot, lambda: not app.busy, "the turn's end")

    run_app(app, scenario, (80, 24))
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        [result] = [e.record for e in reader.context().events if e.kind == "tool_result"]
    assert isinstance(result, ToolResultRecord) and result.is_error
    assert result.content == ("denied by the user: not now" if said else "denied by the user")
    # the model was sent that text, as stored
    [last] = [m for m in model.requests[-1].messages if m.role == "tool"]
    assert last.content == result.content


class HeldModel:
    """Answers at once, except while ``hold`` is set: then it waits for ``release``."""

    name = "held"
    context_window = 10_000

    def __init__(self) -> None:
        self.hold = False
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        if self.hold:
            self.waiting.set()
            await self.release.wait()
        yield Done(Message(role="assistant", content="ok", stop_reason="end_turn"))


def test_files_changed_by_hand_are_said_at_once_and_the_next_turns_snapshot_clears_it(
    tmp_path: Path,
) -> None:
    """The label came up to 10 s after a change (the idle look's period), and
    stayed during the next turn after its first snapshot had recorded the change."""
    model = HeldModel()
    space = files_workspace(tmp_path, model)
    app = InfaiApp(space)

    def bar() -> str:
        return shown(app.query_one(StatusBar))

    async def scenario(pilot: Pilot[None]) -> None:
        (space.working_dir / "a.txt").write_text("one\n")
        await send(pilot, "first")
        await until(pilot, lambda: not app.busy, "the first turn")
        await until(pilot, lambda: app._files_check is not None and app._files_check.done())
        assert "files ≠ HEAD" not in bar()
        (space.working_dir / "a.txt").write_text("changed by hand\n")
        # no focus event, no turn: the idle look sees it within a few seconds
        await until(pilot, lambda: "files ≠ HEAD (1 changed)" in bar(), "the label", tries=300)
        model.hold = True
        await send(pilot, "second")
        await until(pilot, model.waiting.is_set, "the second turn's model call")
        assert app.busy  # the turn is still on: its snapshot has recorded the change
        await until(pilot, lambda: "files ≠ HEAD" not in bar(), "the label gone", tries=100)
        model.release.set()
        await until(pilot, lambda: not app.busy, "the second turn")

    run_app(app, scenario, (80, 24))

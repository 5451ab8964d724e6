"""Ctrl-C: a turn cancelled (the session stays valid), calls marked interrupted,
a second Ctrl-C quits.

Driven by Textual's pilot at 80x24 and at a small 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from infai.llm import Message, ScriptedModel, ToolCall
from infai.shells.tui import InfaiApp
from infai.shells.tui.app import QUIT_WINDOW
from infai.shells.tui.chat import AssistantMessage, ToolView, UserMessage
from infai.shells.tui.modals import ApprovalScreen
from infai.shells.tui.panels import StatusBar
from tui_pilot import SIZES, GatedModel, asked, harness, run_app, send, until, write_call


@pytest.mark.parametrize("size", SIZES)
def test_ctrl_c_cancels_the_turn_and_a_second_quits(tmp_path: Path, size: tuple[int, int]) -> None:
    space = harness(tmp_path, GatedModel())
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "hi")
        await until(pilot, lambda: bool(app.query(AssistantMessage)))
        await pilot.press("ctrl+c")
        await until(pilot, lambda: app.turn is not None and app.turn.is_finished)
        # what was said is kept as saved (issue 13: nothing read is thrown away)
        await until(pilot, lambda: len(app.query(AssistantMessage)) == 1, "the kept reply")
        [kept] = app.query(AssistantMessage)
        assert kept.text.startswith("Hello") and kept.event_id is not None  # the saved one
        assert any("interrupted" in str(n.render()) for n in app.query(".notice"))
        # the marker the session saved is shown as it is saved, HEAD moved to it
        [marker] = app.query(UserMessage).filter(".interrupted")
        assert str(marker.render()) == "[turn interrupted]"
        # after the turn's files snapshot (#0), the prompt and the kept reply
        assert "HEAD #3 of 4" in str(app.query_one(StatusBar).render())
        await pilot.press("ctrl+c")
        await until(pilot, lambda: app.session is None, "the app to quit")

    run_app(app, scenario, size)
    [info] = space.store.list_sessions()
    assert space.store.fsck(info.id).ok
    with space.store.open_reader(info.id) as reader:
        contents = [getattr(e.record, "content", e.kind) for e in reader.context().events]
    assert contents == ["snapshot", "hi", "Hello ", "[turn interrupted]"]


@pytest.mark.parametrize("size", SIZES)
def test_a_cancelled_call_is_marked_interrupted(tmp_path: Path, size: tuple[int, int]) -> None:
    sleep = Message(role="assistant", tool_calls=(ToolCall("b1", "bash", {"command": "sleep 9"}),))
    replies: list[Any] = [write_call("a.txt"), sleep]
    app = InfaiApp(harness(tmp_path, ScriptedModel(replies), allow=("bash sleep*",)))

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "write")
        await asked(pilot, app)
        await pilot.press("ctrl+c")  # while asked
        await until(pilot, lambda: not app.busy and not isinstance(app.screen, ApprovalScreen))
        [asking] = app.query(ToolView)
        assert "interrupted" in str(asking._fold.title) and asking.has_class("failed")
        await pilot.pause(QUIT_WINDOW)  # not a double Ctrl-C
        await send(pilot, "sleep")
        await until(pilot, lambda: len(app.query(ToolView)) == 2, "the bash call")
        await pilot.pause(0.3)  # it runs
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.busy)
        running = app.query(ToolView)[1]
        assert "interrupted" in str(running._fold.title) and "running" not in str(
            running._fold.title
        )

    run_app(app, scenario, size)

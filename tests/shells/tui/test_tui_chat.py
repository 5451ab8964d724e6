"""The chat: a prompt answered and saved, a reply streaming in and followed to its
end, a multi-line paste kept whole.

Driven by Textual's pilot at 80x24 and at a small 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events
from textual.pilot import Pilot

from infai.llm import Message, ScriptedModel
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import AssistantMessage, ChatView, UserMessage
from infai.shells.tui.panels import StatusBar
from infai.shells.tui.prompt import PromptInput
from infai.store import MessageRecord
from tui_pilot import (
    SIZES,
    ClosingModel,
    GatedModel,
    harness,
    inside_screen,
    run_app,
    send,
    until,
)


@pytest.mark.parametrize("size", SIZES)
def test_a_prompt_is_answered_and_saved(tmp_path: Path, size: tuple[int, int]) -> None:
    space = harness(tmp_path, ScriptedModel(["The **answer** is 42."]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "what is the answer")
        await until(pilot, lambda: not app.busy and bool(app.query(AssistantMessage)))
        chat = app.query_one(ChatView)
        [user] = chat.query(UserMessage)
        [reply] = chat.query(AssistantMessage)
        assert "what is the answer" in str(user.render())
        assert reply.text == "The **answer** is 42." and reply.event_id is not None
        assert app.query_one("#prompt", PromptInput).value == ""
        assert "saved" in str(app.query_one(StatusBar).render())
        for part in ("#prompt", "StatusBar", "ChatView"):
            assert inside_screen(app, part), part

    run_app(app, scenario, size)
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        records = [e.record for e in reader.context().events]
    assert [r.content for r in records if isinstance(r, MessageRecord)] == [
        "what is the answer",
        "The **answer** is 42.",
    ]


def test_streaming_appends_to_the_reply_without_touching_the_rest(tmp_path: Path) -> None:
    model = GatedModel()
    app = InfaiApp(harness(tmp_path, model))

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "hi")
        await until(pilot, lambda: bool(app.query(AssistantMessage)), "the first delta")
        chat = app.query_one(ChatView)
        user = chat.query_one(UserMessage)
        live = chat.query_one(AssistantMessage)
        markdown = live._markdown
        assert live.text == "Hello " and live.event_id is None
        assert "streaming" in str(app.query_one(StatusBar).render())
        await pilot.resize_terminal(60, 20)  # mid-stream: the layout must hold
        await pilot.pause()
        model.release.set()
        await until(pilot, lambda: not app.busy, "the turn's end")
        assert chat.query_one(UserMessage) is user  # nothing else was re-rendered
        assert chat.query_one(AssistantMessage) is live and live._markdown is markdown
        assert live.text == "Hello world." and live.event_id is not None
        for part in ("#prompt", "StatusBar"):
            assert inside_screen(app, part), part

    run_app(app, scenario, (80, 24))


def test_a_long_reply_is_followed_and_the_model_closed_on_exit(tmp_path: Path) -> None:
    long = "\n\n".join(f"paragraph {i}" for i in range(60))
    model = ClosingModel(long)
    app = InfaiApp(harness(tmp_path, model))

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "talk")
        await until(pilot, lambda: not app.busy)
        await pilot.pause(0.2)
        chat = app.query_one(ChatView)
        assert chat.max_scroll_y > 0 and chat.scroll_y == chat.max_scroll_y  # the end is shown

    run_app(app, scenario, (80, 24))
    assert model.closed >= 1


@pytest.mark.parametrize("size", SIZES)
def test_a_multi_line_paste_is_kept_whole(tmp_path: Path, size: tuple[int, int]) -> None:
    space = harness(tmp_path, ScriptedModel(["I see."]))
    app = InfaiApp(space)
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad\n'

    async def scenario(pilot: Pilot[None]) -> None:
        prompt = app.query_one("#prompt", PromptInput)
        await send(pilot, "why")
        await until(pilot, lambda: not app.busy)
        await pilot.press(*"see", "space")
        prompt.post_message(events.Paste(trace))
        await until(pilot, lambda: "[pasted 3 lines]" in prompt.value, "the paste marker")
        prompt.post_message(events.Paste("one line"))  # a single line: as it was
        await until(pilot, lambda: prompt.value.endswith("one line"))
        assert prompt.value == "see [pasted 3 lines]one line"
        await pilot.press("enter")
        await until(pilot, lambda: not app.busy and len(app.query(UserMessage)) == 2)
        assert prompt.value == "" and "ValueError: bad" in str(app.query(UserMessage)[1].render())

    run_app(app, scenario, size)
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        records = [e.record for e in reader.context().events if e.role == "user"]
    prompts = [r.content for r in records if isinstance(r, MessageRecord)]
    assert prompts[1] == f"see {trace.rstrip()}one line"


def test_quitting_closes_the_workspace_and_its_model_once(tmp_path: Path) -> None:
    """/quit closes the session, then the harness; the app's end (unmount) after
    it closes nothing again (the model used to be closed by both)."""
    model = ClosingModel("an answer")
    app = InfaiApp(harness(tmp_path, model))

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "hi")
        await until(pilot, lambda: not app.busy and bool(app.query(AssistantMessage)))
        await send(pilot, "/quit")
        await until(pilot, lambda: app.session is None, "the app to quit")

    run_app(app, scenario, (80, 24))
    assert model.closed == 1


@pytest.mark.parametrize("size", SIZES)
def test_a_reply_cut_at_the_output_limit_is_marked_now_and_when_reopened(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """A reply the provider cut (stop reason ``max_tokens``) says so under it, as it
    is stored and when the session is opened again; a whole reply says nothing."""
    cut = Message("assistant", "The list goes on: one, two, thr", stop_reason="max_tokens")
    space = harness(tmp_path, ScriptedModel(["All done.", cut]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "first")
        await until(pilot, lambda: not app.busy and len(app.query(AssistantMessage)) == 1)
        await send(pilot, "list them")
        await until(pilot, lambda: not app.busy and len(app.query(AssistantMessage)) == 2)
        whole, partial = app.query(AssistantMessage)
        assert not whole.cut and partial.cut
        assert inside_screen(app, "ChatView")

    run_app(app, scenario, size)
    [info] = space.store.list_sessions()
    again = InfaiApp(harness(tmp_path, ScriptedModel([])), info.id)

    async def reopened(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: len(again.query(AssistantMessage)) == 2)
        assert [reply.cut for reply in again.query(AssistantMessage)] == [False, True]
        shown = " ".join(str(s.render()) for s in again.query(".notice"))
        assert "cut at the output limit" in shown

    run_app(again, reopened, size)

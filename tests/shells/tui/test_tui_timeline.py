"""The timeline: opening on HEAD or on the picked event, branching from an older
event, growing with each turn without a rebuild.

Driven by Textual's pilot at 80x24 and at a small 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from infai.llm import ScriptedModel
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import AssistantMessage
from infai.shells.tui.panels import PendingBar, StatusBar, Timeline
from infai.shells.tui.prompt import PromptInput
from tui_pilot import SIZES, harness, run_app, send, until, walk

#: the first row of a session's timeline: the first turn starts by recording the
#: files (an empty directory here; later turns find them unchanged and add none)
FIRST_FILES = "#0 ▣ files: 0 files recorded · turn start"


def rows(timeline: Timeline) -> list[Any]:
    """The timeline's event rows (not the branch headings), top to bottom."""
    return [n for n in walk(timeline.root) if n.data]


@pytest.mark.parametrize("size", SIZES)
def test_the_timeline_picks_an_older_event_and_the_next_prompt_branches(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = harness(tmp_path, ScriptedModel(["first answer", "second answer", "branched"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "first")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "second")
        await until(pilot, lambda: not app.busy)
        await pilot.press("ctrl+t")
        timeline = app.query_one(Timeline)
        assert timeline.display and timeline.has_focus
        nodes = rows(timeline)
        assert len(nodes) == 5 and str(nodes[0].label).strip() == FIRST_FILES
        first_answer = nodes[2]
        assert "assistant: first answer" in str(first_answer.label)
        timeline.select_node(first_answer)
        await until(pilot, lambda: app.query_one(PendingBar).display, "the pending bar")
        assert "#2" in str(app.query_one(PendingBar).render())
        assert len(app.query(AssistantMessage)) == 1  # the chat shows the path to it
        assert app.session is not None and app.session.pending_parent == first_answer.data
        await pilot.press("escape")  # Esc closes the top panel first: the timeline
        await until(pilot, lambda: not timeline.has_class("shown"), "the timeline closed")
        assert app.query_one(PendingBar).display
        await pilot.press("escape")  # then forgets the pick
        await until(pilot, lambda: not app.query_one(PendingBar).display)
        await pilot.press("ctrl+t")
        await until(pilot, lambda: timeline.has_focus, "the timeline again")
        timeline.select_node(first_answer)
        await until(pilot, lambda: app.query_one(PendingBar).display)
        await send(pilot, "other way")
        await until(pilot, lambda: not app.busy)
        assert not app.query_one(PendingBar).display
        view = app.session.view
        new_prompt = view.path()[-2]  # the files are unchanged: no snapshot before it
        assert new_prompt.parent_id == first_answer.data
        labels = [str(n.label) for n in walk(timeline.root)]
        assert any("branch at #2" in label for label in labels)

    run_app(app, scenario, size)


def test_the_open_timeline_grows_with_each_turn_without_a_rebuild(tmp_path: Path) -> None:
    space = harness(tmp_path, ScriptedModel(["one", "two", "three", "four"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "a")
        await until(pilot, lambda: not app.busy)
        await pilot.press("ctrl+t")
        timeline = app.query_one(Timeline)
        rebuilds: list[int] = []
        real = timeline.load

        def counted(*args: Any, **kwargs: Any) -> None:
            rebuilds.append(1)
            real(*args, **kwargs)

        timeline.load = counted  # type: ignore[method-assign]
        app.query_one("#prompt", PromptInput).focus()  # the timeline stays open (Esc closes it)
        await send(pilot, "b")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "c")
        await until(pilot, lambda: not app.busy)
        labels = [str(n.label) for n in rows(timeline)]
        assert len(labels) == 7 and labels[0].strip() == FIRST_FILES and rebuilds == []
        assert labels[-1].startswith("◆ #6") and not any(x.startswith("◆") for x in labels[:-1])
        first_answer = rows(timeline)[2]
        assert "assistant: one" in str(first_answer.label)
        timeline.select_node(first_answer)
        await until(pilot, lambda: app.query_one(PendingBar).display)
        app.query_one("#prompt", PromptInput).focus()
        await send(pilot, "d")  # a fork at #2: the line from #2 must move into a branch
        await until(pilot, lambda: not app.busy)
        assert rebuilds == [1]
        labels = [str(n.label) for n in walk(timeline.root)]
        assert sum("branch at #2" in label for label in labels) == 2

    run_app(app, scenario, (80, 24))


@pytest.mark.parametrize("size", SIZES)
def test_the_timeline_opens_on_head_or_the_picked_event(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = harness(tmp_path, ScriptedModel([f"answer {i} " + "long " * 20 for i in range(4)]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        for text in ("one", "two", "three"):
            await send(pilot, text)
            await until(pilot, lambda: not app.busy)
        assert app.session is not None
        bar = app.query_one(StatusBar)
        # three turns of two messages after the first turn's files
        assert "HEAD #6 of 7" in str(bar.render()) and "⑂" not in str(bar.render())
        await pilot.press("ctrl+t")
        timeline = app.query_one(Timeline)
        assert timeline.has_focus and timeline.cursor_node is not None
        assert timeline.cursor_node.data == app.session.view.head  # not #0
        assert not timeline.show_horizontal_scrollbar  # long labels are cut, no stray bar
        picked = rows(timeline)[2]
        assert "assistant: answer 0" in str(picked.label)
        timeline.select_node(picked)
        await until(pilot, lambda: app.query_one("#prompt", PromptInput).has_focus, "the prompt")
        assert app.query_one(PendingBar).display
        await pilot.press("ctrl+t")  # shown, the prompt focused: Ctrl-T closes it (a toggle)
        assert not timeline.has_class("shown")
        assert app.query_one("#prompt", PromptInput).has_focus
        await pilot.press("ctrl+t")  # opened again: on the picked event
        assert timeline.has_class("shown") and timeline.has_focus
        assert timeline.cursor_node is not None and timeline.cursor_node.data == picked.data
        app.query_one("#prompt", PromptInput).focus()
        await send(pilot, "other")
        await until(pilot, lambda: not app.busy and not app.query_one(PendingBar).display)
        assert "HEAD #8 of 9 ⑂ at #2" in str(bar.render())  # the branch, from the index
        head = app.session.view.head  # a reader of its own between turns
        assert timeline.cursor_node is not None and timeline.cursor_node.data == head

    run_app(app, scenario, size)

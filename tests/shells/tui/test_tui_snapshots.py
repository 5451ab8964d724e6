"""Snapshots of the TUI's key screens (pytest-textual-snapshot, SVGs in __snapshots__).

Each screen must look the same on every run and every machine, so nothing in
a snapshot may depend on the clock, on ids or on where the test runs:

- Replies come from a :class:`ScriptedModel` with explicit usage. Its own
  estimate counts the system prompt, which names the working directory (a tmp
  path whose length varies), and the status bar shows that count.
- The session picker shows working directories: its sessions name fixed ones
  (not the tmp path), and were all active "just now".
- The app's title names the session id: it is not drawn (there is no header),
  and the SVG's window title is the plain app name (see ``steady``).
- The prompt's cursor blinks on a timer: blinking is switched off before the
  picture is taken, and any toast is cleared (none is expected in these flows).
- The status bar shows the working directory, a tmp path: ``HOME`` is the test's
  tmp directory, so it is drawn as ``~/work`` wherever the test runs.
- The status bar says what a look at the files found (``files ≠ HEAD``, a
  directory missing), and that look runs in a thread after opening and after
  each turn: the picture waits for it to end.

Regenerate with ``pytest tests/shells/tui/test_tui_snapshots.py --snapshot-update`` and
look at the SVGs (or the HTML report a failure writes) before committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from infai.agent import Harness
from infai.llm import Message, ScriptedModel, ToolCall
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import AssistantMessage, ChatView, ToolView
from infai.shells.tui.modals import ApprovalScreen, HelpScreen, SessionPicker
from infai.shells.tui.panels import PendingBar, Timeline
from infai.shells.tui.prompt import PromptInput
from infai.store import Store, Usage

SnapCompare = Callable[..., bool]

CODE_REPLY = """\
Wrote **hello.py**:

```python
def greet(name):
    return "hi " + name
```"""


@pytest.fixture(autouse=True)
def home_is_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))


def harness(tmp_path: Path, replies: list[Any], allow: tuple[str, ...] = ()) -> Harness:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    space = Harness(Store(tmp_path / "home"), work, allow=allow)
    space.model = ScriptedModel(replies)
    return space


def reply(text: str, input_tokens: int) -> Message:
    """A text reply whose usage is fixed (not estimated from the tmp working dir)."""
    usage = Usage(input_tokens=input_tokens, output_tokens=len(text) // 4)
    return Message(role="assistant", content=text, usage=usage)


def write_call(path: str, content: str, input_tokens: int) -> Message:
    call = ToolCall("w1", "write_file", {"path": path, "content": content})
    usage = Usage(input_tokens=input_tokens, output_tokens=20)
    return Message(role="assistant", tool_calls=(call,), usage=usage)


async def until(pilot: Pilot[None], condition: Callable[[], bool], what: str = "") -> None:
    for _ in range(500):
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"timed out waiting for {what or condition}")


async def send(pilot: Pilot[None], text: str) -> None:
    """Type ``text`` key by key (letters and spaces) and press Enter; wait until the
    app has taken the prompt (its turn started), so the next look sees the turn."""
    await pilot.press(*("space" if c == " " else c for c in text))
    app = app_of(pilot)
    taken = app.taken
    await pilot.press("enter")
    await until(pilot, lambda: app.taken > taken, "the prompt taken")


def app_of(pilot: Pilot[None]) -> InfaiApp:
    app = pilot.app
    assert isinstance(app, InfaiApp)
    return app


async def session_opened(pilot: Pilot[None]) -> None:
    """The session is open (it opens after the first frame): a picture shows it so."""
    app = app_of(pilot)
    await until(pilot, lambda: not app.opening, "the session to open")


async def steady(pilot: Pilot[None]) -> None:
    """Remove what changes with time: the blinking cursor and any toast; wait for
    the look at the files the status bar reports."""
    app = app_of(pilot)
    looked = lambda: app._files_check is None or app._files_check.done()  # noqa: E731
    await until(pilot, looked, "the look at the files")
    prompt = app.screen_stack[0].query_one("#prompt", PromptInput)
    prompt.cursor_blink = False  # the cursor is hidden, whatever the blink phase was
    for field in app.screen.query(Input):  # a dialog's field too (the picker's filter)
        field.cursor_blink = False
    app.clear_notifications()
    app.title = InfaiApp.TITLE  # the SVG's window title (the app's own names the session id)
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


def test_conversation_with_a_tool_call_and_code(tmp_path: Path, snap_compare: SnapCompare) -> None:
    """After a turn: the files recorded at its start, the prompt, a write_file call with
    its diff and result, the files recorded after it, a Markdown reply. At 80x26: the
    two files lines would not leave all of it in view at 80x24."""
    content = 'def greet(name):\n    return "hi " + name\n'
    replies = [write_call("hello.py", content, 900), reply(CODE_REPLY, 1_400)]
    space = harness(tmp_path, replies, allow=("write_file *",))
    app = InfaiApp(space)

    async def run_before(pilot: Pilot[None]) -> None:
        await session_opened(pilot)
        await send(pilot, "write a greeting function")
        await until(pilot, lambda: not app.busy, "the turn's end")
        tool = app.query_one(ToolView)
        assert tool.has_result and not tool.has_class("failed")
        [answer] = app.query(AssistantMessage)
        await until(pilot, lambda: answer.event_id is not None, "the reply to be saved")
        await steady(pilot)
        # All of it fits, so the picture does not depend on where the chat is scrolled
        # (a streamed reply that overflows is not followed to its end; see the report).
        assert app.query_one(ChatView).max_scroll_y == 0

    assert snap_compare(app, terminal_size=(80, 26), run_before=run_before)
    assert (space.working_dir / "hello.py").read_text() == content


def test_approval_modal_for_write_file(tmp_path: Path, snap_compare: SnapCompare) -> None:
    """The modal asking whether write_file may run, over the conversation, at 60x20."""
    space = harness(tmp_path, [write_call("notes.txt", "remember\n", 500), reply("done", 600)])
    app = InfaiApp(space)

    async def run_before(pilot: Pilot[None]) -> None:
        await session_opened(pilot)
        await send(pilot, "take a note")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the approval modal")
        await steady(pilot)

    assert snap_compare(app, terminal_size=(60, 20), run_before=run_before)
    # quitting with the question open denied the call: nothing was written
    assert not (space.working_dir / "notes.txt").exists()


def test_timeline_with_a_branch(tmp_path: Path, snap_compare: SnapCompare) -> None:
    """The timeline after branching from the first answer: a fork with two branches
    (the first turn's files snapshot above them; the branch's files are unchanged)."""
    replies = [
        reply("first answer", 300),
        reply("second answer", 320),
        reply("a different way", 340),
    ]
    app = InfaiApp(harness(tmp_path, replies))

    async def run_before(pilot: Pilot[None]) -> None:
        await session_opened(pilot)
        await send(pilot, "first")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "second")
        await until(pilot, lambda: not app.busy)
        await pilot.press("ctrl+t")
        timeline = app.query_one(Timeline)
        await until(pilot, lambda: timeline.has_focus, "the timeline")
        nodes = [n for n in timeline.root.children if n.data]
        # one linear run: the first turn's files, prompt, answer, prompt, answer
        assert len(nodes) == 5 and "▣ files" in str(nodes[0].label)
        first_answer = nodes[2]
        assert "assistant: first answer" in str(first_answer.label)
        timeline.select_node(first_answer)
        await until(pilot, lambda: app.query_one(PendingBar).display, "the pending bar")
        await send(pilot, "other way")
        await until(pilot, lambda: not app.busy and not app.query_one(PendingBar).display)
        labels = [str(n.label) for n in timeline.root.children]
        assert any("branch at #2" in label for label in labels)
        await steady(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_help_screen(tmp_path: Path, snap_compare: SnapCompare) -> None:
    """F1 shows the keys and commands, in a box that fits 60x20."""
    app = InfaiApp(harness(tmp_path, []))

    async def run_before(pilot: Pilot[None]) -> None:
        await session_opened(pilot)
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        await steady(pilot)

    assert snap_compare(app, terminal_size=(60, 20), run_before=run_before)


def test_session_picker(tmp_path: Path, snap_compare: SnapCompare) -> None:
    """Ctrl-O: the sessions, newest first, the open one highlighted, in a box at 60x20."""
    space = harness(tmp_path, [])
    store = space.store
    store.create_session(name="refactor the store", working_dir="/src/infai")
    store.create_session(working_dir="/src/app")
    opened = store.create_session(name="fix the login bug", working_dir="/src/app").id
    store.create_session(name="a name far too long to be shown whole here", working_dir="/tmp")
    app = InfaiApp(space, opened)  # opening it (with another model) makes it the newest

    async def run_before(pilot: Pilot[None]) -> None:
        await session_opened(pilot)
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), "the picker")
        await steady(pilot)

    assert snap_compare(app, terminal_size=(60, 20), run_before=run_before)

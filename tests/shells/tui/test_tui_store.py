"""The TUI over its store: PostgreSQL as well as files, a failure to save shown,
not swallowed, and the TUI's own store calls: few, and off the event loop.

Driven by Textual's pilot at 80x24 and at a small 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList

from infai.agent import Harness
from infai.llm import Message, ScriptedModel, ToolCall
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import PAGE, AssistantMessage, ChatView, ToolView
from infai.shells.tui.modals import RenameScreen, SessionPicker
from infai.shells.tui.panels import StatusBar, Timeline
from infai.shells.tui.prompt import PromptInput
from infai.store import MessageRecord, ToolCallRecord, ToolResultRecord
from tui_pilot import StoreCalls, harness, run_app, send, until, walk


def test_the_tui_on_a_postgresql_store(pg_url: str, tmp_path: Path) -> None:
    from infai.store.pg import PgStore

    store = PgStore(pg_url)
    work = tmp_path / "work"
    work.mkdir()
    space = Harness(store, work)
    space.model = ScriptedModel(["stored in the database"])
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "hello")
        await until(pilot, lambda: not app.busy and bool(app.query(AssistantMessage)))
        await pilot.press("ctrl+t")
        rows = [str(n.label) for n in walk(app.query_one(Timeline).root) if n.data]
        assert len(rows) == 3 and "▣ files" in rows[0]  # the turn's files, prompt, reply

    try:
        run_app(app, scenario, (80, 24))
        [info] = store.list_sessions()
        with store.open_reader(info.id) as reader:
            events = reader.context().events
        contents = [getattr(e.record, "content", e.kind) for e in events]
        assert contents == ["snapshot", "hello", "stored in the database"]
    finally:
        store.close()


def test_a_store_failure_mid_turn_is_shown_not_swallowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.store import StoreIOError

    app = InfaiApp(harness(tmp_path, ScriptedModel(["a reply that cannot be saved"])))

    async def scenario(pilot: Pilot[None]) -> None:
        assert app.session is not None

        def failing(*args: Any, **kwargs: Any) -> Any:
            raise StoreIOError(28, "No space left on device")

        with monkeypatch.context() as patched:  # the session's appends fail (its class's)
            patched.setattr(type(app.session.writer), "append_batch", failing)
            await send(pilot, "hi")
            await until(pilot, lambda: not app.busy)
        assert any("could not be saved" in str(n.render()) for n in app.query(".notice"))
        assert "NOT saved" in str(app.query_one(StatusBar).render())
        assert not app.query(AssistantMessage)

    run_app(app, scenario, (80, 24))


def list_call(n: int) -> Message:
    call = ToolCall(f"l{n}", "list_files", {"path": "."})
    return Message(role="assistant", tool_calls=(call,))


def test_a_settled_event_costs_the_tui_no_store_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The status bar's name, HEAD and fork are kept from the events the turn
    reports: a turn of ten settled events costs the TUI no more store calls than
    one of two (it used to read the session's info and walk the index at each)."""
    replies: list[Any] = ["short", *(list_call(i) for i in range(4)), "long"]
    space = harness(tmp_path, ScriptedModel(replies))
    sid = space.new_session()
    calls = StoreCalls(monkeypatch, space.store, sid)
    app = InfaiApp(space, sid)
    turns: list[tuple[int, int]] = []  # (the TUI's store calls, events settled)

    async def scenario(pilot: Pilot[None]) -> None:
        assert app.session is not None
        for text in ("one", "two"):
            before, count = calls.count(), app.session.view.count
            await send(pilot, text)
            await until(pilot, lambda: not app.busy, "the turn's end")
            view = app.session.view  # a new reader: the session is let go between turns
            turns.append((calls.count() - before, view.count - count))
            bar = str(app.query_one(StatusBar).render())
            assert f"HEAD #{view.count - 1} of {view.count}" in bar  # kept up to date

    run_app(app, scenario, (80, 24))
    (first, few), (second, many) = turns
    assert many >= few + 8  # the second turn settled many more events
    assert second == first, calls.calls  # and cost the TUI no more store calls


@pytest.mark.slow  # over 10 s on 2 cores: in `make crash`
def test_the_tuis_own_store_calls_run_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a session and its page, an earlier page, a blob unfolded, the
    timeline, a rename, a turn, a model switch, the picker's list, switching, a
    new session and quitting: every store call the TUI makes itself runs in a
    thread."""
    space = harness(tmp_path, ScriptedModel(["an answer"]))
    sid = space.store.create_session(name="long", working_dir=str(space.working_dir)).id
    other = space.store.create_session(name="other", working_dir=str(space.working_dir)).id
    with space.store.open_writer(sid) as writer:
        for i in range(PAGE):
            writer.append(MessageRecord(content=f"question {i}"), "user")
            writer.append(MessageRecord(content=f"answer {i}"), "assistant")
        writer.append(ToolCallRecord(call_id="c1", name="read_file"), "assistant")
        big = ToolResultRecord(call_id="c1", name="read_file", content="Z" * 20_000)
        assert writer.append(big, "tool").digest
    calls = StoreCalls(monkeypatch, space.store, sid)
    app = InfaiApp(space, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        chat = app.query_one(ChatView)
        await until(pilot, lambda: bool(chat.query(ToolView)), "the session's last page")
        [blob] = chat.query(ToolView)
        blob._fold.collapsed = False
        await until(pilot, lambda: "ZZZ" in str(blob._body.render()), "the blob")
        chat.scroll_home(animate=False)
        await pilot.pause()
        await pilot.click("#more")
        await until(pilot, lambda: chat.mounted_events > PAGE, "the earlier page")
        await pilot.press("ctrl+t")
        timeline = app.query_one(Timeline)
        await until(pilot, lambda: bool(timeline.root.children), "the timeline")
        await pilot.press("ctrl+t")  # hidden again
        app.query_one("#prompt", PromptInput).focus()
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, RenameScreen), "the rename dialog")
        await pilot.press(*"renamed", "enter")
        await until(pilot, lambda: space.store.info(sid).name == "renamed", "the rename")
        await send(pilot, "hello")
        await until(pilot, lambda: not app.busy and bool(app.query(AssistantMessage)))
        await send(pilot, "/model offline")  # the session's info names the model
        await until(pilot, lambda: space.store.info(sid).model == "offline", "the switch")
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), "the picker")
        picker = app.screen
        assert isinstance(picker, SessionPicker)
        picker.query_one(OptionList).highlighted = [i.id for i in picker.sessions].index(other)
        await pilot.press("enter")
        await until(pilot, lambda: app.session is not None and app.session.session_id == other)
        await pilot.press("ctrl+n")
        await until(pilot, lambda: app.session is not None and app.session.session_id != other)

    run_app(app, scenario, (80, 24))
    assert calls.on_loop() == [], calls.on_loop()
    made = {name for name, _ in calls.calls}  # and the guard saw each kind of call
    wanted = {"open_writer", "event", "resolve", "entries", "list_sessions", "update_info"}
    assert wanted | {"create_session", "remove_session", "close"} <= made, made

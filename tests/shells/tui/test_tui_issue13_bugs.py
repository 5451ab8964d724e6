"""Issue 13's TUI bugs, each in the scenario a user met it in:

- 6: the timeline never traps the focus: Ctrl-T toggles it, Esc closes it, and
  what is typed on it goes to the prompt (a ``/quit`` is not lost);
- 4: the approval shows an overwrite of an existing file as what it replaces,
  and an edit's hunks carry the file's own line numbers;
- 7: a read failure during a turn (a missing blob) is said as a read failure,
  not as "could not be saved" / "NOT saved": the prompt was saved;
- 12's remnant: the token gauge is not 0% when a session is resumed;
- 9: on PostgreSQL, an event another process appends shows in the open TUI.

Driven by Textual's pilot at 80x24 and at 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from infai.agent import Harness
from infai.llm import Message, ScriptedModel, ToolCall
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import AssistantMessage, ToolView, UserMessage
from infai.shells.tui.panels import PromptInput, StatusBar, Timeline
from infai.store import MessageRecord, Store
from tui_pilot import BIG_REPLY, SIZES, asked, harness, run_app, send, until


def diff_text(view: ToolView) -> str:
    [shown] = view.query(".diff").results(Static)
    return str(shown.content.code)  # type: ignore[union-attr]


@pytest.mark.parametrize("size", SIZES)
def test_timeline_focus_and_the_real_diff_of_an_overwrite_and_an_edit(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    calls = (
        ToolCall("w1", "write_file", {"path": "notes.txt", "content": "new text\n"}),
        ToolCall("e1", "edit_file", {"path": "long.txt", "old_text": "line 20", "new_text": "L"}),
    )
    space = harness(tmp_path, ScriptedModel([Message(role="assistant", tool_calls=calls), "ok"]))
    (space.working_dir / "notes.txt").write_text("old text\n")
    (space.working_dir / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 31)))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        prompt = app.query_one("#prompt", PromptInput)
        timeline = app.query_one(Timeline)
        # bug 6: Ctrl-T opens and closes; keys typed on it go to the prompt; Esc closes
        await pilot.press("ctrl+t")
        assert timeline.has_class("shown") and timeline.has_focus
        await pilot.press("ctrl+t")
        assert not timeline.has_class("shown") and prompt.has_focus
        await pilot.press("ctrl+t")
        assert timeline.has_focus
        await pilot.press("g", "o")
        await until(pilot, lambda: prompt.has_focus and prompt.value == "go", "go, in the prompt")
        await pilot.press("ctrl+t")  # the prompt has the focus, the timeline is shown: close
        assert not timeline.has_class("shown")
        await pilot.press("ctrl+t", "escape")
        assert not timeline.has_class("shown") and prompt.has_focus and prompt.value == "go"
        # bug 4: the prompt "go" (typed on the timeline) asks to write, then to edit
        await pilot.press("enter")
        await asked(pilot, app)
        views = list(app.query(ToolView))
        write = diff_text(views[0])
        assert "-old text" in write and "+new text" in write
        assert "@@ -0,0" not in write  # not shown as a new file
        await pilot.press("n")
        await until(pilot, lambda: len(app.query(ToolView)) == 2, "the edit's call")
        await asked(pilot, app)
        edit = diff_text(app.query(ToolView)[1])
        assert "@@ -18,5 +18,5 @@" in edit  # the file's own line numbers
        assert "-line 20" in edit and "+L" in edit and " line 19" in edit
        await pilot.press("n")
        await until(pilot, lambda: not app.busy, "the turn's end")

    run_app(app, scenario, size)
    assert (space.working_dir / "notes.txt").read_text() == "old text\n"  # denied


@pytest.mark.parametrize("size", SIZES)
def test_resumed_gauge_and_a_read_failure_is_not_called_a_save_failure(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    replies = ["first answer", '{"summary": "we said hello", "goals": []}']
    space = harness(tmp_path, ScriptedModel(replies, context_window=2_000))
    first = InfaiApp(space)
    seen: dict[str, int] = {}

    async def before(pilot: Pilot[None]) -> None:
        await send(pilot, "hello")
        await until(pilot, lambda: not first.busy, "the reply")
        assert first.head.count == 3  # the turn's files snapshot, the prompt, the reply
        await send(pilot, "/compact")  # the path now starts at a summary
        await until(pilot, lambda: not first.busy and bool(first.query(".boundary")), "summary")
        assert first.head.count == 4
        seen["live"] = first.state.used_tokens

    run_app(first, before, size)
    [info] = space.store.list_sessions()
    with space.store.open_writer(info.id) as writer:  # a reply kept in a blob, then a prompt
        writer.append(MessageRecord(content=BIG_REPLY), "assistant")
    blobs = [p for p in (tmp_path / "home").rglob("blobs/*") if p.is_file()]
    assert blobs, "the big reply is in a blob"
    again = Harness(Store(tmp_path / "home"), space.working_dir)
    again.model = ScriptedModel(["never asked"], context_window=2_000)
    resumed = InfaiApp(again, info.id)

    async def after(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: resumed.session is not None, "the session")
        assert seen["live"] > 0
        assert resumed.state.used_tokens > 0  # the summary and the reply count (was 0)
        assert "(0%)" not in str(resumed.query_one(StatusBar).render())
        for blob in blobs:
            blob.unlink()  # the reply's blob goes missing: the next turn cannot read it
        await send(pilot, "and now")
        await until(pilot, lambda: not resumed.busy, "the turn's end")
        notices = " ".join(str(n.render()) for n in resumed.query(".notice"))
        assert "could not be read" in notices and "could not be saved" not in notices
        assert "NOT saved" not in str(resumed.query_one(StatusBar).render())
        assert any("and now" in str(m.render()) for m in resumed.query(UserMessage))

    run_app(resumed, after, size)
    with Store(tmp_path / "home").open_writer(info.id) as writer:
        last = writer.entry_at(writer.count - 1)
    assert last.role == "user" and last.preview.endswith("and now")  # the prompt was saved


def listening(url: str) -> bool:
    """Whether a connection to this test's database is listening (the app's feed)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query ILIKE 'LISTEN %'"
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize("size", SIZES)
def test_on_postgresql_another_process_append_shows_in_the_open_tui(
    pg_url: str, tmp_path: Path, size: tuple[int, int]
) -> None:
    from infai.store.pg import PgStore

    store = PgStore(pg_url)
    work = tmp_path / "work"
    work.mkdir()
    space = Harness(store, work)
    space.model = ScriptedModel(["first answer"])
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "hello")
        await until(pilot, lambda: not app.busy and bool(app.query(AssistantMessage)))
        assert app.session is not None
        await until(pilot, lambda: listening(pg_url), "the app's change feed", tries=3000)
        other = PgStore(pg_url)  # another process: its own connections
        try:
            with other.open_writer(app.session.session_id) as writer:
                writer.append(MessageRecord(content="appended from elsewhere"), "user")
        finally:
            other.close()
        shown = lambda: any(  # noqa: E731
            "appended from elsewhere" in str(m.render()) for m in app.query(UserMessage)
        )
        await until(pilot, shown, "the other process's event on screen", tries=1500)

    try:
        run_app(app, scenario, size)
    finally:
        store.close()

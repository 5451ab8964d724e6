"""The session picker (issue 13: "resume is obvious") and the F1 help of the prompt:
a title (the name, else the first prompt), when in words, the event count and
the directory; grouped by directory with this one first; typing filters.

Driven by Textual's pilot at 80x24 and at 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from infai.llm import ScriptedModel
from infai.shells.tui import InfaiApp
from infai.shells.tui.modals import HelpScreen, SessionPicker, _ago
from infai.store import MessageRecord
from tui_pilot import SIZES, harness, inside_screen, run_app, send, until


def test_when_in_words() -> None:
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    assert _ago((now - timedelta(seconds=20)).isoformat(), now) == "just now"
    assert _ago((now - timedelta(minutes=3)).isoformat(), now) == "3 min ago"
    assert _ago((now - timedelta(hours=5)).isoformat(), now) == "5 h ago"
    assert _ago((now - timedelta(days=2)).isoformat(), now) == "2 d ago"
    old = now - timedelta(days=30)
    assert _ago(old.isoformat(), now) == old.astimezone().strftime("%b %d %H:%M")  # local


@pytest.mark.parametrize("size", SIZES)
def test_the_picker_titles_counts_groups_and_filters(tmp_path: Path, size: tuple[int, int]) -> None:
    space = harness(tmp_path, ScriptedModel(["an answer"]))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = space.store
    other = store.create_session(working_dir=str(elsewhere)).id
    named = store.create_session(name="release notes", working_dir=str(space.working_dir)).id
    app = InfaiApp(space, named)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "fix the login bug")
        await until(pilot, lambda: not app.busy, "the reply")
        assert app.head.count == 3  # the turn's files snapshot, the prompt, the reply
        with store.open_writer(other) as writer:  # the other directory's is the newest now
            writer.append(MessageRecord(content="refactor the parser please"), "user")
        await pilot.press("f1")  # the help says how to write several lines
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        helped = str(app.screen.query_one(Static).render())
        assert "Ctrl-J" in helped and "Shift-Enter" in helped and "queued" in helped
        await pilot.press("escape")
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), "the picker")
        picker = app.screen
        assert isinstance(picker, SessionPicker)
        assert inside_screen(app, "SessionPicker > Vertical")
        # this directory's session first (though the other one is newer), then the other
        assert [i.id for i in picker.sessions] == [named, other]
        labels = [str(o.prompt) for o in picker.query_one(OptionList).options]
        assert labels[0].startswith("release notes") and " 3 ev " in labels[0]  # all events
        assert labels[1].startswith("refactor the parser") and " 1 ev " in labels[1]
        assert "just now" in labels[1] and str(elsewhere) in labels[1]
        await pilot.press("p", "a", "r", "s")  # typing filters: the other directory's
        assert [i.id for i in picker.sessions] == [other]
        await pilot.press("enter")
        await until(pilot, lambda: app.session is not None and app.session.session_id == other)

    run_app(app, scenario, size)
    assert app.left_session == other  # for the shell's "infai --session …" on exit


def test_an_imported_session_is_grouped_under_its_recorded_directory() -> None:
    """A session imported from another tool has no working directory of its own
    (the file must not choose it); the picker shows and groups it under the one
    its import recorded, beside the sessions of that directory."""
    from infai.shells.tui.modals import Listed, grouped, session_label
    from infai.store import SessionInfo

    def info(sid: str, working_dir: str | None, recorded: str | None = None) -> SessionInfo:
        extra = {"import": {"working_dir": recorded}} if recorded else {}
        at = "2026-12-03T12:00:00Z"
        return SessionInfo(
            id=sid, created_at=at, updated_at=at, working_dir=working_dir, extra=extra
        )

    rows = [
        Listed(info("a", "/src/other"), "other", 1),
        Listed(info("b", None, "/src/proj"), "imported", 2),
        Listed(info("c", None), "loose", 3),
        Listed(info("d", "/src/proj"), "mine", 4),
    ]
    assert [r.info.id for r in grouped(rows, "/src/proj")] == ["b", "d", "a", "c"]
    assert session_label(rows[1]).plain.endswith("/src/proj")
    assert session_label(rows[2]).plain.endswith("-")

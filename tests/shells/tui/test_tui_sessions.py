"""Sessions: the picker resumes and starts them, names kept or cleared, an unused new one removed.

Driven by Textual's pilot at 80x24 and at a small 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList

from infai.llm import ScriptedModel
from infai.shells.tui import InfaiApp
from infai.shells.tui.modals import RenameScreen, SessionPicker
from infai.store import StoreIOError
from tui_pilot import SIZES, harness, inside_screen, run_app, send, until


@pytest.mark.parametrize("size", SIZES)
def test_sessions_picker_resumes_and_starts_sessions(tmp_path: Path, size: tuple[int, int]) -> None:
    space = harness(tmp_path, ScriptedModel(["a"]))
    older = space.store.create_session(name="older", working_dir=str(space.working_dir)).id
    newer = space.store.create_session(name="newer", working_dir=str(space.working_dir)).id
    app = InfaiApp(space, older)

    async def scenario(pilot: Pilot[None]) -> None:
        assert app.session is not None and app.session.session_id == older
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker))
        picker = app.screen
        assert isinstance(picker, SessionPicker)
        # newest first: opening a session with another model is activity too
        assert [i.id for i in picker.sessions] == [older, newer]
        assert inside_screen(app, "SessionPicker > Vertical")
        await pilot.press("down", "enter")  # the highlight starts on the current session
        await until(pilot, lambda: app.session is not None and app.session.session_id == newer)
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker))
        await pilot.press("ctrl+n")  # Ctrl-N: a letter filters the list
        await until(pilot, lambda: app.session is not None and app.session.session_id != newer)

    run_app(app, scenario, size)
    # the new session was left empty, so it is gone again; the others stay
    assert {i.id for i in space.store.list_sessions()} == {older, newer}


@pytest.mark.parametrize("size", SIZES)
def test_a_named_new_session_is_kept_and_a_name_can_be_cleared(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = harness(tmp_path)
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        assert app.session is not None
        first = app.session.session_id
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, RenameScreen))
        assert "empty: no name" in str(app.screen.query_one(".keys").render())
        assert inside_screen(app, "RenameScreen > Vertical")
        await pilot.press(*"keep", "enter")
        await pilot.press("ctrl+n")  # leave it empty, but named
        await until(pilot, lambda: app.session is not None and app.session.session_id != first)
        assert space.store.info(first).name == "keep"
        second = app.session.session_id
        await send(pilot, "/rename temp")
        assert space.store.info(second).name == "temp"
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, RenameScreen))
        await pilot.press("backspace", "enter")  # the name selected, deleted: no name
        await until(pilot, lambda: not isinstance(app.screen, RenameScreen))
        assert space.store.info(second).name is None
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, RenameScreen))
        await pilot.press(*"zzz", "escape")  # Esc keeps what was there (no name)
        await until(pilot, lambda: not isinstance(app.screen, RenameScreen))
        assert space.store.info(second).name is None

    run_app(app, scenario, size)
    # the unnamed empty session went when the app ended; the named one stayed
    assert [i.name for i in space.store.list_sessions()] == ["keep"]


@pytest.mark.parametrize("closed", [False, True], ids=["nothing-closed", "writer-closed"])
def test_a_failing_close_while_switching_still_opens_the_new_session_and_leaks_no_lock(
    tmp_path: Path, closed: bool
) -> None:
    """Closing the session left behind raises (before or after its writer closed):
    the picked session opens all the same, and neither lock stays held."""
    space = harness(tmp_path)
    old = space.store.create_session(name="old", working_dir=str(space.working_dir)).id
    new = space.store.create_session(name="new", working_dir=str(space.working_dir)).id
    app = InfaiApp(space, old)

    async def scenario(pilot: Pilot[None]) -> None:
        session = app.session
        assert session is not None and session.session_id == old
        real = session.close

        def failing() -> None:
            if closed:
                real()
            raise StoreIOError(5, "Input/output error")

        session.close = failing  # type: ignore[method-assign]
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), "the picker")
        picker = app.screen
        assert isinstance(picker, SessionPicker)
        picker.query_one(OptionList).highlighted = [i.id for i in picker.sessions].index(new)
        await pilot.press("enter")
        await until(pilot, lambda: app.session is not None and app.session.session_id == new)
        with space.store.open_writer(old, timeout=0.2):  # the old session's lock is free
            pass
        await until(pilot, lambda: any("Input/output" in n.message for n in app._notifications))

    run_app(app, scenario, (80, 24))
    with space.store.open_writer(new, timeout=0.2):  # the new one was closed on the way out
        pass

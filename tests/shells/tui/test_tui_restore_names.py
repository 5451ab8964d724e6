"""Going back in the TUI over a file made by hand (issue 24, item 3): the file,
written between two turns and recorded by the second turn's start (not after a
tool), is asked about with the unsaved-edits question; keep mine leaves it,
take the snapshot's removes it and the notice names it. An ignored file nobody
touched is never said to be "cannot be restored"."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from infai.llm import ScriptedModel
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import ChatView
from infai.shells.tui.filescreens import RestoreScreen
from infai.shells.tui.modals import GRACE
from tui_pilot import files_workspace, run_app, send, until


async def turn(pilot: Pilot[None], app: InfaiApp, text: str) -> None:
    await send(pilot, text)
    await until(pilot, lambda: not app.busy, f"the turn of {text!r}")


def notices(app: InfaiApp) -> list[str]:
    chat = app.query_one(ChatView)
    return [str(s.render()) for s in chat.query(Static) if s.has_class("notice")]


@pytest.mark.parametrize("key", ["k", "t"])
def test_a_file_made_by_hand_between_turns_is_asked_about_and_named(
    tmp_path: Path, key: str
) -> None:
    space = files_workspace(tmp_path, ScriptedModel(["one", "two", "three"]))
    work = space.working_dir
    (work / "a.txt").write_text("a\n")
    (work / ".gitignore").write_text("secret.env\n")
    (work / "secret.env").write_text("TOKEN=1\n")
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await turn(pilot, app, "first")
        assert app.session is not None
        picked = list(app.session.view.path(to_boundary=False))[-1].id
        (work / "mine.txt").write_text("made by hand\n")
        await turn(pilot, app, "second")  # its start records mine.txt
        await app.pick(picked)
        await send(pilot, "again")
        await until(pilot, lambda: isinstance(app.screen, RestoreScreen), "the question")
        question = str(app.screen.query_one("#conflicts", Static).render())
        assert "mine.txt" in question and "a.txt" not in question
        assert (work / "mine.txt").exists()  # nothing done while asking
        await pilot.pause(GRACE + 0.05)
        await pilot.press(key)
        await until(pilot, lambda: not isinstance(app.screen, RestoreScreen), "the answer")
        await until(pilot, lambda: not app.busy, "the turn")
        said = notices(app)
        assert not any("cannot be restored" in n for n in said), said
        if key == "k":
            assert (work / "mine.txt").read_text() == "made by hand\n"
            assert not any("restored 1 file" in n for n in said), said
            assert "files: kept as they are: mine.txt" in said, said
            return
        assert not (work / "mine.txt").exists()
        assert "files: restored 1 file: mine.txt (removed)" in said, said
        toasts = [n.message for n in app._notifications]
        assert "restored 1 file: mine.txt (removed)" in toasts, toasts
        assert (work / "secret.env").read_text() == "TOKEN=1\n"

    run_app(app, scenario, (80, 24))

"""The files on the timeline in the TUI (issue 14): a continue from an older event
restores its files, asking about files changed outside the agent; the timeline
marks snapshots and restores with counts and shows an event's diff on ``d``;
the status bar says when the disk is not HEAD's; what opening said is shown.

Real directories with real files; each choice is judged by the files on disk
and by where the prompt went in the session. Driven by Textual's pilot at 80x24
and 60x20 (helpers: tests/support/tui_pilot.py).
"""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual._compositor import CompositorUpdate
from textual.pilot import Pilot
from textual.widgets import Static

from infai.agent import Harness, SessionCheckpoints
from infai.llm import Message, ScriptedModel
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import ChatView, Notice
from infai.shells.tui.filescreens import DiffScreen, RestoreScreen
from infai.shells.tui.modals import GRACE
from infai.shells.tui.panels import PendingBar, StatusBar, Timeline
from infai.store import Entry, RestoreRecord, SnapshotRecord
from tui_pilot import (
    SIZES,
    StoreCalls,
    bash_call,
    files_workspace,
    inside_screen,
    run_app,
    send,
    until,
    walk,
)

REPLIES = ["first answer", "second answer", "third answer", "fourth answer"]
#: the second turn's changes made by the agent (a bash call), as :func:`two_turns` wants
BY_TOOL: list[Message | str] = [
    "first answer",
    bash_call("printf 'two\\n' > a.txt && printf 'b2\\n' > b.txt"),
    "second answer",
    "third answer",
    "fourth answer",
]
ALLOW = ("bash *",)
#: an escape sequence that sets the terminal's title, in a file's name
TITLE = "\x1b]0;pwned\x07"
ATTACKS = re.compile("\x1b\\]|\x07")


def drawn(app: InfaiApp) -> str:
    """What Textual writes to the terminal for the whole current screen."""
    update = app.screen._compositor.render_update(full=True)
    assert isinstance(update, CompositorUpdate)
    return str(update.render_segments(app.console))


def shown(widget: Static) -> str:
    return str(widget.render())


def path_entries(app: InfaiApp) -> list[Entry]:
    assert app.session is not None
    return list(app.session.view.path(to_boundary=False))


def all_entries(app: InfaiApp) -> list[Entry]:
    assert app.session is not None
    return list(app.session.view.entries())


async def turn(pilot: Pilot[None], app: InfaiApp, text: str) -> None:
    await send(pilot, text)
    await until(pilot, lambda: not app.busy, f"the turn of {text!r}")


async def two_turns(pilot: Pilot[None], app: InfaiApp, work: Path) -> str:
    """Turn one with a.txt "one", b.txt "b1" (written before it); turn two, whose
    bash call (the model's :data:`BY_TOOL`) makes them "two", "b2": the agent's
    changes, which going back replaces without asking. Returns the first
    answer's id (the event to continue from)."""
    (work / "a.txt").write_text("one\n")
    (work / "b.txt").write_text("b1\n")
    await turn(pilot, app, "first")
    first_answer = path_entries(app)[-1]
    assert first_answer.role == "assistant"
    await turn(pilot, app, "second")
    assert (work / "a.txt").read_text() == "two\n" and (work / "b.txt").read_text() == "b2\n"
    return first_answer.id


def prompt_parent(app: InfaiApp, text: str) -> Entry:
    """The event the user's prompt ``text`` follows."""
    assert app.session is not None
    view = app.session.view
    for entry in path_entries(app):
        if entry.role == "user" and entry.preview == text:
            return view.entry(entry.parent_id)
    raise AssertionError(f"no prompt {text!r} on the path")


CHOICES = [
    ("k", (80, 24)),
    ("t", (60, 20)),
    ("f", (80, 24)),
    ("c", (60, 20)),
    ("ctrl+c", (80, 24)),
]


@pytest.mark.slow
@pytest.mark.parametrize(("key", "size"), CHOICES)
def test_a_continue_asks_about_files_changed_outside_and_does_as_answered(
    tmp_path: Path, key: str, size: tuple[int, int]
) -> None:
    space = files_workspace(tmp_path, ScriptedModel(BY_TOOL), ALLOW)
    work = space.working_dir
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        picked = await two_turns(pilot, app, work)
        await app.pick(picked)
        await until(pilot, lambda: app.query_one(PendingBar).display, "the pending bar")
        (work / "a.txt").write_text("mine\n")  # changed outside the agent
        before = len(all_entries(app))
        await send(pilot, "again")
        await until(pilot, lambda: isinstance(app.screen, RestoreScreen), "the question")
        await until(pilot, lambda: inside_screen(app, "RestoreScreen > Vertical"), "fits")
        question = shown(app.screen.query_one("#conflicts", Static))
        assert "a.txt" in question and "b.txt" not in question  # only the conflict
        assert (work / "a.txt").read_text() == "mine\n"  # nothing done while asking
        await pilot.pause(GRACE + 0.05)
        await pilot.press(key)
        await until(pilot, lambda: not isinstance(app.screen, RestoreScreen), "the answer")
        await until(pilot, lambda: not app.busy, "the turn")
        a, b = (work / "a.txt").read_text(), (work / "b.txt").read_text()
        kinds = [e.kind for e in all_entries(app)]
        assert app.session is not None
        if key in ("c", "ctrl+c"):  # nothing changed; the prompt is back in the box
            assert (a, b) == ("mine\n", "b2\n")
            assert len(all_entries(app)) == before
            assert app.prompt.value == "again"
            assert app.session.pending_parent == picked
            return
        if key == "f":  # the conversation continues from the pick; the files stay
            assert (a, b) == ("mine\n", "b2\n")
            assert "restore" not in kinds
            parent = prompt_parent(app, "again")
            assert parent.kind == "snapshot" and parent.parent_id == picked
            return
        # restored once, and the prompt follows the restore, which follows the pick
        assert kinds.count("restore") == 1
        parent = prompt_parent(app, "again")
        if key == "k":  # the file kept differs from the restore's: the turn recorded it
            assert parent.kind == "snapshot"
            parent = app.session.view.entry(parent.parent_id)
        assert parent.kind == "restore" and parent.parent_id == picked
        restore = app.session.view.event(parent.id, resolve=True).record
        assert isinstance(restore, RestoreRecord)
        reasons = [
            r.reason
            for e in all_entries(app)
            if isinstance(r := app.session.view.event(e.id, resolve=True).record, SnapshotRecord)
        ]
        assert "before restore" in reasons  # what was on disk is on the branch left
        if key == "k":
            assert (a, b) == ("mine\n", "b1\n")
            assert restore.kept == ["a.txt"]
        else:
            assert (a, b) == ("one\n", "b1\n")

    run_app(app, scenario, size)


@pytest.mark.parametrize("size", SIZES)
def test_the_timeline_marks_file_changes_shows_a_diff_and_a_continue_restores(
    tmp_path: Path, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    replies = [*BY_TOOL[:3], bash_call("printf '\\000\\002' > c.bin"), *BY_TOOL[3:]]
    space = files_workspace(tmp_path, ScriptedModel(replies), ALLOW)
    work = space.working_dir
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        (work / "c.bin").write_bytes(b"\x00\x01")
        picked = await two_turns(pilot, app, work)
        await turn(pilot, app, "third")  # the model's bash call changes c.bin
        assert (work / "c.bin").read_bytes() == b"\x00\x02"
        assert app.session is not None
        spare = space.store.create_session(working_dir=str(tmp_path)).id  # its writer's class
        calls = StoreCalls(monkeypatch, space.store, spare)
        await pilot.press("ctrl+t")
        timeline = app.query_one(Timeline)
        labels = [str(n.label) for n in walk(timeline.root)]
        assert any("▣ files: 3 files recorded · turn start" in x for x in labels), labels
        assert any("▣ files: 2 changed · after bash" in x for x in labels), labels
        assert any("▣ files: 1 changed · after bash" in x for x in labels), labels
        # d on the second turn's snapshot: what changed from the first's
        nodes = {str(n.label): n for n in walk(timeline.root) if n.data}
        second = next(n for label, n in nodes.items() if "2 changed" in label)
        timeline.move_cursor(second)
        await pilot.press("ctrl+d")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen), "the diff")
        diff = shown(app.screen.query_one("#diff", Static))
        assert "-one" in diff and "+two" in diff and "-b1" in diff and "+b2" in diff
        assert "c.bin" not in diff
        await until(pilot, lambda: inside_screen(app, "DiffScreen > Vertical"), "fits")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, DiffScreen))
        third = next(n for label, n in nodes.items() if "1 changed" in label)
        timeline.move_cursor(third)
        await pilot.press("ctrl+d")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen), "the binary diff")
        diff = shown(app.screen.query_one("#diff", Static))
        assert "binary" in diff and "c.bin" in diff
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, DiffScreen))
        # every change since the pick is the agent's: the continue restores without asking
        timeline.select_node(next(n for n in walk(timeline.root) if n.data == picked))
        await until(pilot, lambda: app.query_one(PendingBar).display, "the pending bar")
        await send(pilot, "again")
        await until(pilot, lambda: not app.busy, "the turn")
        assert not isinstance(app.screen, RestoreScreen)
        assert (work / "a.txt").read_text() == "one\n"
        assert (work / "b.txt").read_text() == "b1\n"
        assert (work / "c.bin").read_bytes() == b"\x00\x01"
        parent = prompt_parent(app, "again")
        assert parent.kind == "restore" and parent.parent_id == picked
        assert [e.kind for e in all_entries(app)].count("restore") == 1
        await until(
            pilot,
            lambda: any("↺ restored 3 files" in str(n.label) for n in walk(timeline.root)),
            "the restore's mark",
        )
        assert calls.on_loop() == []  # every store call the TUI made ran in a thread

    run_app(app, scenario, size)


@pytest.mark.parametrize("size", SIZES)
def test_the_status_bar_says_when_the_files_on_disk_are_not_heads(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = files_workspace(tmp_path, ScriptedModel(REPLIES))
    work = space.working_dir
    app = InfaiApp(space)

    def bar() -> str:
        return shown(app.query_one(StatusBar))

    async def scenario(pilot: Pilot[None]) -> None:
        (work / "a.txt").write_text("one\n")
        await turn(pilot, app, "first")
        await until(pilot, lambda: app._files_check is not None and app._files_check.done())
        assert "files ≠ HEAD" not in bar()
        (work / "a.txt").write_text("edited by hand\n")
        (work / "new.txt").write_text("new\n")
        app.post_message(events.AppFocus())  # back in the terminal
        await until(pilot, lambda: "files ≠ HEAD (2 changed)" in bar(), "the files' state")
        await until(pilot, lambda: "files ≠ HEAD (2 changed)" in drawn(app), "drawn in the bar")
        await turn(pilot, app, "second")  # the turn records them: HEAD's again
        await until(pilot, lambda: "files ≠ HEAD" not in bar(), "the state cleared")

    run_app(app, scenario, size)


def test_a_long_snapshots_progress_is_in_the_bar_while_it_runs_and_leaves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long first snapshot says where it is every second: the status bar shows
    the latest, in place (not a chat line and a toast each), and it leaves the bar
    once the snapshot is over (it stayed there, hiding HEAD, until the next turn)."""
    from infai.checkpoints import progress as progress_module
    from infai.checkpoints import walk as walk_module

    monkeypatch.setattr(walk_module, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(progress_module, "QUIET_S", 0.0)  # every snapshot is "long"
    monkeypatch.setattr(progress_module, "EVERY_S", 0.0)
    space = files_workspace(tmp_path, ScriptedModel(REPLIES))
    for n in range(30):
        (space.working_dir / f"f{n}.txt").write_text(f"{n}\n")
    app = InfaiApp(space)
    in_bar: list[str] = []
    toasts: list[str] = []
    real_show, real_notify = StatusBar.show, app.notify

    def show(bar: StatusBar, status: Any) -> None:
        in_bar.append(status.notice)
        real_show(bar, status)

    def notify(message: str, *args: Any, **kwargs: Any) -> None:
        toasts.append(message)
        real_notify(message, *args, **kwargs)

    monkeypatch.setattr(StatusBar, "show", show)
    monkeypatch.setattr(app, "notify", notify)

    async def scenario(pilot: Pilot[None]) -> None:
        await turn(pilot, app, "first")
        progress = [x for x in in_bar if x.startswith(f"files: snapshot of {space.working_dir}")]
        assert progress and progress[-1].endswith("30 files, 0 MB read…"), in_bar
        bar = shown(app.query_one(StatusBar))
        assert "snapshot of" not in bar and "HEAD #2 of 3" in bar, bar
        chat = app.query_one(ChatView)
        assert not [n for n in chat.query(Notice) if "snapshot of" in shown(n)]
        assert not [t for t in toasts if "snapshot of" in t], toasts
        assert any(
            "▣ files: 30 files recorded · turn start" in shown(s) for s in chat.query(Static)
        )

    run_app(app, scenario, (100, 24))


def test_a_session_whose_directory_is_gone_says_so_in_the_bar(tmp_path: Path) -> None:
    """Its files cannot be looked at: the bar says the directory is missing, not
    the name of whatever the failed snapshot raised."""
    space = files_workspace(tmp_path, ScriptedModel(REPLIES))
    gone = tmp_path / "removed-worktree"
    sid = space.store.create_session(working_dir=str(gone)).id
    app = InfaiApp(space, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: app._files_check is not None and app._files_check.done())
        bar = shown(app.query_one(StatusBar))
        assert "files: directory missing" in bar and "not checked" not in bar, bar

    run_app(app, scenario, (80, 24))


def test_opening_a_session_shows_what_recovering_its_files_said(tmp_path: Path) -> None:
    space = files_workspace(tmp_path, ScriptedModel(REPLIES))
    work, store = space.working_dir, space.store
    (work / "a.txt").write_text("one\n")

    async def turns() -> tuple[str, str]:
        session = space.open(space.new_session())
        async for _ in session.prompt("one"):
            pass
        first = session.view.head
        (work / "a.txt").write_text("two\n")
        async for _ in session.prompt("two"):
            pass
        await session.aclose()
        assert first is not None
        return session.session_id, first

    sid, first = asyncio.run(turns())
    files = SessionCheckpoints(store, work)
    with store.open_writer(sid) as writer:  # a process killed after applying, before recording
        _now, plan, _last, _target = files.plan(writer, first)
        meta = {"source": first, "before": None, "session": sid, "parent": first}
        files.cp.apply(plan, metadata=meta)
    files.close()
    app = InfaiApp(Harness(store, work, config=space.config), sid)

    async def scenario(pilot: Pilot[None]) -> None:
        chat = app.query_one(ChatView)
        await until(
            pilot,
            lambda: any("was completed" in shown(n) for n in chat.query(Notice)),
            "the recovery notice",
        )

    run_app(app, scenario, (80, 24))


def test_a_conflicting_path_and_its_diff_are_drawn_inert(tmp_path: Path) -> None:
    space = files_workspace(tmp_path, ScriptedModel(BY_TOOL), ALLOW)
    work = space.working_dir
    app = InfaiApp(space)
    evil = work / f"evil{TITLE}.txt"

    async def scenario(pilot: Pilot[None]) -> None:
        evil.write_text("x1\n")
        picked = await two_turns(pilot, app, work)
        evil.write_text(f"x2 {TITLE}\n")
        await turn(pilot, app, "third")
        await pilot.press("ctrl+t")
        timeline = app.query_one(Timeline)
        third = next(n for n in walk(timeline.root) if "1 changed" in str(n.label))
        timeline.move_cursor(third)
        await pilot.press("ctrl+d")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen), "the diff")
        await until(pilot, lambda: "pwned" in drawn(app), "the diff drawn")
        assert ATTACKS.findall(drawn(app)) == []
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, DiffScreen))
        await app.pick(picked)
        evil.write_text("mine\n")
        await send(pilot, "again")
        await until(pilot, lambda: isinstance(app.screen, RestoreScreen), "the question")
        await until(pilot, lambda: "pwned" in drawn(app), "the question drawn")
        assert ATTACKS.findall(drawn(app)) == []
        assert "\\x1b]0;pwned\\x07" in shown(app.screen.query_one("#conflicts", Static))
        await pilot.pause(GRACE + 0.05)
        await pilot.press("k")
        await until(pilot, lambda: not app.busy, "the turn")
        assert evil.read_text() == "mine\n"

    run_app(app, scenario, (80, 24))


def test_a_continue_to_files_already_on_disk_still_follows_the_picked_event(
    tmp_path: Path,
) -> None:
    """The files are the picked event's already (put back by hand): nothing is
    restored, but the files now are recorded on the branch left ("before
    restore", which moves HEAD); the prompt must still follow the pick."""
    space = files_workspace(tmp_path, ScriptedModel(BY_TOOL), ALLOW)
    work = space.working_dir
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        picked = await two_turns(pilot, app, work)
        await app.pick(picked)
        (work / "a.txt").write_text("one\n")
        (work / "b.txt").write_text("b1\n")
        await send(pilot, "again")
        await until(pilot, lambda: not app.busy, "the turn")
        assert not isinstance(app.screen, RestoreScreen)
        kinds = [e.kind for e in all_entries(app)]
        assert "restore" not in kinds
        assert prompt_parent(app, "again").id == picked
        assert app.session is not None
        reasons = [
            r.reason
            for e in all_entries(app)
            if isinstance(r := app.session.view.event(e.id, resolve=True).record, SnapshotRecord)
        ]
        assert "before restore" in reasons
        assert (work / "a.txt").read_text() == "one\n"

    run_app(app, scenario, (60, 20))


def test_ctrl_c_during_a_restore_lets_it_finish_and_gives_the_prompt_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = files_workspace(tmp_path, ScriptedModel(BY_TOOL), ALLOW)
    work = space.working_dir
    app = InfaiApp(space)
    started, release = threading.Event(), threading.Event()
    real = SessionCheckpoints.restore

    def held(self: SessionCheckpoints, *args: Any, **kwargs: Any) -> Any:
        started.set()
        assert release.wait(30), "never released"
        return real(self, *args, **kwargs)

    async def scenario(pilot: Pilot[None]) -> None:
        picked = await two_turns(pilot, app, work)
        await app.pick(picked)
        monkeypatch.setattr(SessionCheckpoints, "restore", held)
        await send(pilot, "again")
        await until(pilot, started.is_set, "the restore under way")
        await pilot.press("ctrl+c")
        await pilot.pause(0.2)
        assert app.busy and not app.prompt.value  # the restore runs on: not half-watched
        release.set()
        await until(pilot, lambda: not app.busy, "the cancel")
        await until(pilot, lambda: app.prompt.value == "again", "the prompt given back")
        assert (work / "a.txt").read_text() == "one\n"  # the restore ran to its end
        assert "again" not in [e.preview for e in all_entries(app)]  # not sent
        await until(pilot, lambda: app.head.id == all_entries(app)[-1].id, "shown as stored")
        assert all_entries(app)[-1].kind == "restore"

    run_app(app, scenario, (80, 24))


def test_another_open_session_in_the_directory_is_asked_about(tmp_path: Path) -> None:
    space = files_workspace(tmp_path, ScriptedModel(BY_TOOL), ALLOW)
    work = space.working_dir
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        picked = await two_turns(pilot, app, work)
        await app.pick(picked)
        store = space.store
        other = store.open_writer(store.create_session(working_dir=str(work)).id)
        try:
            await send(pilot, "again")
            await until(pilot, lambda: isinstance(app.screen, RestoreScreen), "the question")
            question = shown(app.screen.query_one("#conflicts", Static))
            assert other.session_id in question and "Other open sessions" in question
            assert (work / "a.txt").read_text() == "two\n"  # nothing done while asking
            await pilot.pause(GRACE + 0.05)
            await pilot.press("k")  # no conflicting file: go on, told of the other
            await until(pilot, lambda: not app.busy, "the turn")
        finally:
            other.close()
        assert (work / "a.txt").read_text() == "one\n"
        assert prompt_parent(app, "again").kind == "restore"

    run_app(app, scenario, (60, 20))

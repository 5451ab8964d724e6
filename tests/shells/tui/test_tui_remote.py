"""The TUI over a server, driven in-process (fast; the real-terminal scenarios are in
``test_tui_remote_tmux.py``): a prompt's turn runs on the server and shows as a
local one does; another client's turn is followed as it happens, its question
asked here and closed when answered there; a stream that
breaks off (the server restarting on its port) is followed again, with what was
appended meanwhile; ``/model`` says in one line that it does not work remotely,
``/rename`` renames the server's session; the status bar shows the context window.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from textual.pilot import Pilot

from infai.llm import ScriptedModel
from infai.shells.cli import main
from infai.shells.remote import Remote
from infai.shells.remote.session import RemoteHarness
from infai.shells.server import ServerThread, create_app
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import AssistantMessage, ChatView, Notice
from infai.shells.tui.modals import ApprovalScreen, RenameScreen
from infai.shells.tui.panels import StatusBar, home_short
from infai.shells.tui.remote_io import NEW_SESSION, NO_MODEL_SWITCH, RemoteBackend, new_session
from infai.shells.tui.usercontext import NO_MENTION
from infai.store import Store
from tui_pilot import run_app, send, until, write_call

TOKEN = "remote-pilot-token-0123456789abcdef"


class Served:
    """A server over a store under tmp (it can be restarted on its port)."""

    def __init__(self, tmp_path: Path, replies: list[Any] | None = None) -> None:
        self.store = Store(tmp_path / "home")
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.replies = replies or [f"answer {n}" for n in range(20)]
        self.server = self._start(0)
        self.client = Remote(self.server.url, TOKEN)
        self.clients: list[Remote] = []

    def _start(self, port: int) -> ServerThread:
        model = ScriptedModel(self.replies)
        app = create_app(
            self.store, token=TOKEN, model_factory=lambda name: model, working_dir=self.work
        )
        return ServerThread(app, port=port).start()

    def restart(self) -> None:
        port = self.server.port
        self.server.stop()
        self.replies = [f"restarted {n}" for n in range(20)]  # the model's, anew
        self.server = self._start(port)

    def messages(self, sid: str) -> list[str]:
        out = []
        for entry in self.client.get(f"/sessions/{sid}/events")["events"]:
            if entry["kind"] == "message":
                event = self.client.get(f"/sessions/{sid}/events/{entry['id']}")
                out.append(event["record"]["content"])
        return out

    def close(self) -> None:
        for client in [self.client, *self.clients]:
            client.close()
        self.server.stop()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path)
    yield s
    s.close()


def remote_app(served: Served, tmp_path: Path, sid: str | None) -> InfaiApp:
    """The app over ``served`` (its client closed with the served server, as the
    command line closes its own when the app ends)."""
    client = Remote(served.server.url, TOKEN)
    served.clients.append(client)
    space = RemoteHarness(client, tmp_path / "client", tmp_path)
    return InfaiApp(space, sid, backend=RemoteBackend())


def test_a_new_session_works_in_the_directory_asked_for_and_says_where(
    served: Served, tmp_path: Path
) -> None:
    """``attach --dir``: sessions made from the TUI (the first, and Ctrl-N's) work in
    that directory on the server, and say so; one left unused goes away again."""
    there = tmp_path / "there"
    there.mkdir()
    client = Remote(served.server.url, TOKEN)
    served.clients.append(client)
    made = str(new_session(client, str(there))["id"])  # as `infai attach --dir` makes it
    space = RemoteHarness(client, tmp_path / "client", tmp_path, str(there))
    app = InfaiApp(space, made, backend=RemoteBackend(made))

    async def scenario(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: app.session is not None, "the session")
        said = NEW_SESSION.format(dir=there)
        await until(pilot, lambda: said in _notices(app), "where it works")
        assert app.state.working_dir == home_short(there)
        await send(pilot, "hello")
        await until(pilot, lambda: not app.busy and replies(app) == ["answer 0"], "the reply")
        await app.open_session(None)  # Ctrl-N: a new one, in the same directory
        assert app.session is not None and app.session.session_id != made
        newer = app.session.session_id
        assert served.client.get(f"/sessions/{newer}")["working_dir"] == str(there)
        await app.open_session(made)  # the new one, unused, goes away
        assert newer not in [s["id"] for s in served.client.get("/sessions")["sessions"]]

    run_app(app, scenario, (100, 30))
    assert served.client.get(f"/sessions/{made}")["working_dir"] == str(there)
    assert served.messages(made) == ["hello", "answer 0"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--dir", "relative/dir"], "--dir 'relative/dir': give an absolute directory"),
        (["SESSION", "--dir", "/srv"], "--dir is where a new session works: not with SESSION"),
        (["--continue", "--dir", "/srv"], "not with SESSION or --continue"),
    ],
)
def test_attach_dir_is_refused_in_one_line_where_it_cannot_apply(
    args: list[str], said: str
) -> None:
    """Checked before anything else (no server is asked, no session made)."""
    result = CliRunner().invoke(main, ["attach", "http://127.0.0.1:9", "--token", "t", *args])
    assert result.exit_code == 2, result.output
    assert said in result.output and len(result.output.strip().splitlines()) == 1


def _notices(app: InfaiApp) -> str:
    return " ".join(str(n.render()) for n in app.query_one(ChatView).query(Notice))


def replies(app: InfaiApp) -> list[str]:
    return [reply.text for reply in app.query_one(ChatView).query(AssistantMessage)]


def prompt_elsewhere(served: Served, sid: str, text: str) -> None:
    """Another client's turn (as a second TUI or `infai --remote run` sends it)."""
    for _frame in served.client.stream(f"/sessions/{sid}/prompt", {"text": text, "stream": True}):
        pass


def test_a_turn_runs_on_the_server_and_shows_as_a_local_one(served: Served, tmp_path: Path) -> None:
    sid = str(served.client.post("/sessions", {})["id"])
    app = remote_app(served, tmp_path, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "hello")
        await until(pilot, lambda: not app.busy and replies(app) == ["answer 0"], "the reply")
        assert served.messages(sid) == ["hello", "answer 0"]
        detail = served.client.get(f"/sessions/{sid}")
        assert app.head.count == detail["events"]
        # the status bar's gauge, as locally: the model's window and the tokens used
        assert (app.state.context_window, detail["context_window"]) == (128_000, 128_000)
        assert app.state.used_tokens == detail["used_tokens"] > 0
        assert f"/{128_000:,}" in str(app.query_one(StatusBar).render())
        (tmp_path / "notes.txt").write_text("mine")
        await send(pilot, "see @notes.txt")  # a file of this machine: not attached, said
        await until(pilot, lambda: not app.busy and len(replies(app)) == 2, "the second reply")
        notices = [str(n.render()) for n in app.query_one(ChatView).query(Notice)]
        assert any(NO_MENTION in notice for notice in notices), notices
        assert served.messages(sid)[2] == "see @notes.txt"
        await send(pilot, "/model other")
        await until(pilot, lambda: NO_MODEL_SWITCH in _toasts(app), "the refusal")
        await send(pilot, "/rename the plan")  # the server's session is renamed
        await until(pilot, lambda: _name(served, sid) == "the plan" == app.head.name, "the name")
        assert "the plan" in str(app.title)
        await send(pilot, "/rename")  # no name: the dialog, with the server's name in it
        await until(pilot, lambda: isinstance(app.screen, RenameScreen), "the rename dialog")
        await pilot.press("escape")

    run_app(app, scenario, (100, 30))


def test_another_clients_turns_are_followed_even_after_the_stream_broke_off(
    served: Served, tmp_path: Path
) -> None:
    sid = str(served.client.post("/sessions", {})["id"])
    app = remote_app(served, tmp_path, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.pause(0.1)
        prompt_elsewhere(served, sid, "from elsewhere")
        await until(pilot, lambda: replies(app) == ["answer 0"], "the other client's turn")
        served.restart()  # the stream breaks off; the app opens it again
        served.client.close()
        served.client = Remote(served.server.url, TOKEN)
        prompt_elsewhere(served, sid, "after the restart")
        await until(pilot, lambda: replies(app) == ["answer 0", "restarted 0"], "the turn after")
        said = ["from elsewhere", "answer 0", "after the restart", "restarted 0"]
        assert served.messages(sid) == said

    run_app(app, scenario, (100, 30))


def test_a_question_of_another_clients_turn_is_asked_and_closed_when_answered_there(
    tmp_path: Path,
) -> None:
    """The question of a turn this app did not start is asked here too; answered by
    the other client first, the dialog goes and the turn's end is shown."""
    served = Served(tmp_path, [write_call("q.txt"), "wrote q"])
    sid = str(served.client.post("/sessions", {})["id"])
    app = remote_app(served, tmp_path, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.pause(0.1)
        started = served.client.post(f"/sessions/{sid}/prompt", {"text": "write q"})
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the question")
        assert app.busy  # another client's turn: Ctrl-C would cancel it
        [question] = served.client.get(f"/sessions/{sid}/approvals")["approvals"]
        answer = {"id": question["id"], "answer": "allow"}
        served.client.post(f"/sessions/{sid}/approvals", answer)
        await until(pilot, lambda: not isinstance(app.screen, ApprovalScreen), "the dialog closed")
        await until(pilot, lambda: replies(app)[-1:] == ["wrote q"], "the turn's end")
        await until(pilot, lambda: not app.busy, "the app free again")
        assert (served.work / "q.txt").read_text() == "hello\n"
        assert served.client.get(f"/sessions/{sid}")["turn"] is None, started

    try:
        run_app(app, scenario, (100, 30))
    finally:
        served.close()


def _name(served: Served, sid: str) -> str | None:
    name: str | None = served.client.get(f"/sessions/{sid}")["name"]
    return name


def _toasts(app: Any) -> str:
    return " ".join(str(n.message) for n in app._notifications)

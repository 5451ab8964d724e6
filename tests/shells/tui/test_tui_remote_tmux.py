"""``infai --remote URL`` (and ``infai attach URL SESSION``): the TUI against a real
``infai serve`` process, in a real terminal (tmux), as a person meets it.

The server runs a scripted model (and a slow fake OpenAI one for the cancel);
each test makes its own session over the API, opens the TUI on it and checks
both the screen and what the server holds: the conversation is shown, a prompt
streams and settles, a permission question answered in the TUI lets the
server's turn go on, Ctrl-C cancels the turn on the server, and a TUI closed
while a question waits can be re-opened (a second TUI) showing the question,
which it answers. What cannot work remotely (``!cmd``) says so in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fakeapi import FakeOpenAI, Reply
from infai.agent.loop import INTERRUPTED_TURN
from infai.shells.remote import Remote
from infai.shells.remote.session import SERVERS_MODEL
from infai.shells.tui.modals import GRACE
from infai.shells.tui.panels import short_model
from infai.shells.tui.usercontext import NO_BANG
from serveproc import Serve
from tmux_term import INFAI, Terminal, flat

pytestmark = pytest.mark.slow  # a server process and one or two TUIs in tmux each

TOKEN = "remote-tui-token-0123456789abcdef"
WAIT = 15.0  # a loaded machine: a turn through the server and back to the screen


@dataclass
class Server:
    url: str
    work: Path
    scripts: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("remote-tui")
    home, work, config, scripts = tmp / "home", tmp / "work", tmp / "config.toml", tmp / "s"
    work.mkdir()
    scripts.mkdir()
    default = scripts / "default.json"
    default.write_text(json.dumps(["hello"] * 20))
    slow_text = " ".join(f"word{n}" for n in range(60))
    with FakeOpenAI([Reply(text=slow_text, pause=0.5)] * 4) as slow:
        config.write_text(
            f'[models.slow]\nprovider = "openai"\nmodel = "m"\nbase_url = "{slow.base_url}"\n'
        )
        with Serve(home, work, TOKEN, "--model", f"scripted:{default}", config=config) as url:
            yield Server(url, work, scripts)


def session(server: Server, name: str, *replies: object, model: str | None = None) -> str:
    """A session of its own on the server, its model scripted with ``replies``."""
    if model is None:
        script = server.scripts / f"{name}.json"
        script.write_text(json.dumps(list(replies)))
        model = f"scripted:{script}"
    with Remote(server.url, TOKEN) as client:
        return str(client.post("/sessions", {"model": model})["id"])


def api(server: Server, path: str, **params: Any) -> Any:
    with Remote(server.url, TOKEN) as client:
        return client.get(path, **params)


def contents(server: Server, sid: str) -> list[str]:
    """The text of the session's messages on the active path, as the server has them."""
    out = []
    for entry in api(server, f"/sessions/{sid}/events")["events"]:
        if entry["kind"] == "message":
            event = api(server, f"/sessions/{sid}/events/{entry['id']}")
            out.append(event["record"]["content"])
    return out


def write_call(path: str) -> dict[str, object]:
    call = {"id": "w1", "name": "write_file", "arguments": {"path": path, "content": "hi\n"}}
    return {"content": "", "tool_calls": [call]}


@pytest.fixture
def terminals(tmp_path: Path) -> Iterator[list[Terminal]]:
    made: list[Terminal] = []
    yield made
    for term in made:
        term.close()


def open_tui(terminals: list[Terminal], tmp: Path, *args: str) -> Terminal:
    where = tmp / f"t{len(terminals)}"
    where.mkdir()
    term = Terminal(where, (100, 30))
    terminals.append(term)
    term.start(*args)
    return term


def answer(term: Terminal, key: str) -> None:
    """Answer the dialog on the screen, after its pause (keys before it are typing)."""
    time.sleep(GRACE + 0.1)
    term.burst(key)


def send(term: Terminal, text: str) -> None:
    """Type ``text``, then Enter once it is in the box (not as one paste)."""
    term.burst(text)
    term.wait_for(lambda s: text in s, f"{text!r} typed", WAIT)
    term.burst("Enter")


def until(server: Server, sid: str, check: Any, what: str) -> dict[str, Any]:
    """Poll the session's detail on the server until ``check`` holds."""
    deadline = time.monotonic() + WAIT
    while True:
        detail: dict[str, Any] = api(server, f"/sessions/{sid}")
        if check(detail):
            return detail
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {detail}"
        time.sleep(0.1)


def test_the_conversation_a_prompt_and_an_approval_over_the_server(
    server: Server, tmp_path: Path, terminals: list[Terminal]
) -> None:
    sid = session(server, "talk", "the first answer", write_call("x.txt"), "wrote x.txt")
    with Remote(server.url, TOKEN) as client:  # a conversation made elsewhere
        for _frame in client.stream(
            f"/sessions/{sid}/prompt", {"text": "first question", "stream": True}
        ):
            pass
    term = open_tui(terminals, tmp_path, "--remote", server.url, "--token", TOKEN, "--session", sid)
    shown = term.wait_for(lambda s: "the first answer" in s, "the conversation", WAIT)
    assert "first question" in shown

    send(term, "!ls")  # a command of this machine: said, kept in the box
    term.wait_for(lambda s: NO_BANG in flat(s), "the !cmd refusal", WAIT)
    term.burst("C-u")
    term.wait_for(lambda s: "!ls" not in s, "the box cleared", WAIT)

    send(term, "please write x")
    term.wait_for(lambda s: "Allow write_file?" in s, "the approval dialog", WAIT)
    assert not (server.work / "x.txt").exists()  # the server's turn waits for the answer
    answer(term, "y")
    term.wait_for(lambda s: "wrote x.txt" in s, "the turn going on after the answer", WAIT)
    assert (server.work / "x.txt").read_text() == "hi\n"
    until(server, sid, lambda d: d["turn"] is None, "the turn's end")
    said = contents(server, sid)
    assert said[:2] == ["first question", "the first answer"]
    assert said[2] == "please write x" and said[-1] == "wrote x.txt"
    assert "saved" in term.screen()


def test_ctrl_c_cancels_the_turn_on_the_server(
    server: Server, tmp_path: Path, terminals: list[Terminal]
) -> None:
    sid = session(server, "slow", model="slow")
    term = open_tui(terminals, tmp_path, "--remote", server.url, "--token", TOKEN, "--session", sid)
    send(term, "count slowly")
    term.wait_for(lambda s: "word1 " in s, "the reply streaming", WAIT)
    assert until(server, sid, lambda d: d["turn"] is not None, "the turn")["turn"]
    term.burst("C-c")
    term.wait_for(lambda s: "turn interrupted" in s, "the interruption", WAIT)
    until(server, sid, lambda d: d["turn"] is None, "the turn cancelled on the server")
    assert "word59" not in term.screen()
    said = contents(server, sid)
    assert said[0] == "count slowly" and said[-1] == INTERRUPTED_TURN, said


def test_a_question_left_waiting_is_shown_and_answered_from_another_tui(
    server: Server, tmp_path: Path, terminals: list[Terminal]
) -> None:
    sid = session(server, "again", write_call("again.txt"), "done again")
    url = server.url.removesuffix("/v1")
    first = open_tui(terminals, tmp_path, "--remote", url, "--token", TOKEN, "--session", sid)
    send(first, "write again.txt")
    first.wait_for(lambda s: "Allow write_file?" in s, "the question", WAIT)
    first.close()  # the terminal goes, as a closed laptop's: the question waits on the server
    until(server, sid, lambda d: d["pending_approvals"] == 1 and d["turn"], "the question")

    second = open_tui(terminals, tmp_path, "attach", url, sid, "--token", TOKEN)
    shown = second.wait_for(lambda s: "Allow write_file?" in s, "the question again", WAIT)
    assert "again.txt" in shown
    answer(second, "y")
    second.wait_for(lambda s: "done again" in s, "the turn's end", WAIT)
    assert (server.work / "again.txt").read_text() == "hi\n"
    until(server, sid, lambda d: d["turn"] is None, "the turn's end on the server")
    said = contents(server, sid)  # the prompt, the call's message, the answer
    assert said[0] == "write again.txt" and said[-1] == "done again", said


def test_the_timeline_a_branch_an_events_diff_and_search_over_the_server(
    server: Server, tmp_path: Path, terminals: list[Terminal]
) -> None:
    sid = session(server, "tree", write_call("tree.txt"), "wrote tree.txt", "on a branch")
    with Remote(server.url, TOKEN) as client:
        for _frame in client.stream(f"/sessions/{sid}/prompt", {"text": "first", "stream": True}):
            if _frame.name == "approval":
                client.post(
                    f"/sessions/{sid}/approvals", {"id": _frame.data["id"], "answer": "allow"}
                )
    assert (server.work / "tree.txt").exists()
    term = open_tui(terminals, tmp_path, "--remote", server.url, "--token", TOKEN, "--session", sid)
    term.wait_for(lambda s: "wrote tree.txt" in s, "the conversation", WAIT)

    term.burst("C-t")  # the timeline, from the server's index
    shown = term.wait_for(lambda s: "#1 user: first" in s, "the timeline", WAIT)
    rows = [line for line in shown.splitlines() if "▣ files: 1 changed" in line]
    assert rows, shown
    term.burst("Up")  # from HEAD's answer to the snapshot after the write
    term.burst("C-d")
    diff = term.wait_for(lambda s: "1 path(s) changed" in s, "the event's diff", WAIT)
    assert "added" in diff and "tree.txt" in diff
    term.burst("Escape")
    term.wait_for(lambda s: "1 path(s) changed" not in s, "the diff closed", WAIT)
    term.burst(*(["Up"] * 4))  # from the snapshot (#5) to the first prompt (#1)
    term.burst("Enter")
    term.wait_for(lambda s: "next prompt continues from #1" in s, "the pick", WAIT)
    send(term, "branch from here")
    term.wait_for(lambda s: "on a branch" in s, "the branch's answer", WAIT)
    until(server, sid, lambda d: d["turn"] is None, "the turn's end")
    assert not (server.work / "tree.txt").exists()  # the server restored #1's files
    timeline = api(server, f"/sessions/{sid}/events", all=True)
    first = next(e for e in timeline["events"] if e["seq"] == 1)
    prompt = next(e for e in timeline["events"] if e["preview"].startswith("branch from"))
    restore = next(e for e in timeline["events"] if e["id"] == prompt["parent_id"])
    assert restore["kind"] == "restore" and restore["parent_id"] == first["id"], timeline

    term.burst("C-f")  # search, answered by the server
    term.wait_for(lambda s: "Search every session" in s, "the search panel", WAIT)
    term.burst("wrote tree")
    term.wait_for(lambda s: "1 hit" in s or "hits" in s, "the hits", WAIT)


def test_files_changed_outside_the_agent_are_asked_about_before_a_branch(
    server: Server, tmp_path: Path, terminals: list[Terminal]
) -> None:
    sid = session(server, "ask", write_call("mine.txt"), "wrote mine.txt", "kept yours")
    with Remote(server.url, TOKEN) as client:
        for frame in client.stream(f"/sessions/{sid}/prompt", {"text": "first", "stream": True}):
            if frame.name == "approval":
                answered = {"id": frame.data["id"], "answer": "allow"}
                client.post(f"/sessions/{sid}/approvals", answered)
    (server.work / "mine.txt").write_text("edited by hand\n")  # outside the agent
    term = open_tui(terminals, tmp_path, "--remote", server.url, "--token", TOKEN, "--session", sid)
    term.wait_for(lambda s: "wrote mine.txt" in s, "the conversation", WAIT)
    term.burst("C-t")
    term.wait_for(lambda s: "#1 user: first" in s, "the timeline", WAIT)
    term.burst(*(["Up"] * 5))  # from HEAD (#6) to the first prompt (#1)
    term.burst("Enter")
    term.wait_for(lambda s: "next prompt continues from #1" in s, "the pick", WAIT)
    send(term, "go on from here")
    shown = term.wait_for(lambda s: "changed outside the agent" in s, "the question", WAIT)
    assert "mine.txt" in shown
    answer(term, "k")  # keep mine
    term.wait_for(lambda s: "kept yours" in s, "the turn after the answer", WAIT)
    assert (server.work / "mine.txt").read_text() == "edited by hand\n"
    said = contents(server, sid)
    assert said[-2:] == ["go on from here", "kept yours"], said


def test_a_prompt_then_ctrl_c_twice_quits_and_the_session_is_saved_on_the_server(
    server: Server, tmp_path: Path, terminals: list[Terminal]
) -> None:
    """The local ``test_tui_tmux`` scenario of the same name, against the server:
    the offline model answers, Ctrl-C twice quits (the first only arms it), the
    command line says how to come back, and the server holds the two messages."""
    sid = session(server, "offline", model="offline")
    term = open_tui(terminals, tmp_path, "--remote", server.url, "--token", TOKEN, "--session", sid)
    send(term, "hello from tmux")
    shown = term.wait_for(lambda s: "you said" in s and "✓ saved" in s, "the reply", WAIT)
    assert "you said 'hello from tmux'" in flat(shown)
    term.burst("C-c")
    term.wait_for(lambda s: "again to quit" in s, "the first Ctrl-C's hint", WAIT)
    assert "cancelled" not in term.screen()
    term.burst("C-c")
    deadline = time.monotonic() + WAIT
    while term.pane("pane_dead") != "1":
        assert time.monotonic() < deadline, term.screen()
        time.sleep(0.05)
    left = term.run("capture-pane", "-p", "-J", "-S", "-", "-t", "infai")
    assert f"come back with: infai attach {server.url} {sid}" in left, left
    said = contents(server, sid)
    assert said[0] == "hello from tmux" and said[1].startswith("offline model: you said")
    assert len(said) == 2
    assert api(server, f"/sessions/{sid}")["working_dir"] == str(server.work)


@pytest.mark.parametrize("form", ["attach", "--remote"])
def test_dir_makes_the_session_in_that_directory_on_the_server(
    form: str, server: Server, tmp_path: Path, terminals: list[Terminal]
) -> None:
    """``infai attach URL --dir DIR`` and ``infai --remote URL --dir DIR``: the new
    session works in DIR on the server, the TUI says so, its status bar names the
    server's default model (the session names none), and its turn runs there; a
    directory the server does not have is a one-line error before any screen
    (nothing made)."""
    there = server.work / f"elsewhere{form}"
    there.mkdir()
    before = {s["id"] for s in api(server, "/sessions")["sessions"]}
    args = (form, server.url, "--token", TOKEN, "--dir")
    term = open_tui(terminals, tmp_path, *args, str(there))
    term.wait_for(lambda s: f"working in {there} there" in flat(s), "where it works", WAIT)
    model = short_model(f"scripted:{server.scripts / 'default.json'}")
    shown = term.wait_for(lambda s: model in s, "the server's default model", WAIT)
    assert SERVERS_MODEL not in shown
    [sid] = {s["id"] for s in api(server, "/sessions")["sessions"]} - before
    assert api(server, f"/sessions/{sid}")["working_dir"] == str(there)
    send(term, "hello from elsewhere")
    until(server, sid, lambda d: d["turn"] is None and len(contents(server, sid)) == 2, "a reply")
    assert contents(server, sid) == ["hello from elsewhere", "hello"]

    master, pty = os.openpty()  # a terminal for standard input: the check is the server's
    try:
        missing = str(tmp_path / "no-such-dir")
        refused = subprocess.run(
            [str(INFAI), *args, missing],
            stdin=pty, capture_output=True, text=True, timeout=WAIT,
        )  # fmt: skip
    finally:
        os.close(pty)
        os.close(master)
    assert refused.returncode == 2, refused.stderr
    assert "is not an absolute directory" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert {s["id"] for s in api(server, "/sessions")["sessions"]} == before | {sid}

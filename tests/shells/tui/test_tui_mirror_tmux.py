"""The TUI's main scenarios written once and run twice (issue 27): on a local store
(``infai`` in a directory, as the other tmux tests open it) and over a real
``infai serve`` (``infai --remote URL``: the same app, the server's sessions).

Each scenario is driven only by keys in a real terminal (tmux ``send-keys``), and
checks the screen and then what is stored, read the same way on both sides: the
``session ls|log|tree|show --json`` commands, run as ``infai --home H …`` on the
local store and as ``infai --remote URL …`` against the server (which answer in
the local commands' own form). Locally the TUI runs in the session's working
directory; remotely the server's directory is the session's, the TUI's is
another (a file the agent writes must land in the session's, read from its
listing). Both sides read one configuration: the server's, the local TUI's.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakeapi import FakeOpenAI, Reply
from infai.agent.loop import INTERRUPTED_TURN
from infai.shells.tui.modals import GRACE
from serveproc import Serve
from tmux_term import INFAI, Terminal, flat

pytestmark = pytest.mark.slow  # a TUI in tmux (and a server process) per scenario and side

TOKEN = "mirror-tui-token-0123456789abcdef"
SIZE = (100, 30)
WAIT = 20.0  # a loaded machine: a turn (through the server) and back to the screen


class Side:
    """One side of the mirror: where the TUI opens and the session is stored.

    ``open(config)`` starts the TUI (and, remotely, first the server) under that
    configuration; ``infai(...)`` runs a command against the same store (``--home``
    locally, ``--remote`` over the server) and returns its JSON output.
    """

    def __init__(self, where: str, tmp: Path) -> None:
        self.where = where
        self.tmp = tmp
        self.url = ""
        self.home = tmp / "home"
        self.config = tmp / "config.toml"
        self.work = tmp / "served"  # the session's directory (locally: the TUI's)
        self.terminals: list[Terminal] = []
        self.server: Serve | None = None

    def open(self, config: str) -> Terminal:
        if self.where == "local":
            (self.tmp / "local").mkdir()
            term = Terminal(self.tmp / "local", SIZE, config)
            self.home, self.config, self.work = term.home, term.config, term.work
            self.terminals.append(term)
            term.start()
            return term
        self.config.write_text(config)
        self._serve()
        (self.tmp / "client").mkdir()
        term = Terminal(self.tmp / "client", SIZE)  # a home and a directory of its own
        self.terminals.append(term)
        term.start("--remote", self.url, "--token", TOKEN)
        return term

    def _serve(self) -> None:
        self.work.mkdir()  # the server's directory: its sessions work there
        self.server = Serve(self.home, self.work, TOKEN, config=self.config)
        self.url = self.server.start()

    def infai(self, *args: str) -> Any:
        """``infai ARGS`` (``--json`` added) on this side's store: its output, parsed."""
        if self.where == "local":
            root = ["--home", str(self.home)]
            env = {**os.environ, "INFAI_CONFIG": str(self.config)}
        else:
            root = ["--remote", self.url]
            env = {**os.environ, "INFAI_SERVER_TOKEN": TOKEN}
        done = subprocess.run(
            [str(INFAI), *root, *args, "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"infai {' '.join(args)} ({self.where}): {done.stderr}"
        return json.loads(done.stdout)

    def session(self) -> dict[str, Any]:
        """The one session this side holds, as ``session ls --json`` lists it."""
        listed = self.infai("session", "ls")
        assert len(listed) == 1, listed
        session: dict[str, Any] = listed[0]
        return session

    def close(self) -> None:
        for term in self.terminals:
            term.close()
        if self.server is not None:
            self.server.close()


@pytest.fixture(params=["local", "remote"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Side]:
    side = Side(request.param, tmp_path)
    try:
        yield side
    finally:
        side.close()


def scripted(tmp: Path, *replies: object) -> str:
    """A configuration whose model replays ``replies`` (a script in a file)."""
    script = tmp / "replies.json"
    script.write_text(json.dumps(list(replies)))
    return f'model = "scripted:{script}"\n'


def served(fake: FakeOpenAI) -> str:
    """A configuration whose model is the fake OpenAI server ``fake``."""
    model = f'provider = "openai"\nmodel = "m"\nbase_url = "{fake.base_url}"\n'
    return f'model = "fake"\n[models.fake]\n{model}'


def write_call(path: str) -> dict[str, object]:
    call = {"id": "w1", "name": "write_file", "arguments": {"path": path, "content": "hi\n"}}
    return {"content": "", "tool_calls": [call]}


def send(term: Terminal, text: str) -> None:
    """Type ``text``, then Enter once it is in the box (not as one paste)."""
    term.burst(text)
    term.wait_for(lambda s: text in s, f"{text!r} typed", WAIT)
    term.burst("Enter")


def settled(term: Terminal, text: str) -> str:
    """Wait until ``text`` is on the screen and the status bar says it is saved."""
    return term.wait_for(lambda s: text in flat(s) and "✓ saved" in s, f"{text!r}, saved", WAIT)


Row = tuple[str, str | None, str]


def rows(events: list[dict[str, Any]]) -> list[Row]:
    """Events as ``session log|tree --json`` give them: kind, role, preview."""
    return [(e["kind"], e["role"], e["preview"]) for e in events]


def logged(side: Side, sid: str, last: Row) -> list[dict[str, Any]]:
    """``session log --json`` once its last event is ``last``: polled, so that the
    screen showing the turn's end and the store holding it need not be the same
    instant (over the server they are two processes)."""
    deadline = time.monotonic() + WAIT
    while True:
        log: list[dict[str, Any]] = side.infai("session", "log", sid)
        if rows(log)[-1:] == [last]:
            return log
        assert time.monotonic() < deadline, f"{side.where}: no {last} at the end of {rows(log)}"
        time.sleep(0.2)


START = ("snapshot", "system", "files: 0 (0 changed) turn start")  # a turn's first event


def test_a_prompt_streams_and_settles_and_the_log_holds_both(where: Side) -> None:
    words = " ".join(f"word{n}" for n in range(12))
    with FakeOpenAI([Reply(text=words, pieces=12, pause=0.3)]) as fake:
        term = where.open(served(fake))
        send(term, "count for me")
        # streaming: the first words are drawn while the last is still to come
        term.wait_for(lambda s: "word0" in s and "word11" not in s, "the reply streaming", WAIT)
        settled(term, words)
        assert len(fake.requests) == 1
    session = where.session()
    assert Path(session["working_dir"]) == where.work.resolve()
    log = logged(where, session["id"], ("message", "assistant", words))
    assert rows(log) == [
        START,
        ("message", "user", "count for me"),
        ("message", "assistant", words),
    ]


def test_a_tool_call_allowed_in_the_dialog_writes_in_the_sessions_directory(
    where: Side, tmp_path: Path
) -> None:
    term = where.open(scripted(tmp_path, write_call("x.txt"), "wrote x.txt"))
    send(term, "please write x")
    shown = term.wait_for(lambda s: "Allow write_file?" in s, "the approval dialog", WAIT)
    assert "x.txt" in shown
    session = where.session()
    work = Path(session["working_dir"])
    assert work == where.work.resolve()  # remotely the server's directory, not the TUI's
    assert not (work / "x.txt").exists()  # the turn waits for the answer
    time.sleep(GRACE + 0.1)  # the dialog's pause: keys before it are typing
    term.burst("y")
    settled(term, "wrote x.txt")
    assert (work / "x.txt").read_text() == "hi\n"
    assert (term.work / "x.txt").exists() == (term.work.resolve() == work)  # only there
    log = logged(where, session["id"], ("message", "assistant", "wrote x.txt"))
    assert rows(log) == [
        START,
        ("message", "user", "please write x"),
        ("message", "assistant", ""),
        ("tool_call", "assistant", 'write_file({"path": "x.txt", "content": "hi\\n"})'),
        ("tool_result", "tool", "write_file: wrote 3 characters to x.txt"),
        ("snapshot", "system", "files: 1 (1 changed) after write_file"),
        ("message", "assistant", "wrote x.txt"),
    ]
    result = where.infai("session", "show", session["id"], log[4]["id"])
    assert result["record"]["call_id"] == "w1", result
    assert "wrote 3 characters to x.txt" in json.dumps(result["record"]), result


def test_ctrl_c_during_a_slow_reply_stores_the_interruption_and_keeps_the_prompt(
    where: Side,
) -> None:
    words = " ".join(f"word{n}" for n in range(60))
    with FakeOpenAI([Reply(text=words, pieces=60, pause=0.5)]) as fake:  # 30 s to the end
        term = where.open(served(fake))
        send(term, "count slowly")
        term.wait_for(lambda s: "word1 " in s, "the reply streaming", WAIT)
        term.burst("C-c")
        shown = term.wait_for(lambda s: "turn interrupted" in s, "the interruption", WAIT)
        assert "word59" not in shown
        sid = where.session()["id"]
        log = logged(where, sid, ("message", "user", INTERRUPTED_TURN))
    assert rows(log)[:2] == [START, ("message", "user", "count slowly")]
    kind, role, partial = rows(log)[2]  # what had streamed is kept, cut where it stopped
    assert (kind, role) == ("message", "assistant") and partial.startswith("word0 word1"), log
    assert words.startswith(partial) and partial != words and len(log) == 4, log


def test_esc_esc_takes_an_older_prompt_back_and_its_edit_makes_a_branch(
    where: Side, tmp_path: Path
) -> None:
    term = where.open(scripted(tmp_path, "one answered", "two answered", "edit answered"))
    send(term, "first prompt")
    settled(term, "one answered")
    send(term, "second prompt")
    settled(term, "two answered")
    term.burst("Escape")
    term.burst("Escape")
    term.wait_for(lambda s: "Rewind" in s and "second prompt" in s, "the rewind list", WAIT)
    term.burst("Up")  # from the newest prompt to the first
    term.burst("Enter")
    term.wait_for(lambda s: "continues from #0" in flat(s), "the prompt back in the box", WAIT)
    term.burst(" again")
    term.wait_for(lambda s: "first prompt again" in s, "the edit", WAIT)
    term.burst("Enter")
    settled(term, "edit answered")
    sid = where.session()["id"]
    log = logged(where, sid, ("message", "assistant", "edit answered"))
    assert rows(log) == [
        START,
        ("message", "user", "first prompt again"),
        ("message", "assistant", "edit answered"),
    ]
    tree = where.infai("session", "tree", sid)
    shape = [
        (e["seq"], e["parent_seq"], *row)
        for e, row in zip(tree["events"], rows(tree["events"]), strict=True)
    ]
    assert shape == [
        (0, -1, *START),
        (1, 0, "message", "user", "first prompt"),
        (2, 1, "message", "assistant", "one answered"),
        (3, 2, "message", "user", "second prompt"),
        (4, 3, "message", "assistant", "two answered"),
        (5, 0, "message", "user", "first prompt again"),  # the branch: #0's second child
        (6, 5, "message", "assistant", "edit answered"),
    ], shape
    events = tree["events"]
    assert events[5]["branch_from"] == events[0]["id"]
    assert tree["leaves"] == [events[4]["id"], events[6]["id"]]
    assert tree["head"] == events[6]["id"]

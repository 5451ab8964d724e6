"""Issue 25 in a real terminal: ``infai`` in tmux at 100x30 and 60x20 (the harness
of test_tui_tmux.py), read with ``capture-pane`` and waited on by polling.

- the approval dialog holds the change it asks about: the question, its three
  choices and the first lines of the diff, with the file's line numbers;
- after a failed model call the status bar no longer shows the last retry, and
  at 60 columns it keeps HEAD and the tokens; it shows the working directory;
- a second TUI on a session another holds says at once which pid holds it and
  offers a read-only view and the picker.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_tui_tmux import INFAI, SESSION, STARTUP, Terminal, tmux_binary

from fakeapi import FakeOpenAI, Reply
from infai.shells.tui.modals import GRACE
from infai.store import Store
from tmux_term import session_open

SIZES = [(100, 30), (60, 20)]


class SizedTerminal(Terminal):
    """The tmux harness at a size of the test's, with arguments and environment."""

    def __init__(self, tmp_path: Path, name: str, home: Path | None = None) -> None:
        base = tmp_path / name
        base.mkdir()
        super().__init__(base)
        # Textual takes COLUMNS and LINES over the terminal's size: a test run may set them
        for name in ("COLUMNS", "LINES"):
            self.env.pop(name, None)
        if home is not None:  # a second terminal on the first one's store
            self.home = home
            self.env["INFAI_HOME"] = str(home)

    def start_at(self, size: tuple[int, int], *args: str, **env: str) -> None:
        self.tmux = tmux_binary()
        command = "exec " + " ".join(shlex.quote(a) for a in (str(INFAI), *args))
        width, height = size
        # the window's size from the start, so infai never reads tmux's default 80x24
        with self.conf.open("a") as conf:
            conf.write(f"set -g default-size {width}x{height}\n")
        settings = {"INFAI_HOME": str(self.home), "INFAI_CONFIG": str(self.config), **env}
        self.run(
            "-f", str(self.conf),
            "new-session", "-d", "-s", SESSION, "-x", str(width), "-y", str(height),
            "-c", str(self.work),
            *(f"-e{key}={value}" for key, value in settings.items()),
            command,
        )  # fmt: skip
        self.pid = int(self.pane("pane_pid"))


def status_of(screen: str) -> str:
    """The status bar of ``screen``: the line above the footer (the keys, on the
    last line); "" while no footer is drawn (a redraw, a toast over it)."""
    lines = screen.splitlines()
    footers = [i for i, line in enumerate(lines) if "^c" in line]
    return lines[footers[-1] - 1] if footers and footers[-1] > 0 else ""


@pytest.fixture
def terminals(tmp_path: Path) -> Iterator[list[SizedTerminal]]:
    made: list[SizedTerminal] = []
    try:
        yield made
    finally:
        for term in made:
            term.close()


def numbered(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


@pytest.mark.parametrize("size", SIZES)
def test_the_approval_dialog_holds_the_change_it_asks_about(
    tmp_path: Path, terminals: list[SizedTerminal], size: tuple[int, int]
) -> None:
    term = SizedTerminal(tmp_path, "one")
    terminals.append(term)
    (term.work / "notes.txt").write_text(numbered(40))
    call = {
        "id": "e1",
        "name": "edit_file",
        "arguments": {"path": "notes.txt", "old_text": "line 30\n", "new_text": "LINE THIRTY\n"},
    }
    script = tmp_path / "replies.json"
    script.write_text(json.dumps([{"content": "", "tool_calls": [call]}, "edited"]))
    term.config.write_text(f'model = "scripted:{script}"\n')
    term.start_at(size)
    term.wait_for(session_open, "the prompt and the session", timeout=STARTUP)
    term.keys("edit it", literal=True)
    term.keys("Enter")
    shown = term.wait_for(lambda s: "Allow edit_file?" in s and "30 +" in s, "the dialog")
    # the question, its three choices, and the change with the file's line numbers
    for words in ("allow once", "deny", "allow always"):
        assert words in shown, shown
    lines = [" ".join(line.split()) for line in shown.splitlines()]
    assert any("28 line 28" in line for line in lines), shown  # context before it
    assert any("30 - line 30" in line for line in lines), shown
    assert any("30 + LINE THIRTY" in line for line in lines), shown
    time.sleep(GRACE + 0.1)  # the dialog's own pause: keys before it go to the prompt
    term.keys("y")
    term.wait_for(lambda s: "edited" in s and "✓" in s, "the turn's end")
    assert "LINE THIRTY" in (term.work / "notes.txt").read_text()


@pytest.mark.crash  # slow (the retries' toasts last 4 s): runs in `make crash`
def test_the_status_bar_after_a_failed_call_and_at_60_columns(
    tmp_path: Path, terminals: list[SizedTerminal]
) -> None:
    """The last "retrying … (attempt 4 of 4)" stayed after the turn, pushing model,
    saved, tokens and HEAD off the bar; at 60 columns the bar was cut at its end."""
    term = SizedTerminal(tmp_path, "one")
    terminals.append(term)
    busy = [Reply(status=503, error_message="overloaded", retry_after=0.01) for _ in range(4)]
    with FakeOpenAI([Reply(text="fine"), *busy]) as fake:
        term.config.write_text(
            'model = "a-rather-long-model-name"\n[models.a-rather-long-model-name]\n'
            'provider = "openai"\nmodel = "m"\n'
            f'base_url = "{fake.base_url}"\ncontext_window = 32768\n'
        )
        term.start_at((60, 20), OPENAI_API_KEY="sk-test")
        # the session is open (its model in the bar): the prompt has the focus
        term.wait_for(lambda s: "a-rather" in s, "the session", timeout=STARTUP)
        term.keys("one", literal=True)
        term.wait_for(lambda s: "one" in s, "the typed prompt")
        term.keys("Enter")
        term.wait_for(lambda s: "fine" in s and "HEAD #" in s, "the first reply")
        term.keys("two", literal=True)
        term.keys("Enter")
        term.wait_for(lambda s: "overloaded" in s and len(fake.requests) == 5, "the failure")

        # the bar as the turn left it, once the retries' toasts (4 s each) are gone
        # and the failed turn is shown (HEAD and the tokens): no retry kept, not cut
        def after_the_turn(shown: str) -> bool:
            bar = status_of(shown)
            return "HEAD #3" in bar and "16/32k" in bar and "retrying" not in bar

        bar = status_of(term.wait_for(after_the_turn, "the bar after the turn", timeout=20))
    assert "retrying" not in bar and "attempt" not in bar, bar
    assert "HEAD #3" in bar and "16/32k" in bar, bar  # HEAD and the tokens, shortened
    assert len(bar.rstrip()) <= 60
    # at 100 columns the bar also says where the session works
    term.run("resize-window", "-t", SESSION, "-x", "100", "-y", "30")
    wide = ("HEAD #3 of 4", "a-rather-long-model-name", "/work")
    shown = term.wait_for(lambda s: all(w in status_of(s) for w in wide), "the bar at 100")
    bar = status_of(shown)
    assert all(w in bar for w in wide), bar


@pytest.mark.crash  # slow (two TUIs start): runs in `make crash`
def test_a_second_tui_on_a_held_session_says_who_holds_it_at_once(
    tmp_path: Path, terminals: list[SizedTerminal]
) -> None:
    """Between its turns a TUI lets the session go (bug 10: another terminal may
    run in it); during a turn it holds it, and a second TUI says so at once."""
    first = SizedTerminal(tmp_path, "one")
    terminals.append(first)
    script = tmp_path / "replies.json"
    asks = {"id": "b1", "name": "bash", "arguments": {"command": "git log --oneline -1"}}
    script.write_text(
        json.dumps([{"content": "", "tool_calls": [asks]}, "denied, fine", "a second answer"])
    )
    first.config.write_text(f'model = "scripted:{script}"\n')
    first.start_at((100, 30))
    first.wait_for(session_open, "the prompt and the session", timeout=STARTUP)
    first.keys("hello from the first", literal=True)
    first.keys("Enter")
    first.wait_for(lambda s: "Allow bash?" in s, "the first TUI's turn, asking")
    [info] = Store(first.home).list_sessions()

    second = SizedTerminal(tmp_path, "two", home=first.home)
    terminals.append(second)
    second.start_at((100, 30), "--session", info.id)
    # said as soon as it is drawn (the store's lock timeout is 10 s: nothing waits for it)
    shown = second.wait_for(lambda s: "read-only" in s, "the held session's dialog", STARTUP)
    assert f"pid {first.pid}" in shown, shown
    assert "pick another session" in shown
    second.keys("v")
    shown = second.wait_for(lambda s: "hello from the first" in s, "the read-only view")
    assert "(read-only)" in shown
    second.keys("Escape")
    second.wait_for(lambda s: "pick another session" in s, "back to the question")
    second.keys("p")
    second.wait_for(lambda s: "Sessions (this directory first" in s, "the picker")
    # the first TUI still has its session, untouched
    first.keys("n")
    first.wait_for(lambda s: "denied, fine" in s and "✓ saved" in s, "the first turn's end")
    first.keys("again", literal=True)
    first.keys("Enter")
    first.wait_for(lambda s: "a second answer" in s, "the first TUI's next reply")

"""Issue 25, what people expect from the prompt box, in a real terminal.

``infai`` runs in tmux at 100x30 and 60x20; keys go in bursts with one
``send-keys`` (they reach the pty at once), pastes with ``paste-buffer``; the
screen is polled and the store read for what was sent and recorded.

- the composer grows with its text up to a third of the screen, then scrolls;
  Ctrl-J, Shift-Enter and Alt-Enter insert a new line, Enter sends it all;
- pastes are kept whole, bracketed or not: a line break inside never sends;
- Ctrl-D on an empty composer quits; the first Ctrl-C clears a draft into the
  history (Up brings it back, in the next run too), the second quits;
- ``/`` opens the command popup (Tab completes, Esc closes, a burst is whole);
- ``@`` completes a file of the directory (fuzzy, ignore rules kept) whose
  content reaches the model; a file the read policy denies is refused;
- ``!cmd`` runs under the bash tool's policy and sandbox and its output is
  recorded in the session; a denied command records nothing.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.shells.tui.modals import GRACE
from infai.store import MessageRecord, Store
from tmux_term import SESSION, SIZES, Terminal, composer_lines

REPLY = "offline model: you said"
#: what the user's config denies: a secret file, and ``rm``
DENIALS = '[permissions]\ndeny = ["read_file .env", "bash rm*"]\n'


@pytest.fixture(params=SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def terminal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path, request.param, DENIALS)
    try:
        yield term
    finally:
        term.close()


def box(shown: str) -> str:
    """The composer's text lines joined by ``↵``."""
    return "↵".join(composer_lines(shown))


def saved(shown: str) -> bool:
    return "✓ saved" in shown or "│ ✓ │" in shown


def records(term: Terminal) -> list[MessageRecord]:
    """The messages of the session, oldest first ([] before it exists)."""
    store = Store(term.home)
    listed = store.list_sessions()
    if not listed:
        return []
    with store.open_reader(listed[0].id) as reader:
        events = reader.context().events
    return [e.record for e in events if isinstance(e.record, MessageRecord)]


def contents(term: Terminal) -> list[str]:
    return [record.content for record in records(term)]


def answered(term: Terminal, text: str) -> None:
    """Wait for the offline model's answer to the prompt ``text``."""

    def done(shown: str) -> bool:
        held = contents(term) if saved(shown) else []
        return bool(held) and held[-1].startswith(f"{REPLY} '{text}'")

    term.wait_for(done, f"the answer to {text!r}")


def cap(term: Terminal) -> int:
    """The composer's text lines at most: a third of the screen (33vh, rounded
    down), less its borders."""
    return term.size[1] * 33 // 100 - 2


def test_the_composer_grows_then_scrolls_and_new_line_keys_never_send(terminal: Terminal) -> None:
    """Ctrl-J, Alt-Enter (ESC CR) and Shift-Enter (CSI 13;2u) insert new lines, in
    one burst; the box grows to a third of the screen, then scrolls with the
    cursor; Enter sends every line."""
    terminal.start()
    terminal.burst("one", "C-j", "two")
    terminal.wait_for(lambda s: composer_lines(s) == ["one", "two"], "two lines, two rows")
    terminal.burst("M-Enter", "three")
    terminal.run("send-keys", "-t", SESSION, "-H", *(f"{b:02x}" for b in b"\x1b[13;2u"))
    terminal.burst("four")
    terminal.wait_for(lambda s: box(s) == "one↵two↵three↵four", "Alt- and Shift-Enter")
    keys = [key for n in range(5, 13) for key in ("C-j", str(n))]
    terminal.burst(*keys)
    rows = cap(terminal)
    last = [str(n) for n in range(13 - rows, 13)]
    # capped at a third of the screen, scrolled to the cursor
    terminal.wait_for(lambda s: composer_lines(s) == last, "the last lines, capped")
    terminal.burst("Enter")
    words = ["one", "two", "three", "four", *(str(n) for n in range(5, 13))]
    terminal.wait_for(lambda s: saved(s) and "\n".join(words) in contents(terminal), "sent")
    assert contents(terminal)[0] == "\n".join(words)


@pytest.mark.slow  # a guard: test_tui_tmux and test_tui_keys_tmux paste in `make test`
def test_pastes_are_kept_whole_bracketed_or_not(terminal: Terminal) -> None:
    """A bracketed paste of several lines is one marker; an unbracketed one whose
    lines end in CR (as Enter keys) keeps its lines: neither sends anything."""
    terminal.start()
    terminal.run("set-buffer", "-b", "text", "alpha\nbeta\ngamma")
    terminal.run("paste-buffer", "-p", "-b", "text", "-t", SESSION)  # bracketed
    terminal.wait_for(lambda s: box(s) == "[pasted 3 lines]", "the paste's marker")
    terminal.burst("C-j")
    terminal.run("paste-buffer", "-b", "text", "-t", SESSION)  # LF sent as CR, unbracketed
    terminal.wait_for(
        lambda s: box(s) == "[pasted 3 lines]↵alpha↵beta↵gamma", "the unbracketed lines"
    )
    assert records(terminal) == []  # nothing was sent
    terminal.burst("Enter")
    answered(terminal, "alpha")
    assert contents(terminal)[0] == "alpha\nbeta\ngamma\nalpha\nbeta\ngamma"


@pytest.mark.slow  # two runs of infai
def test_ctrl_c_keeps_the_draft_and_ctrl_d_quits_on_an_empty_box(terminal: Terminal) -> None:
    """The first Ctrl-C clears the draft (Up brings it back), Ctrl-D deletes while
    there is text and quits on an empty box; the draft cleared before quitting is
    in the next run's history."""
    terminal.start()
    terminal.burst("half a thought", "C-c")
    terminal.wait_for(lambda s: box(s) == "" and "draft cleared" in s, "the draft cleared")
    terminal.burst("Up")
    terminal.wait_for(lambda s: box(s) == "half a thought", "the draft back")
    terminal.burst("Home", "C-d", "C-d", "C-d", "C-d", "C-d")
    terminal.wait_for(lambda s: box(s) == "a thought", "Ctrl-D deletes")
    terminal.burst("C-c", "C-u")
    terminal.wait_for(lambda s: box(s) == "", "cleared")
    assert terminal.pane("pane_dead") == "0"
    terminal.burst("C-d")
    deadline = time.monotonic() + 10  # (wait_for stops at a dead pane: polled here)
    while terminal.pane("pane_dead") != "1":
        assert time.monotonic() < deadline, f"infai still there after Ctrl-D:\n{terminal.screen()}"
        time.sleep(0.05)
    terminal.close()
    terminal.socket += "-again"  # a new tmux server: the old one may still be going
    terminal.start()  # the next run, the same store: the drafts are in its history
    terminal.burst("Up")
    terminal.wait_for(lambda s: box(s) == "a thought", "the last draft, recalled")
    terminal.burst("Up")
    terminal.wait_for(lambda s: box(s) == "half a thought", "the first draft, recalled")


def test_slash_opens_the_command_popup(terminal: Terminal) -> None:
    """``/`` lists the commands with their help; Tab completes; Esc closes the popup
    (and only it); a command typed whole with Enter in one burst runs."""
    terminal.start()
    terminal.burst("/")
    terminal.wait_for(lambda s: "/compact" in s and "/rename NAME" in s, "the commands")
    terminal.burst("re")
    shown = terminal.wait_for(lambda s: "/compact" not in s, "the list narrowed")
    assert "rename this session" in shown
    terminal.burst("Tab")
    terminal.wait_for(lambda s: box(s) == "/rename", "completed")
    terminal.burst("C-u", "/co")
    terminal.wait_for(lambda s: "summarise the context now" in s, "/compact offered")
    terminal.burst("Escape")
    terminal.wait_for(lambda s: "summarise the context" not in s, "the popup closed")
    assert box(terminal.screen()) == "/co"
    terminal.burst("BSpace", "BSpace")  # back to "/": every command again
    terminal.wait_for(lambda s: "/quit" in s and "/compact" in s, "the whole list again")
    terminal.burst("Down", "Down", "Tab")  # the third: /rename
    terminal.wait_for(lambda s: box(s) == "/rename", "chosen with Down")
    terminal.burst("C-u", "/he", "Enter")  # Enter completes an unfinished name
    terminal.wait_for(lambda s: box(s) == "/help", "/help completed")
    terminal.burst("C-u", "/help", "Enter")
    terminal.wait_for(lambda s: "Ctrl-U / Ctrl-K" in s, "the help")
    terminal.burst("Escape")
    terminal.wait_for(lambda s: "Ctrl-U / Ctrl-K" not in s, "the help closed")
    terminal.burst("hi", "Enter")
    answered(terminal, "hi")


def test_at_completes_a_file_and_attaches_it(terminal: Terminal) -> None:
    """``@ap`` offers ``src/app.py`` (fuzzy) and never an ignored file; the chosen
    file's content is recorded before the prompt; a denied file is refused, the
    prompt back in the box and nothing sent."""
    work = terminal.work
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "src").mkdir()
    (work / "src" / "app.py").write_text("print('hello from app')\n")
    (work / "build").mkdir()
    (work / "build" / "app.py").write_text("built\n")
    (work / ".gitignore").write_text("build/\n")
    (work / ".env").write_text("SECRET=1\n")
    terminal.start()
    terminal.burst("explain @ap")
    shown = terminal.wait_for(lambda s: "@src/app.py" in s, "the file offered")
    assert "build/" not in shown
    terminal.burst("Tab", "please", "Enter")
    answered(terminal, "explain @src/app.py please")
    note, prompt = records(terminal)[:2]
    assert "print('hello from app')" in note.content and note.metadata["path"] == "src/app.py"
    assert prompt.content == "explain @src/app.py please"
    assert "(2 messages in context)" in contents(terminal)[2]  # the file's, then the prompt
    terminal.burst("show @.env")
    terminal.wait_for(lambda s: s.count("@.env") == 2, "typed, and offered")
    terminal.burst("Escape")  # the popup closes (Esc and Enter at once would be Alt-Enter)
    terminal.wait_for(lambda s: s.count("@.env") == 1, "the popup closed")
    terminal.burst("Enter")
    terminal.wait_for(lambda s: "@.env was not attached" in s and box(s) == "show @.env", "refused")
    assert all("SECRET" not in text for text in contents(terminal))


def test_bang_runs_a_command_under_the_bash_policy(terminal: Terminal) -> None:
    """``!echo`` asks as the model's bash call would; allowed, its output is in the
    session (the next prompt follows it); ``!rm`` is denied by the config's rule."""
    terminal.start()
    terminal.burst("!echo hi-there", "Enter")
    terminal.wait_for(lambda s: "Allow bash?" in s and "echo hi-there" in s, "the question")
    time.sleep(GRACE + 0.2)  # keys typed before the dialog's grace are not answers
    terminal.burst("y")
    terminal.wait_for(lambda s: "hi-there" in "".join(contents(terminal)), "recorded")
    [note] = records(terminal)
    assert note.metadata["command"] == "echo hi-there" and "exit code 0" in note.content
    (terminal.work / "keep.txt").write_text("kept\n")
    terminal.burst("!rm keep.txt", "Enter")
    terminal.wait_for(lambda s: "was not run" in s, "the denial")
    assert (terminal.work / "keep.txt").exists() and len(records(terminal)) == 1
    terminal.burst("after", "Enter")
    answered(terminal, "after")
    assert [r.content for r in records(terminal)][:2] == [note.content, "after"]
    # the model's request held the command's output before the prompt
    assert "(2 messages in context)" in contents(terminal)[-1]

"""Issue 25: the prompt box keeps every keystroke, in a real terminal.

Each test starts the ``infai`` command in tmux (100x30 and 60x20) and sends
bursts of keys with one ``send-keys`` (they reach the pty at once, as a fast
typist's or a paste's do), then polls the screen for what must be there.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.store import MessageRecord, Store
from tmux_term import SESSION, SIZES, Terminal, composer_lines, user_prompts

REPLY = "offline model: you said"


@pytest.fixture(params=SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def terminal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path, request.param)
    try:
        yield term
    finally:
        term.close()


def timeline_open(screen: str) -> bool:
    """Whether the timeline panel is drawn: its left edge (``▏``) ends many rows."""
    return sum(line.rstrip().endswith("▏") for line in screen.splitlines()) >= 5


def saved(screen: str) -> bool:
    """Whether the status bar says what is shown is saved (``✓ saved``, or ``✓``
    alone where the bar is narrow)."""
    return "✓ saved" in screen or "│ ✓ │" in screen


def prompt_box(shown: str) -> str:
    """The text in the prompt box, its lines joined by ``↵``."""
    return "↵".join(composer_lines(shown))


def said(term: Terminal, text: str) -> str:
    """Wait for the offline model's answer to ``text``, saved (read from the store:
    a narrow screen wraps it beside the timeline)."""

    def answered(shown: str) -> bool:
        held = messages(term) if saved(shown) else []
        return bool(held) and held[-1].startswith(f"{REPLY} '{text}'")

    return term.wait_for(answered, f"the answer to {text!r}")


def messages(term: Terminal) -> list[str]:
    """The messages the store holds, oldest first ([] before the session exists)."""
    store = Store(term.home)
    listed = store.list_sessions()
    if not listed:
        return []
    with store.open_reader(listed[0].id) as reader:
        events = reader.context().events
    return [e.record.content for e in events if isinstance(e.record, MessageRecord)]


def test_typing_with_the_timeline_open_goes_to_the_prompt(terminal: Terminal) -> None:
    """Bug 1: with the timeline open, ``please add a readme`` + Enter is sent whole
    (no ``d`` opens a diff, no space is swallowed), and Esc still closes it."""
    terminal.start()
    terminal.burst("hello", "Enter")
    said(terminal, "hello")
    terminal.burst("C-t")
    # the timeline is open when its panel's edge is drawn down the screen (at 60
    # columns it may open scrolled, its events out of sight)
    terminal.wait_for(timeline_open, "the timeline")
    terminal.burst("please add a readme", "Enter")
    shown = said(terminal, "please add a readme")
    assert "files at" not in shown and "diff" not in prompt_box(shown)
    terminal.wait_for(timeline_open, "the timeline still open after typing")
    terminal.burst("Escape")
    terminal.wait_for(lambda s: not timeline_open(s), "the timeline closed by Esc")
    assert user_prompts(terminal) == ["hello", "please add a readme"]


def test_after_tab_the_keys_still_reach_the_prompt_and_the_focus_is_drawn(
    terminal: Terminal,
) -> None:
    """Bug 2: Tab moves the focus off the prompt; that is drawn (the prompt's border
    says where the keys are), and typing a command and a prompt still sends both."""
    terminal.start()
    terminal.burst("Tab")
    terminal.wait_for(lambda s: "keys: chat" in s, "the focus drawn on the chat")
    terminal.burst("/model offline", "Enter")
    terminal.wait_for(lambda s: "model: offline" in s, "the model switched")
    assert "keys: chat" not in terminal.screen()  # the prompt has the keys again
    terminal.burst("after model switch", "Enter")
    said(terminal, "after model switch")
    assert user_prompts(terminal) == ["after model switch"]


@pytest.mark.slow
def test_a_burst_of_keys_is_applied_in_order(terminal: Terminal) -> None:
    """Bug 3: Ctrl-J, Ctrl-U and Backspace inside a burst act where they were typed,
    and a paste whose line breaks come as LF keys keeps its lines."""
    terminal.start()
    terminal.burst("F1")  # the key map, as written once (keys.KEYMAP)
    terminal.wait_for(lambda s: "Ctrl-J" in s and "Ctrl-U / Ctrl-K" in s, "the key map")
    terminal.burst("Escape")
    terminal.wait_for(lambda s: "Ctrl-U / Ctrl-K" not in s, "the key map closed")
    terminal.burst("first", "C-j", "second", "C-j", "third")
    terminal.wait_for(lambda s: prompt_box(s) == "first↵second↵third", "three lines, in order")
    terminal.burst("C-u", "abc", "C-u", "hello", "BSpace", "BSpace", "p!")
    terminal.wait_for(
        lambda s: prompt_box(s) == "first↵second↵help!", "Ctrl-U (this line) and Backspace"
    )
    terminal.burst("Enter")
    said(terminal, "first")
    terminal.run("set-buffer", "-b", "lines", "one\nunbracketed two\nthree")
    terminal.run("paste-buffer", "-r", "-b", "lines", "-t", SESSION)  # -r: LF, not CR
    terminal.wait_for(
        lambda s: prompt_box(s) == "one↵unbracketed two↵three", "the pasted lines, apart"
    )
    terminal.burst("Enter")
    said(terminal, "one")
    assert user_prompts(terminal) == ["first\nsecond\nhelp!", "one\nunbracketed two\nthree"]


def scripted(tmp_path: Path, size: tuple[int, int], replies: list[object]) -> Terminal:
    """A terminal whose model replays ``replies`` (a script in a file)."""
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(replies))
    return Terminal(tmp_path, size, f'model = "scripted:{script}"\n')


def calls(name: str, **arguments: str) -> dict[str, object]:
    """A scripted reply that calls tool ``name``."""
    return {"content": "", "tool_calls": [{"id": "c1", "name": name, "arguments": arguments}]}


@pytest.fixture(params=SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def asking(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Terminal]:
    """A terminal whose model runs ``git log --oneline -1``, which asks."""
    term = scripted(
        tmp_path, request.param, [calls("bash", command="git log --oneline -1"), "done", "answered"]
    )
    try:
        yield term
    finally:
        term.close()


@pytest.fixture(params=SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def reading(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Terminal]:
    """A terminal whose model reads a 30-line file (a folded result), then answers."""
    term = scripted(tmp_path, request.param, [calls("read_file", path="long.txt"), "ok", "two"])
    (term.work / "long.txt").write_text("".join(f"line {i}\n" for i in range(30)))
    try:
        yield term
    finally:
        term.close()


def click(term: Terminal, x: int, y: int) -> None:
    """A left click at column ``x``, row ``y`` (from 0), as the terminal reports it
    (SGR mouse: press and release), written to the pane as bytes."""
    sequence = f"\x1b[<0;{x + 1};{y + 1}M\x1b[<0;{x + 1};{y + 1}m".encode()
    term.run("send-keys", "-t", SESSION, "-H", *(f"{byte:02x}" for byte in sequence))


@pytest.mark.slow
def test_a_click_on_a_folded_result_leaves_the_keys_with_the_prompt(reading: Terminal) -> None:
    """Bug 2: a click opens a folded result, and what is typed next (with Enter) is
    sent as a prompt (it went to the fold, and nowhere)."""
    reading.start()
    reading.burst("read it", "Enter")
    reading.wait_for(lambda s: "▶" in s and saved(s), "the folded result")
    # a click in the moment the turn's end is drawn can go unseen (so it did before
    # issue 25 too): clicked again until the fold opens, where it is now (the chat
    # may have scrolled), and only while it shows folded (a click on an open fold
    # closes it: a slow redraw is no reason)
    for _ in range(5):
        now = reading.screen()
        if "line 29" in now:
            break
        folded = [(line.index("▶"), y) for y, line in enumerate(now.splitlines()) if "▶" in line]
        if len(folded) == 1:
            click(reading, *folded[0])
        with contextlib.suppress(AssertionError):
            reading.wait_for(lambda s: "line 29" in s, "the fold open", timeout=3)
            break
    # opened, and the keys are with the prompt (else its border names the place)
    reading.wait_for(lambda s: "line 29" in s and "keys:" not in s, "the result opened")
    reading.burst("next", "Enter")
    reading.wait_for(lambda s: "two" in s and saved(s), "the answer to the next prompt")
    assert user_prompts(reading)[-1] == "next"


def test_the_approval_fields_keys_are_in_order_and_the_next_prompt_is_not_a_rule(
    asking: Terminal,
) -> None:
    """Bug 3, in the approval dialog: ``e``, Ctrl-U, a pattern and Enter in one
    burst store that pattern; the prompt typed right after goes to the prompt box
    (it was stored as an allow-always rule)."""
    asking.start()
    asking.burst("go", "Enter")
    asking.wait_for(lambda s: "Allow bash?" in s, "the question")
    time.sleep(0.7)  # the dialog's grace: keys typed before a pause are not answers
    asking.burst("e", "C-u", "git log --oneline -1", "Enter", "next prompt", "Enter")
    asking.wait_for(lambda s: "answered" in s and saved(s), "the queued prompt's answer")
    assert "Allow bash?" not in asking.screen()
    [info] = Store(asking.home).list_sessions()
    assert info.extra.get("allowed") == ["bash git log --oneline -1"], info.extra
    assert user_prompts(asking) == ["go", "next prompt"]


def test_enter_after_a_pause_sends_though_type_ahead_comes_in_the_same_read(
    tmp_path: Path,
) -> None:
    """Text typed, a pause, then Enter and the next words in one read of the
    terminal (a loaded machine reads a fast typist's Enter and what follows
    together): the Enter sends what was typed before it, not a paste's line
    break (a paste has its text within the same read before the Enter too)."""
    term = Terminal(tmp_path, SIZES[0])
    try:
        term.start()
        term.burst("first thought")
        term.wait_for(lambda s: prompt_box(s) == "first thought", "the typed text")
        term.burst("Enter", "next one")  # one send-keys: one write to the pty
        said(term, "first thought")
        term.wait_for(lambda s: prompt_box(s) == "next one", "the type-ahead in the box")
        assert user_prompts(term) == ["first thought"]
    finally:
        term.close()

"""Small things a person sees in the real terminal: the timeline's row of a reply
that only called tools, the header of a diff of an absolute path, the read-only
view of a held session following the other process, a refused ``!cmd``.

Run in tmux (helpers: tests/support/tmux_term.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from infai.shells.tui.modals import GRACE
from infai.store import MessageRecord, Store
from tmux_term import Terminal, composer_lines, flat


def box(shown: str) -> str:
    """The prompt box's text, its lines joined by ``↵``."""
    return "↵".join(composer_lines(shown))


def test_a_reply_that_only_calls_tools_names_them_in_the_timeline(tmp_path: Path) -> None:
    """A reply with no text showed as an empty ``#N assistant:`` row."""
    script = tmp_path / "replies.json"
    calls = [
        {"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}},
        {"id": "l1", "name": "list_files", "arguments": {}},
    ]
    script.write_text(json.dumps([{"content": "", "tool_calls": calls}, "looked"]))
    term = Terminal(tmp_path, (100, 30), f'model = "scripted:{script}"\n')
    (term.work / "a.txt").write_text("a\n")
    try:
        term.start()
        term.burst("look", "Enter")
        term.wait_for(lambda s: "looked" in s and "HEAD #" in s, "the turn's end")
        term.burst("C-t")
        shown = term.wait_for(lambda s: "user: look" in s, "the timeline")
        rows = [" ".join(line.split()) for line in shown.splitlines()]
        assert any("assistant → read_file, list_files" in row for row in rows), shown
        assert not any(row.endswith("assistant:") for row in rows), shown
        assert "assistant: looked" in flat(shown)
    finally:
        term.close()


def test_the_diff_of_an_absolute_path_names_it_as_git_does(tmp_path: Path) -> None:
    """A write to an absolute path showed its diff under ``a//tmp/…`` (two slashes)."""
    script = tmp_path / "replies.json"
    term = Terminal(tmp_path, (100, 30), f'model = "scripted:{script}"\n')
    target = term.work / "new.txt"
    call = {"id": "w1", "name": "write_file", "arguments": {"path": str(target), "content": "x\n"}}
    script.write_text(json.dumps([{"content": "", "tool_calls": [call]}, "written"]))
    try:
        term.start()
        term.burst("write", "Enter")
        term.wait_for(lambda s: "Allow write_file?" in s, "the question")
        time.sleep(GRACE + 0.1)  # the dialog's own pause: keys before it go to the prompt
        term.burst("y")
        shown = term.wait_for(lambda s: "written" in s and "+++ " in s, "the diff in the chat")
        first = str(target).lstrip("/").split("/")[0]
        assert f"+++ b/{first}/" in shown and "b//" not in shown, shown
        assert target.read_text() == "x\n"
    finally:
        term.close()


def test_the_read_only_view_of_a_held_session_follows_its_holder(tmp_path: Path) -> None:
    """The read-only view showed the session as it was when opened: what the
    process holding it appended meanwhile never came."""
    term = Terminal(tmp_path, (100, 30))
    store = Store(term.home)
    sid = store.create_session(working_dir=str(term.work)).id
    try:
        with store.open_writer(sid) as writer:  # this process holds the session
            writer.append(MessageRecord(content="the first prompt"), "user")
            term.start("--session", sid)
            shown = term.wait_for(lambda s: "view it read-only" in s, "the held dialog")
            assert f"pid {os.getpid()}" in shown, shown
            term.burst("v")
            term.wait_for(lambda s: "the first prompt" in s, "the read-only view")
            writer.append(MessageRecord(content="appended while viewed"), "assistant")
            shown = term.wait_for(lambda s: "appended while viewed" in s, "the new event")
            assert "(read-only)" in shown and "the first prompt" in shown
    finally:
        term.close()
        store.close()


def test_a_refused_bang_leaves_the_box_to_what_is_typed_after_it(tmp_path: Path) -> None:
    """``!ls`` refused (an older event is picked) came back into the box with the
    cursor at its end, so words typed right after Enter made ``!lsmore``: the
    command now goes into the history (Up brings it back), the words stay alone."""
    term = Terminal(tmp_path, (100, 30))
    try:
        term.start()
        term.burst("hi", "Enter")
        term.wait_for(lambda s: "you said 'hi'" in flat(s), "the reply")
        term.burst("C-t")
        term.wait_for(lambda s: "◆ #2 assistant" in s, "the timeline")
        term.burst("Up", "Enter")
        term.wait_for(lambda s: "continues from" in flat(s), "the pick")
        term.burst("C-t")  # closed: the keys are the prompt's
        term.wait_for(lambda s: "◆ #2" not in s, "the timeline closed")
        term.burst("!ls", "Enter")
        # typed on at once, as a fast typist does (0.1 s on: keys read in one go with
        # the Enter would be a paste's line break, not a send; seen on a loaded CI)
        time.sleep(0.1)
        term.burst("more")
        shown = term.wait_for(lambda s: "was not run" in flat(s), "the refusal")
        shown = term.wait_for(lambda s: box(s) == "more", "the words typed after it, alone")
        assert "Up brings" in flat(shown), shown
        term.burst("Up")
        term.wait_for(lambda s: box(s) == "!ls", "the refused command from the history")
        term.burst("Down")
        term.wait_for(lambda s: box(s) == "more", "the draft again")
        assert "you said" not in flat(term.screen()).replace("you said 'hi'", "")
    finally:
        term.close()

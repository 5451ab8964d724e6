"""Issue 25's "never lose a keystroke" and "a draft is never lost", in a real
terminal (tmux at 100x30 and 60x20): what is in the prompt box when something
else puts a prompt there, and what is typed while a list dialog is open.

Each test starts the ``infai`` command in tmux with the offline model, sends
keys with ``send-keys`` and polls the screen for what must be there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.shells.tui.modals import GRACE
from infai.store import MessageRecord, Store
from tmux_term import SESSION, SIZES, Terminal, composer_lines, flat, user_prompts


@pytest.fixture(params=SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def offline(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Terminal]:
    """The offline model (it says back what it was told)."""
    term = Terminal(tmp_path, request.param)
    try:
        yield term
    finally:
        term.close()


def prompt_box(shown: str) -> str:
    """The text in the prompt box, its lines joined by ``↵``."""
    return "↵".join(composer_lines(shown))


def test_a_draft_replaced_by_a_rewound_prompt_is_kept_in_the_history(offline: Terminal) -> None:
    """Esc Esc with a draft in the box, Enter on a prompt of the list: the prompt
    is put back to edit, and the draft it replaced is the newest entry of the
    history (Up brings it back), as a draft cleared by Ctrl-C is (it was gone)."""
    offline.start()
    offline.burst("first prompt", "Enter")
    offline.wait_for(lambda s: "you said 'first prompt'" in flat(s), "the reply")
    offline.burst("my long draft")
    offline.wait_for(lambda s: prompt_box(s) == "my long draft", "the draft")
    offline.burst("Escape", "Escape")
    offline.wait_for(lambda s: "Rewind" in s, "the rewind list")
    offline.burst("Enter")
    offline.wait_for(lambda s: prompt_box(s) == "first prompt", "the prompt back to edit")
    offline.burst("C-u", "Up")  # the box emptied, then the newest entry of the history
    offline.wait_for(lambda s: prompt_box(s) == "my long draft", "the draft, from the history")


def test_typing_over_the_help_or_the_rewind_list_goes_to_the_prompt(offline: Terminal) -> None:
    """The key map says typing goes to the prompt whatever has the keys: typed
    over F1's key map or Esc Esc's list of prompts (dialogs with nothing to type
    into), the text closes the dialog and lands in the prompt, whole and in order
    (it was dropped; a ``q`` closed the help, and ``quick`` became ``uick``)."""
    offline.start()
    offline.burst("F1")
    offline.wait_for(lambda s: "Ctrl-U / Ctrl-K" in s, "the key map")
    offline.burst("quick note")
    offline.wait_for(lambda s: prompt_box(s) == "quick note", "the text in the prompt")
    assert "Ctrl-U / Ctrl-K" not in offline.screen()  # the help closed
    offline.burst("Enter")
    offline.wait_for(lambda s: "you said 'quick note'" in flat(s), "the reply")
    offline.burst("Escape", "Escape")
    offline.wait_for(lambda s: "Rewind" in s, "the rewind list")
    offline.burst("and more")
    offline.wait_for(lambda s: prompt_box(s) == "and more", "the text in the prompt")
    assert "Rewind" not in offline.screen()  # the list closed, nothing picked
    assert "continues from" not in flat(offline.screen())


def test_enter_on_a_file_typed_whole_sends_it(offline: Terminal) -> None:
    """``@README.md`` typed whole, its popup still offering just that: Enter sends
    the prompt, as Enter on a command typed whole does (it only "completed" the
    file into itself and closed the popup: an Enter that did nothing)."""
    (offline.work / "README.md").write_text("read me\n")
    offline.start()
    offline.burst("see @README.md")
    offline.wait_for(
        lambda s: any(line.strip() == "@README.md" for line in s.splitlines()), "the popup"
    )
    offline.burst("Enter")
    offline.wait_for(lambda s: "you said 'see @README.md'" in flat(s), "the prompt sent")


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_a_paste_over_the_approval_dialog_goes_to_the_prompt(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """A paste while the approval dialog asks (no field of its open) is text, not
    an answer: it goes to the prompt box, whole, and the question stays (it was
    dropped); sent after the answer, it is the next prompt."""
    script = tmp_path / "replies.json"
    call = {"id": "c1", "name": "bash", "arguments": {"command": "git log --oneline -1"}}
    script.write_text(json.dumps([{"content": "", "tool_calls": [call]}, "done", "answered"]))
    term = Terminal(tmp_path, size, f'model = "scripted:{script}"\n')
    try:
        term.start()
        term.burst("go", "Enter")
        term.wait_for(lambda s: "Allow bash?" in s, "the question")
        time.sleep(GRACE + 0.1)  # past the dialog's grace: keys now are answers
        term.run("set-buffer", "-b", "lines", "pasted words\ntwo")
        term.run("paste-buffer", "-p", "-b", "lines", "-t", SESSION)  # -p: bracketed
        shown = term.wait_for(lambda s: "[pasted 2 lines]" in s, "the paste in the prompt")
        assert "Allow bash?" in shown  # not an answer
        term.burst("n")
        term.wait_for(lambda s: "done" in s and "Allow bash?" not in s, "the turn's end")
        term.burst("Enter")
        term.wait_for(lambda s: "answered" in s, "the pasted prompt's answer")
        said = user_prompts(term)
        assert said[-1] == "pasted words\ntwo", said
    finally:
        term.close()


def test_typing_over_a_files_diff_goes_to_the_prompt(offline: Terminal) -> None:
    """Ctrl-D on the timeline shows an event's files; what is typed over it closes
    it and goes to the prompt whole (``q`` and ``d`` closed it: ``quick`` became
    ``uick``)."""
    (offline.work / "a.txt").write_text("a\n")
    offline.start()
    offline.burst("hi", "Enter")
    offline.wait_for(lambda s: "you said 'hi'" in flat(s), "the reply")
    offline.burst("C-t")
    offline.wait_for(lambda s: "#2 assistant" in s, "the timeline")
    offline.burst("C-d")
    offline.wait_for(lambda s: "files at #0" in s, "the files of the event")
    offline.burst("quick add")
    offline.wait_for(lambda s: prompt_box(s) == "quick add", "the text in the prompt")
    assert "files at #0" not in offline.screen()


def test_line_breaks_typed_as_the_approval_dialog_opens_are_kept(tmp_path: Path) -> None:
    """Keys typed while the approval dialog appears go on to the prompt until the
    user pauses: the line breaks among them too (Ctrl-J, or an unbracketed paste's
    Enter), which were dropped, running the lines together (``abab``)."""
    script = tmp_path / "replies.json"
    call = {"id": "c1", "name": "bash", "arguments": {"command": "git log --oneline -1"}}
    script.write_text(json.dumps([{"content": "", "tool_calls": [call]}, "done", "answered"]))
    term = Terminal(tmp_path, SIZES[1], f'model = "scripted:{script}"\n')
    try:
        term.start()
        term.burst("go")
        term.wait_for(lambda s: prompt_box(s) == "go", "the prompt typed")
        term.burst("Enter")
        lines, after = 0, 0
        while after < 3:  # typing on, a line at a time, until the dialog has been up a while
            term.burst("ab", "C-j")
            lines += 1
            after += "Allow bash?" in term.screen()
            time.sleep(0.1)
        time.sleep(GRACE + 0.2)  # a pause: now a key answers
        term.burst("n")
        term.wait_for(lambda s: "done" in s and "Allow bash?" not in s, "the turn's end")
        term.burst("Enter")
        term.wait_for(lambda s: "answered" in s, "the typed prompt's answer")
        said = user_prompts(term)
        assert said[-1].split("\n") == ["ab"] * lines, said
    finally:
        term.close()


def type_on_until(term: Terminal, shown: str) -> int:
    """Type ``ab`` and a line break every 0.1 s until ``shown`` has been on the
    screen for three of them (a typist going on as a dialog opens); the count."""
    lines, after = 0, 0
    while after < 3:
        term.burst("ab", "C-j")
        lines += 1
        after += shown in term.screen()
        time.sleep(0.1)
    return lines


@pytest.mark.slow  # three turns and two dialogs
def test_keys_typed_as_the_restore_question_opens_go_to_the_prompt(tmp_path: Path) -> None:
    """The restore question (a prompt sent from before an earlier one, a file
    changed by hand) takes keys typed before the user paused to the prompt box, as
    the approval dialog does: they were dropped (it passed them on only to a field)."""
    term = Terminal(tmp_path, SIZES[0])
    try:
        term.start()
        for text in ("first", "second"):
            term.burst(text, "Enter")
            term.wait_for(lambda s: f"you said '{text}'" in flat(s), "the reply")  # noqa: B023
        (term.work / "hand.txt").write_text("made by hand\n")
        term.burst("Escape", "Escape")
        term.wait_for(lambda s: "Rewind" in s, "the rewind list")
        term.burst("Enter")  # back before "second"
        term.wait_for(lambda s: prompt_box(s) == "second", "the prompt back to edit")
        term.burst("Enter")
        lines = type_on_until(term, "Restore the files?")
        time.sleep(GRACE + 0.2)  # a pause: now a key answers
        term.burst("c")  # cancel: the prompt comes back, before what was typed
        term.wait_for(lambda s: "Restore the files?" not in s, "the question gone")
        term.burst("Escape")  # back to HEAD: sent from there, no question
        term.wait_for(lambda s: "continues from" not in flat(s), "the pick forgotten")
        term.burst("Enter")
        term.wait_for(lambda s: len(user_prompts(term)) == 3, "the prompt stored")
        assert user_prompts(term)[-1].split("\n") == ["second", "", *["ab"] * lines]
    finally:
        term.close()


def test_enter_on_the_chat_sends_the_prompt(offline: Terminal) -> None:
    """Text typed, Tab (the keys go to the chat, as the prompt's border says), then
    Enter: the chat has no use for Enter, so it goes to the prompt and sends it,
    as the README says (it went nowhere: the prompt stayed, unsent)."""
    offline.start()
    offline.burst("abc")
    offline.wait_for(lambda s: prompt_box(s) == "abc", "the text")
    offline.burst("Tab")
    offline.wait_for(lambda s: "keys: chat" in s, "the keys on the chat")
    offline.burst("Enter")
    offline.wait_for(lambda s: "you said 'abc'" in flat(s), "the prompt sent")
    assert user_prompts(offline) == ["abc"]


def test_a_held_session_opens_when_tried_again_once_it_is_free(tmp_path: Path) -> None:
    """A session another process holds (during its turn: between turns every infai
    lets it go) is said at once; once the holder let go, ``r`` opens it here (the
    dialog offered only another session, a read-only view or quitting)."""
    term = Terminal(tmp_path, SIZES[1])
    try:
        store = Store(term.home)
        session = store.create_session(working_dir=str(term.work)).id
        with store.open_writer(session) as writer:  # this test's process holds it
            writer.append(MessageRecord(content="written elsewhere"), "user")
            term.start("--session", session)
            term.wait_for(lambda s: "Session in use" in s, "the held session's dialog")
        term.burst("r")
        term.wait_for(
            lambda s: "Session in use" not in s and "written elsewhere" in s, "the session open"
        )
        term.burst("hello", "Enter")
        term.wait_for(lambda s: "you said 'hello'" in flat(s), "a turn in it")
        assert user_prompts(term) == ["written elsewhere", "hello"]
    finally:
        term.close()


def test_a_prompt_starting_with_a_slash_is_never_lost(offline: Terminal) -> None:
    """``/etc/hosts looks wrong`` is a prompt about a path (no command has a ``/``
    in its name): it is sent. ``/nonsense words`` is no command: it is not sent and
    stays in the box to edit. Both vanished ("unknown command"), not even kept in
    the history."""
    offline.start()
    offline.burst("/etc/hosts looks wrong")
    offline.wait_for(lambda s: prompt_box(s) == "/etc/hosts looks wrong", "the text")
    offline.burst("Enter")
    offline.wait_for(lambda s: "you said '/etc/hosts looks wrong'" in flat(s), "it sent")
    offline.burst("/nonsense words")
    offline.wait_for(lambda s: prompt_box(s) == "/nonsense words", "the text")
    offline.burst("Enter")
    offline.wait_for(lambda s: "unknown command" in flat(s), "the command refused")
    offline.wait_for(lambda s: prompt_box(s) == "/nonsense words", "the text kept")
    assert user_prompts(offline) == ["/etc/hosts looks wrong"]

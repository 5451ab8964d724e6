"""Issue 25, in a real terminal (tmux at 100x30 and 60x20): continuing from an old
tool call (bug 6), the session let go between turns (bug 10), the rewind list of
the user's own prompts (Esc Esc), the transcript's scrollback, and the approval
dialog's colours.

Each test starts the ``infai`` command in tmux with a scripted model, sends keys
with ``send-keys`` and polls the screen (and the store) for what must be there.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.agent.context import INTERRUPTED, to_messages
from infai.shells.tui.modals import GRACE
from infai.store import MessageRecord, Store
from tmux_term import INFAI, SESSION, SIZES, Terminal, composer_lines, flat


def scripted(tmp_path: Path, size: tuple[int, int], replies: list[object]) -> Terminal:
    """A terminal whose model replays ``replies`` (a script in a file)."""
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(replies))
    return Terminal(tmp_path, size, f'model = "scripted:{script}"\n')


def calls(name: str, **arguments: str) -> dict[str, object]:
    """A scripted reply that calls tool ``name``."""
    return {"content": "", "tool_calls": [{"id": "c1", "name": name, "arguments": arguments}]}


def messages(term: Terminal) -> list[str]:
    """The messages on the session's path to HEAD, oldest first ([] before it exists)."""
    store = Store(term.home)
    listed = store.list_sessions()
    if not listed:
        return []
    with store.open_reader(listed[0].id) as reader:
        events = reader.context().events
    return [e.record.content for e in events if isinstance(e.record, MessageRecord)]


def answered(term: Terminal, reply: str) -> str:
    """Wait until ``reply`` is the last message stored and the screen says saved."""

    def done(shown: str) -> bool:
        said = messages(term) if ("✓ saved" in shown or "│ ✓ │" in shown) else []
        return bool(said) and said[-1] == reply

    return term.wait_for(done, f"the reply {reply!r}")


@pytest.fixture(params=SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def reading(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Terminal]:
    """A model that reads a file (a tool call with its result), then talks."""
    term = scripted(
        tmp_path, request.param, [calls("read_file", path="a.txt"), "read it", "second", "went on"]
    )
    (term.work / "a.txt").write_text("alpha\n")
    try:
        yield term
    finally:
        term.close()


def test_continuing_from_a_completed_tool_call_keeps_its_result(reading: Terminal) -> None:
    """Bug 6: the call picked in the timeline is shown with its result (not
    ``running…``), and the prompt sent from there follows the result: no
    interruption is drawn or recorded and the model is told nothing false."""
    reading.start()
    reading.burst("read", "Enter")
    answered(reading, "read it")
    reading.burst("more", "Enter")
    answered(reading, "second")
    reading.burst("C-t")
    reading.wait_for(lambda s: "◆ #7 assistant" in s, "the timeline")
    # the cursor opens on HEAD (#7); four rows up is the call (#3)
    reading.burst("Up", "Up", "Up", "Up", "Enter")
    shown = reading.wait_for(lambda s: "continues from" in flat(s), "the pick")
    assert "continues from #4" in flat(shown), shown  # after the call's result
    reading.burst("C-t")  # closed: the chat has the width again
    shown = reading.wait_for(lambda s: "✓ done" in s, "the call, with its result")
    assert "running" not in shown, shown
    reading.burst("go on", "Enter")
    shown = answered(reading, "went on")
    assert "interrupted" not in shown, shown
    store = Store(reading.home)
    [info] = store.list_sessions()
    with store.open_reader(info.id) as reader:
        path = reader.path()
        sent = to_messages(list(reader.context().events))
    assert [e.seq for e in path][:5] == [0, 1, 2, 3, 4] and path[5].preview == "go on"
    assert all(m.content != INTERRUPTED for m in sent)
    assert [m.content for m in sent if m.role == "tool"] == ["alpha\n"]


@pytest.fixture(params=SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def offline(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Terminal]:
    """The offline model (it says back what it was told)."""
    term = Terminal(tmp_path, request.param)
    try:
        yield term
    finally:
        term.close()


@pytest.mark.slow  # three or more turns, or a second process: runs in `make crash`
def test_another_terminal_runs_in_the_session_between_turns(offline: Terminal) -> None:
    """Bug 10: while the TUI sits idle, ``infai run --session S`` from another
    terminal runs at once (it waited 10 s for the TUI's lock and failed); the TUI
    shows what it appended, and its next prompt continues after it."""
    offline.start()
    offline.burst("hello", "Enter")
    offline.wait_for(lambda s: len(messages(offline)) == 2 and "✓" in s, "the first reply")
    [info] = Store(offline.home).list_sessions()
    done = subprocess.run(
        [str(INFAI), "run", "--session", info.id, "from elsewhere"],
        cwd=offline.work,
        env=offline.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr  # it waited 10 s for the TUI's lock, and failed
    offline.wait_for(lambda s: "from elsewhere" in s, "the other terminal's prompt shown")
    offline.burst("after", "Enter")
    offline.wait_for(lambda s: len(messages(offline)) == 6 and "✓" in s, "the next reply")
    said = messages(offline)
    assert [said[0], said[2], said[4]] == ["hello", "from elsewhere", "after"], said


def prompt_box(shown: str) -> str:
    """The text in the prompt box, its lines joined by ``↵``."""
    return "↵".join(composer_lines(shown))


@pytest.mark.slow  # three or more turns, or a second process: runs in `make crash`
def test_esc_esc_takes_a_prompt_back_to_edit_and_sends_it_from_before_it(
    offline: Terminal,
) -> None:
    """Rewind: Esc Esc lists the user's own prompts (no reply, no tool), Enter on
    one puts it back in the box, and the edited prompt is sent from before it:
    the later prompts are left on their branch, and the files are restored (a file
    made by hand is asked about first)."""
    offline.start()
    for text in ("first prompt", "second prompt", "third prompt"):
        if text == "third prompt":  # recorded when the third turn starts
            (offline.work / "later.txt").write_text("made after the second prompt\n")
        offline.burst(text, "Enter")
        wanted = f"you said '{text}'"
        offline.wait_for(lambda s: wanted in flat(s), f"the reply to {text}")  # noqa: B023
    offline.burst("Escape")
    offline.burst("Escape")
    shown = offline.wait_for(lambda s: "Rewind" in s, "the rewind list")
    box = shown[shown.index("Rewind") : shown.index("Enter: edit")]
    assert re.findall(r"#\d+ (\w+) prompt", box) == ["first", "second", "third"], shown
    assert "you said" not in box
    offline.burst("Up")
    offline.burst("Enter")
    shown = offline.wait_for(lambda s: prompt_box(s) == "second prompt", "the prompt back")
    assert "continues from #" in flat(shown)
    offline.burst(" again", "Enter")
    # later.txt was made by hand between turns: the restore asks before removing it
    offline.wait_for(lambda s: "Restore the files?" in s and "later.txt" in s, "the question")
    time.sleep(GRACE + 0.1)  # the dialog's own pause: keys before it go to the prompt
    offline.burst("t")
    offline.wait_for(lambda s: "you said 'second prompt again'" in flat(s), "the reply")
    said = messages(offline)
    assert [said[0], said[2]] == ["first prompt", "second prompt again"] and len(said) == 4
    assert not (offline.work / "later.txt").exists()  # the files as they were before it


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_the_timeline_keeps_30_characters_of_plain_previews(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """The timeline's rows at 60 columns keep at least 30 characters of each
    preview (it took 40% of the width: 20), and a reply's Markdown is shown plain
    (at 100 columns too, where it keeps 40% of the width)."""
    reply = "## Plan\n**First** read the `notes.txt` file, then [ask](http://x) about it"
    term = scripted(tmp_path, size, [reply])
    try:
        term.start()
        term.burst("plan it", "Enter")
        answered(term, reply)
        term.burst("C-t")
        shown = term.wait_for(lambda s: "◆ #2 assistant:" in s, "the timeline")
        [row] = [line for line in shown.splitlines() if "#2 assistant:" in line]
        preview = row.split("#2 assistant:", 1)[1].strip()
        whole = "Plan First read the notes.txt file, then ask about it"
        assert whole.startswith(preview) and len(preview) >= (30 if size[0] < 100 else 20), row
        assert "**" not in row and "#" not in preview and "`" not in row, row
    finally:
        term.close()


def mouse(term: Terminal, button: int, x: int, y: int, end: str = "M") -> None:
    """A mouse report at column ``x``, row ``y`` (from 0), as the terminal sends it
    (SGR: ``M`` a press or a motion, ``m`` a release), written to the pane as bytes."""
    sequence = f"\x1b[<{button};{x + 1};{y + 1}{end}".encode()
    term.run("send-keys", "-t", SESSION, "-H", *(f"{byte:02x}" for byte in sequence))


def row_of(shown: str, text: str) -> tuple[int, int]:
    """Where ``text`` is on the screen: (column, row), from 0."""
    for y, line in enumerate(shown.splitlines()):
        if text in line:
            return line.index(text), y
    raise AssertionError(f"{text!r} is not on the screen:\n{shown}")


def talked(term: Terminal, count: int) -> None:
    """Send ``count`` prompts to the offline model, each answered before the next."""
    for i in range(count):
        term.burst(f"message number {i}", "Enter")
        wanted = f"you said 'message number {i}'"
        term.wait_for(lambda s: wanted in flat(s), f"reply {i}")  # noqa: B023


@pytest.mark.slow  # three or more turns, or a second process: runs in `make crash`
def test_page_up_and_the_wheel_scroll_the_chat_and_the_prompt_keeps_the_keys(
    offline: Terminal,
) -> None:
    """Scrollback: Page Up / Page Down scroll the transcript from the prompt, the
    wheel too, and what is typed meanwhile still goes into the prompt box."""
    offline.start()
    talked(offline, 6)
    offline.burst("PPage", "PPage", "PPage", "PPage")
    offline.wait_for(lambda s: "message number 0" in s, "the first prompt, scrolled to")
    offline.burst("typed")
    shown = offline.wait_for(lambda s: prompt_box(s) == "typed", "the text in the prompt")
    assert "keys:" not in shown and "message number 0" in shown  # the keys never moved
    offline.burst("NPage", "NPage", "NPage")
    offline.wait_for(lambda s: "message number 5'" in s, "the end again")
    for _ in range(30):
        mouse(offline, 64, 5, 3)  # the wheel, up, over the chat
    offline.wait_for(lambda s: "message number 0" in s, "scrolled by the wheel")
    offline.burst(" more")
    offline.wait_for(lambda s: prompt_box(s) == "typed more", "the prompt still has the keys")


def test_text_selected_with_the_mouse_is_copied_by_ctrl_c(offline: Terminal) -> None:
    """Scrollback: a drag over the chat selects text and Ctrl-C copies it (to the
    terminal's clipboard: tmux keeps it as a buffer); it neither cancels nor quits."""
    offline.conf.write_text(offline.conf.read_text() + "set -g set-clipboard on\n")
    offline.start()
    talked(offline, 1)
    x, y = row_of(offline.screen(), "message number 0")
    mouse(offline, 0, x, y)  # press, drag along the line, release
    mouse(offline, 32, x + 8, y)
    mouse(offline, 32, x + 16, y)
    mouse(offline, 0, x + 16, y, "m")
    offline.burst("C-c")
    offline.wait_for(lambda s: "copied" in s, "the copy said")
    assert "message number 0" in offline.run("show-buffer")
    assert "again to quit" not in offline.screen()
    offline.burst("still here", "Enter")
    offline.wait_for(lambda s: "you said 'still here'" in flat(s), "the app still running")


def test_a_compacted_session_shows_the_earlier_conversation_folded(offline: Terminal) -> None:
    """Scrollback: after /compact the conversation before the compaction is still
    there, folded above it; a click opens it."""
    offline.start()
    talked(offline, 2)
    offline.burst("/compact", "Enter")
    shown = offline.wait_for(lambda s: "before the compaction" in s, "the earlier fold")
    assert "message number 0" not in shown
    # a click while the compaction's notice is still being laid out can go unseen:
    # clicked again while the fold shows closed (``▶``) where it is now
    for _ in range(10):
        shown = offline.screen()
        if "message number" in shown:  # opened
            break
        if "before the compaction" not in shown:  # redrawn just now (a reload): look again
            time.sleep(0.5)
            continue
        x, y = row_of(shown, "before the compaction")
        if "▶" in shown.splitlines()[y]:
            mouse(offline, 0, x, y)
            mouse(offline, 0, x, y, "m")
        time.sleep(0.5)
    offline.burst("PPage", "PPage", "PPage")  # opened above the end the chat keeps to
    offline.wait_for(lambda s: "message number 0" in s, "the earlier conversation")


def colour_before(line: str, token: str) -> str:
    """The last SGR escape before ``token`` on a captured line (``capture-pane -e``)."""
    found = re.findall(r"\x1b\[[0-9;]*m", line[: line.index(token)])
    return found[-1] if found else ""


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_the_approval_dialog_colours_the_code_it_shows(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """An edit's question shows the change with the file's line numbers and its
    language's colours: a keyword and a string on the added line differ (it was
    one colour for the whole line)."""
    code = "".join(f"x{i} = {i}\n" for i in range(1, 30)) + "def f():\n    return 1\n"
    edit = {"path": "code.py", "old_text": "    return 1\n", "new_text": '    return "two"\n'}
    term = scripted(
        tmp_path,
        size,
        [{"content": "", "tool_calls": [{"id": "e1", "name": "edit_file", "arguments": edit}]}],
    )
    (term.work / "code.py").write_text(code)
    try:
        term.start()
        term.burst("edit it", "Enter")
        term.wait_for(lambda s: "Allow edit_file?" in s and '31 +     return "two"' in s, "it")
        coloured = term.run("capture-pane", "-p", "-e", "-t", SESSION)
        [added] = [line for line in coloured.splitlines() if '"two"' in line and "31" in line]
        assert colour_before(added, "return") != colour_before(added, '"two"'), repr(added)
        assert "30" in flat(term.screen()) and "def f():" in term.screen()  # context, numbered
    finally:
        term.close()


def test_the_status_bar_keeps_the_working_directory_shortened(offline: Terminal) -> None:
    """The status bar says where the session works, shortened to its end at 60
    columns (it was dropped there), beside HEAD and the tokens, which stay."""
    offline.start()
    talked(offline, 1)
    lines = offline.wait_for(lambda s: "HEAD #2" in s, "the reply saved").splitlines()
    bar = lines[max(i for i, line in enumerate(lines) if "^c" in line) - 1]
    assert "HEAD #2" in bar and "32" in bar, bar
    assert bar.rstrip().endswith("/work"), bar


def test_subagent_sessions_sit_under_their_parent_and_hits_show_titles(
    offline: Terminal,
) -> None:
    """The picker lists an imported subagent's session under its parent (``└``),
    not as a session of its own among the others; a search hit in an unnamed
    session is titled by its first prompt (it showed the session's id)."""
    store = Store(offline.home)
    work = str(offline.work)
    parent = store.create_session(working_dir=work).id
    other = store.create_session(working_dir=work).id
    child = store.create_session(working_dir=work, parent_session=parent).id
    for sid, text in ((parent, "the parent asks"), (child, "a subagent works"), (other, "other")):
        with store.open_writer(sid) as writer:
            writer.append(MessageRecord(content=f"{text} zebra"), "user")
    offline.start()
    offline.burst("C-o")
    shown = offline.wait_for(lambda s: "Sessions" in s and "subagent" in s, "the picker")
    words = ("the parent", "a subagent", "other zebra")
    rows = [line for line in shown.splitlines() if any(w in line for w in words)]
    names = [next(w for w in words if w in row) for row in rows]
    assert names.index("a subagent") == names.index("the parent") + 1, shown
    assert "└ a subagent" in shown, shown
    offline.burst("Escape")
    offline.wait_for(lambda s: "Sessions" not in s, "the picker closed")
    offline.burst("C-f")
    offline.wait_for(lambda s: "Search every session" in s, "the search panel")
    offline.burst("zebra")
    # the count is drawn before the list under it: both are waited for (a screen read
    # between the two showed the count over a half-drawn list)
    shown = offline.wait_for(
        lambda s: "3 hits" in s and "the parent asks zebra" in s, "the hits, titled"
    )
    assert child[:13] not in shown, shown

"""Issue 25, in a real terminal (tmux at 100x30 and 60x20): continuing from an old
tool call (bug 6), the session let go between turns (bug 10), the rewind list of
the user's own prompts (Esc Esc) and the transcript's scrollback.

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
from tmux_term import INFAI, SIZES, Terminal, flat


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
    assert "running" not in shown and "✓ done" in shown, shown
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


def test_another_terminal_runs_in_the_session_between_turns(offline: Terminal) -> None:
    """Bug 10: while the TUI sits idle, ``infai run --session S`` from another
    terminal runs at once (it waited 10 s for the TUI's lock and failed); the TUI
    shows what it appended, and its next prompt continues after it."""
    offline.start()
    offline.burst("hello", "Enter")
    offline.wait_for(lambda s: len(messages(offline)) == 2 and "✓" in s, "the first reply")
    [info] = Store(offline.home).list_sessions()
    started = time.monotonic()
    done = subprocess.run(
        [str(INFAI), "run", "--session", info.id, "from elsewhere"],
        cwd=offline.work,
        env=offline.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 8, "it waited for the TUI's lock"
    offline.wait_for(lambda s: "from elsewhere" in s, "the other terminal's prompt shown")
    offline.burst("after", "Enter")
    offline.wait_for(lambda s: len(messages(offline)) == 6 and "✓" in s, "the next reply")
    said = messages(offline)
    assert [said[0], said[2], said[4]] == ["hello", "from elsewhere", "after"], said


def prompt_box(shown: str) -> str:
    """The text in the prompt box (the line between its borders)."""
    for line in shown.splitlines():
        if line.startswith("▊  "):
            return line.removeprefix("▊  ").rstrip(" ▎")
    return ""


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
    preview (it took 40% of the width: 20), and a reply's Markdown is shown plain."""
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
        assert len(preview) >= 30 and whole.startswith(preview), row
        assert "**" not in row and "#" not in preview and "`" not in row, row
    finally:
        term.close()

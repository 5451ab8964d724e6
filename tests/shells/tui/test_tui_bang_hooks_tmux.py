"""``!cmd`` typed in the TUI meets the hooks a model's ``Bash`` call meets: a
PreToolUse guard script (exit 2) stops ``!rm -rf`` with its stderr on screen,
and a command that runs fires PreToolUse then PostToolUse, each run recorded in
the session. Real infai in a real terminal (tmux), a real hook script."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.store import HookRecord, MessageRecord, Store
from tmux_term import SIZES, Terminal, flat


def guard(tmp_path: Path) -> str:
    """Logs each payload it reads; exit 2 with why on stderr for ``rm -rf``."""
    path = tmp_path / "guard.sh"
    path.write_text(
        "#!/bin/bash\n"
        "payload=$(cat)\n"
        f'echo "$payload" >> {tmp_path / "hooks.log"}\n'
        'if [[ "$payload" == *"rm -rf"* ]]; then echo "no rm -rf here, use trash" >&2; exit 2; fi\n'
    )
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    hook = guard(tmp_path)
    config = (
        '[permissions]\nallow = ["bash *"]\n'
        f'[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "{hook}"\n'
        f'[[hooks.PostToolUse]]\nmatcher = "Bash"\ncommand = "{hook}"\n'
    )
    term = Terminal(tmp_path, SIZES[0], config)
    try:
        yield term
    finally:
        term.close()


def recorded(term: Terminal) -> list[object]:
    store = Store(term.home)
    listed = store.list_sessions()
    if not listed:
        return []
    with store.open_reader(listed[0].id) as reader:
        return [reader.event(e.id, resolve=True).record for e in reader.entries()]


def test_bang_fires_the_bash_hooks_and_a_block_shows_why(
    terminal: Terminal, tmp_path: Path
) -> None:
    terminal.start()
    (terminal.work / "keep.txt").write_text("kept\n")
    terminal.burst("!rm -rf keep.txt", "Enter")
    shown = terminal.wait_for(lambda s: "no rm -rf here" in flat(s), "the hook's reason")
    assert "was not run" in flat(shown)
    assert (terminal.work / "keep.txt").read_text() == "kept\n"
    terminal.wait_for(lambda s: any(isinstance(r, HookRecord) for r in recorded(terminal)), "rec")
    [blocked] = recorded(terminal)
    assert isinstance(blocked, HookRecord)
    assert (blocked.event, blocked.exit_code, blocked.decision) == ("PreToolUse", 2, "block")

    terminal.burst("!echo hi-from-me", "Enter")
    terminal.wait_for(
        lambda s: any(isinstance(r, MessageRecord) for r in recorded(terminal)), "the note"
    )
    kinds = [(type(r).__name__, getattr(r, "event", None)) for r in recorded(terminal)]
    assert kinds == [
        ("HookRecord", "PreToolUse"),
        ("HookRecord", "PreToolUse"),
        ("HookRecord", "PostToolUse"),
        ("MessageRecord", None),
    ]
    sent = [json.loads(line) for line in (tmp_path / "hooks.log").read_text().splitlines()]
    assert [(p["hook_event_name"], p["tool_name"], p["tool_input"]) for p in sent] == [
        ("PreToolUse", "Bash", {"command": "rm -rf keep.txt"}),
        ("PreToolUse", "Bash", {"command": "echo hi-from-me"}),
        ("PostToolUse", "Bash", {"command": "echo hi-from-me"}),
    ]


def test_between_turns_the_hook_runs_and_their_notices_are_shown(tmp_path: Path) -> None:
    """The runs of ``!cmd``'s hooks show in the chat and the timeline as a model's
    call's do (the chat keeps what it said: no reload), and a hook's non-blocking
    failure is said on screen."""
    hook = guard(tmp_path)
    grumble = tmp_path / "grumble.sh"
    grumble.write_text("#!/bin/bash\ncat >/dev/null\necho 'post hook grumbles' >&2\nexit 1\n")
    grumble.chmod(0o755)
    config = (
        '[permissions]\nallow = ["bash *"]\n'
        f'[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "{hook}"\n'
        f'[[hooks.PostToolUse]]\nmatcher = "Bash"\ncommand = "{grumble}"\n'
    )
    term = Terminal(tmp_path, SIZES[0], config)
    try:
        term.start()
        term.burst("!rm -rf keep.txt", "Enter")
        # the run is shown as the hook's record is saved; why the command was not run
        # only once the call has returned: a frame or more later
        term.wait_for(lambda s: "PreToolUse(bash) exit 2 block" in flat(s), "the run")
        term.wait_for(lambda s: "no rm -rf here, use trash" in flat(s), "the hook's reason")
        term.burst("C-t")  # the timeline open (typing still goes to the prompt)
        term.wait_for(lambda s: "#0 system: hook PreToolUse(bash)" in flat(s), "the timeline")
        term.burst("!echo hi-from-me", "Enter")
        shown = term.wait_for(lambda s: "post hook grumbles" in flat(s), "the hook's failure")
        shown = term.wait_for(lambda s: "I ran a shell command myself" in flat(s), "the note")
        assert "PostToolUse(bash) exit 1 error" in flat(shown)  # in the chat
        term.wait_for(lambda s: "#2 system: hook PostToolUse(bash)" in flat(s), "its run's row")
    finally:
        term.close()


def test_an_attached_files_read_hook_is_shown_before_the_turn(tmp_path: Path) -> None:
    """``@file`` fires the ``Read`` hooks: their run and a failure's notice are on
    screen, before the prompt's turn (which answers as usual)."""
    grumble = tmp_path / "grumble.sh"
    grumble.write_text("#!/bin/bash\ncat >/dev/null\necho 'read hook grumbles' >&2\nexit 1\n")
    grumble.chmod(0o755)
    config = f'[[hooks.PreToolUse]]\nmatcher = "Read"\ncommand = "{grumble}"\n'
    term = Terminal(tmp_path, SIZES[0], config)
    try:
        (term.work / "keep.txt").write_text("kept\n")
        term.start()
        term.burst("explain @keep.txt please", "Enter")
        shown = term.wait_for(lambda s: "offline model: you said" in flat(s), "the answer")
        shown = term.wait_for(lambda s: "read hook grumbles" in flat(s), "the hook's failure")
        assert "PreToolUse(read_file) exit 1 error" in flat(shown)
    finally:
        term.close()

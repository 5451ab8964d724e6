"""Issue 25, in a real terminal (tmux at 100x30 and 60x20): continuing from an old
tool call (bug 6), the session let go between turns (bug 10), the rewind list of
the user's own prompts (Esc Esc) and the transcript's scrollback.

Each test starts the ``infai`` command in tmux with a scripted model, sends keys
with ``send-keys`` and polls the screen (and the store) for what must be there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.agent.context import INTERRUPTED, to_messages
from infai.store import MessageRecord, Store
from tmux_term import SIZES, Terminal, flat


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

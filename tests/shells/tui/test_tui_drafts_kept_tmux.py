"""Issue 25's "a draft is never lost", in a real terminal (tmux at 100x30 and
60x20): what is in the prompt box when something else puts a prompt there.

Each test starts the ``infai`` command in tmux with the offline model, sends
keys with ``send-keys`` and polls the screen for what must be there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tmux_term import SIZES, Terminal, composer_lines, flat


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

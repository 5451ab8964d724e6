"""Ctrl-P (issue 25): Textual's command palette listed Textual's commands (themes,
screenshots), not infai's, while the footer advertised it as `^p palette`. It is
off: the footer does not offer it, and Ctrl-P opens nothing over the prompt (F1
lists infai's keys and commands). In a real terminal (tmux), at both sizes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tmux_term import SIZES, Terminal


@pytest.fixture(params=SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def terminal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path, request.param)
    try:
        term.start()
        yield term
    finally:
        term.close()


def test_the_footer_offers_no_palette_and_ctrl_p_opens_none(terminal: Terminal) -> None:
    shown = terminal.wait_for(lambda s: "f1" in s.lower() or "help" in s, "the footer")
    assert "palette" not in shown
    terminal.burst("C-p")
    terminal.burst("typed")
    shown = terminal.wait_for(lambda s: "typed" in s, "the typed text")
    # the keys stayed with the prompt box (its text line is drawn between ▊ and ▎)
    assert any("typed" in line and line.lstrip().startswith("▊") for line in shown.splitlines())
    assert "Search for commands" not in shown

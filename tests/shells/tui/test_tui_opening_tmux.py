"""The first frame does not wait for the session, in a real terminal (tmux) with a
real MCP server configured (opening the session imports the MCP SDK): what is
typed as soon as the prompt box shows, while the session may still be opening,
is kept in the box in order, and is sent once the session is open.

(That the frame comes before the open, and that prompts sent meanwhile are
queued and sent in order, is asserted with a gated open in ``test_tui_opening``:
here the open's length is the machine's, so the test does not depend on seeing
"opening session…".)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_servers import SCRIPT
from tmux_term import Terminal, composer_lines, flat, opening


def mcp_config(log: Path) -> str:
    """The tests' stdio MCP server (the sandbox off: it runs from the test's checkout)."""
    args = json.dumps([str(SCRIPT), "stdio", str(log)])
    return (
        '[sandbox]\nmode = "off"\n\n[mcp.servers.tests]\n'
        f"command = {json.dumps(sys.executable)}\nargs = {args}\n"
    )


@pytest.fixture
def with_mcp(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path, (100, 30), mcp_config(tmp_path / "mcp.log"))
    try:
        yield term
    finally:
        term.close()


def test_keys_typed_at_the_first_frame_are_kept_while_the_session_opens(
    with_mcp: Terminal,
) -> None:
    term = with_mcp
    term.start(opened=False)  # the prompt box: the session may still be opening
    term.burst("typed at once")
    term.wait_for(lambda s: composer_lines(s) == ["typed at once"], "the keys in the box")
    term.wait_for(lambda s: not opening(s), "the session to open")
    assert composer_lines(term.screen()) == ["typed at once"]
    term.burst("Enter")
    done = term.wait_for(lambda s: "you said 'typed at once'" in flat(s), "the reply")
    assert composer_lines(done) == []

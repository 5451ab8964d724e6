"""The remote objects offer every member the TUI reaches for.

The TUI drives a :class:`~infai.shells.remote.session.RemoteSession` as it drives
an :class:`~infai.agent.AgentSession`, and reads a
:class:`~infai.shells.remote.view.RemoteView`, a ``RemoteHarness`` and a
``RemoteStore`` where it reads a session view, a harness and a store. Nothing
checks that statically (the shells hand them over as the local types), so this
does: every ``session.NAME``, ``log.NAME``/``reader.NAME``, ``harness.NAME`` and
``harness.store.NAME`` written in the TUI's modules exists on the remote object,
so a member the TUI starts using is added to the remote side in the same change
(or named below as local-only, with why).
"""

from __future__ import annotations

import re
from pathlib import Path

import infai.shells.tui as tui
from infai.shells.remote import Remote
from infai.shells.remote.session import RemoteHarness, RemoteSession

SOURCES = sorted(Path(tui.__file__).parent.glob("*.py"))
#: members reached only on the local path, and why
LOCAL_ONLY = {
    "park",  # store_io.let_go: a local session's writer is let go between turns
    "park_between_turns",  # the same
    "new_session",  # store_io.open_session (remote_io.RemoteBackend opens instead)
    "open",  # the same
    "sessions",  # store_io.sessions (RemoteBackend.sessions lists instead)
    "use_model",  # store_io.use_model (RemoteBackend.use_model refuses instead)
    "watch",  # prompting._watch: only where store.shared_writers (never remote)
    "remote",  # remote_io's own
    "attach",  # remote_io's own
}


def reached(pattern: str) -> set[str]:
    names: set[str] = set()
    for source in SOURCES:
        names |= set(re.findall(pattern, source.read_text()))
    return names - LOCAL_ONLY


def test_every_member_the_tui_reaches_for_is_there_remotely(tmp_path: Path) -> None:
    remote = Remote("http://127.0.0.1:9", "a-token-that-is-never-sent")
    space = RemoteHarness(remote, tmp_path, tmp_path)
    session = RemoteSession(space, {"id": "s", "working_dir": str(tmp_path)})
    try:
        checks = [
            (session, r"\b(?:session|opened|previous)\.([a-z_]+)\b"),
            (session.view, r"\b(?:log|reader)\.([a-z_]+)\b"),
            (space, r"\b(?:self\.harness|harness|space)\.([a-z_]+)\b"),
            (space.store, r"\bharness\.store\.([a-z_]+)\b"),
        ]
        missing = [
            f"{type(obj).__name__}.{name}"
            for obj, pattern in checks
            for name in sorted(reached(pattern))
            if not (hasattr(type(obj), name) or name in vars(obj))  # no property read
        ]
        assert missing == []
    finally:
        session.close()
        remote.close()

"""The seam's Protocols hold every member of a session and its view the TUI reaches for.

The TUI drives a :class:`~infai.shells.remote.session.RemoteSession` as it drives
an :class:`~infai.agent.AgentSession`. The seam (:mod:`infai.shells.tui.seam`)
names what it uses of both as Protocols, and ``mypy --strict`` (``make lint``)
proves that the local and the remote classes satisfy them, types included. The
harness and the store are typed as the seam's Protocols in the app itself, so
mypy also proves the app uses nothing else of them. The app keeps its session
as an ``AgentSession`` (the local-only ``!cmd`` and ``@file`` paths need one),
so for the session and its view this test is what proves the other half: every
``session.NAME``, ``opened.NAME``, ``previous.NAME`` and ``log.NAME``/``reader.NAME``
written in the TUI's modules is a member of :class:`TuiSession` or
:class:`TuiView` (or named below as local-only, with why). A member the TUI
starts using is therefore added to the seam, and then mypy asks for it on both
sides.
"""

from __future__ import annotations

import re
from pathlib import Path

import infai.shells.tui as tui
from infai.shells.tui.seam import TuiSession, TuiView

#: the remote backend works on the remote types themselves (mypy checks it there)
OWN_TYPES = {"remote_io.py"}
SOURCES = sorted(p for p in Path(tui.__file__).parent.glob("*.py") if p.name not in OWN_TYPES)
#: members reached only on the local path, and why
LOCAL_ONLY = {
    "park",  # store_io.let_go: a local session's writer is let go between turns
    "park_between_turns",  # the same
    "store",  # backend.LocalBackend: a local session's own store (close, diff)
}


def reached(pattern: str) -> set[str]:
    names: set[str] = set()
    for source in SOURCES:
        names |= set(re.findall(pattern, source.read_text()))
    return names - LOCAL_ONLY


def members(protocol: type) -> set[str]:
    names = {name for name in vars(protocol) if not name.startswith("_")}
    return names | set(protocol.__annotations__)


def test_every_member_the_tui_reaches_for_is_in_the_seam() -> None:
    checks = [
        (TuiSession, r"\b(?:session|opened|previous)\.([a-z_]+)\b"),
        (TuiView, r"\b(?:log|reader)\.([a-z_]+)\b"),
    ]
    missing = [
        f"{protocol.__name__}.{name}"
        for protocol, pattern in checks
        for name in sorted(reached(pattern))
        if name not in members(protocol)
    ]
    assert missing == []

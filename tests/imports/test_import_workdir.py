"""An imported session does not take its working directory from the file.

A session's ``working_dir`` decides where a checkout of its files writes and
where its tools run; a Claude Code, Codex, Pi or OpenCode file names any
directory it likes (``~/.ssh``). So the tool's directory is recorded in the
import metadata (``extra["import"]["working_dir"]``: shown, grouped by, never
used) and the session names none: it works in the directory it is continued
from. A later import that grows the session keeps it so, and drops a working
directory an earlier infai had taken from the source (saying so).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from import_corpus import corpus
from infai.agent import AgentSession
from infai.imports import commit, importer_for
from infai.llm import ScriptedModel
from infai.store import Store
from infai.tools import AllowAll, Toolbox

PI = importer_for("pi")


def _pi_file(path: Path, cwd: str, turns: int = 1) -> Path:
    """A Pi v3 session of ``turns`` prompt/reply pairs, run in ``cwd``."""

    def entry(eid: int, second: int, message: dict[str, Any]) -> dict[str, Any]:
        parent = f"b{eid - 1:07d}" if eid > 1 else None
        stamp = f"2026-03-01T10:00:{second:02d}.000Z"
        return {"type": "message", "id": f"b{eid:07d}", "parentId": parent,
                "timestamp": stamp, "message": message}  # fmt: skip

    header = {"type": "session", "version": 3, "id": "0197aaaa-0000-7000-8000-0000000000a1",
              "timestamp": "2026-03-01T10:00:00.000Z", "cwd": cwd}  # fmt: skip
    lines: list[dict[str, Any]] = [header]
    for turn in range(turns):
        lines.append(entry(2 * turn + 1, 2 * turn + 1, {"role": "user", "content": f"p{turn}"}))
        reply = {"role": "assistant", "content": [{"type": "text", "text": f"r{turn}"}],
                 "model": "m", "stopReason": "stop"}  # fmt: skip
        lines.append(entry(2 * turn + 2, 2 * turn + 2, reply))
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_tools_directory_is_recorded_not_trusted(tmp_path: Path) -> None:
    victim = tmp_path / "victim" / ".ssh"
    store = Store(tmp_path / "home")
    (foreign,) = PI.load(_pi_file(tmp_path / "s.jsonl", str(victim)))
    assert commit(store, foreign).status == "created"
    info = store.info(foreign.session_id)
    assert info.working_dir is None
    assert info.extra["import"]["working_dir"] == str(victim)
    assert not any("dropped" in w for w in foreign.report.warnings)  # nothing to drop


def test_a_continued_import_works_where_it_is_continued_from(tmp_path: Path) -> None:
    """The effect: the agent's tools (and snapshots) run in the directory the user
    continues from, not in the one the file names."""
    victim, here = tmp_path / "victim", tmp_path / "here"
    victim.mkdir()
    here.mkdir()
    store = Store(tmp_path / "home")
    (foreign,) = PI.load(_pi_file(tmp_path / "s.jsonl", str(victim)))
    commit(store, foreign)
    session = AgentSession(
        store,
        foreign.session_id,
        model=ScriptedModel(["ok"]),
        toolbox=Toolbox(),
        permissions=AllowAll(),
        default_dir=here,
    )
    try:
        assert session.working_dir == here.resolve()
    finally:
        asyncio.run(session.aclose())


def test_a_grown_import_keeps_no_working_directory(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    path = _pi_file(tmp_path / "s.jsonl", "/work/app")
    (foreign,) = PI.load(path)
    commit(store, foreign)
    _pi_file(path, "/work/app", turns=2)  # the tool went on
    (grown,) = PI.load(path)
    outcome = commit(store, grown)
    assert (outcome.status, outcome.added) == ("grown", 2)
    info = store.info(grown.session_id)
    assert info.working_dir is None
    assert info.extra["import"]["working_dir"] == "/work/app"


@pytest.mark.parametrize("grows", [False, True])
def test_a_directory_an_earlier_import_trusted_is_dropped_and_said(
    tmp_path: Path, grows: bool
) -> None:
    """A store an older infai filled has the tool's directory as the session's own:
    the next import (whether it adds entries or not) drops it and says so, once."""
    store = Store(tmp_path / "home")
    path = _pi_file(tmp_path / "s.jsonl", "/work/app")
    (foreign,) = PI.load(path)
    commit(store, foreign)
    sid = foreign.session_id
    old = store.info(sid)
    mark = {k: v for k, v in old.extra["import"].items() if k != "working_dir"}
    store.restore_info(old.replace(working_dir="/work/app", extra={"import": mark}))  # as before
    if grows:
        _pi_file(path, "/work/app", turns=2)
    (again,) = PI.load(path)
    assert commit(store, again).status == ("grown" if grows else "unchanged")
    info = store.info(sid)
    assert info.working_dir is None
    assert info.extra["import"]["working_dir"] == "/work/app"
    assert any("working_dir '/work/app' dropped" in w for w in again.report.warnings)
    (third,) = PI.load(path)
    assert commit(store, third).status == "unchanged"
    assert third.report.warnings == []
    assert store.info(sid) == info  # nothing more to change


def test_a_directory_the_user_gave_the_session_is_kept(tmp_path: Path) -> None:
    """Only the tool's own directory is dropped: one the user set since stays."""
    store = Store(tmp_path / "home")
    path = _pi_file(tmp_path / "s.jsonl", "/work/app")
    (foreign,) = PI.load(path)
    commit(store, foreign)
    store.update_info(foreign.session_id, working_dir=str(tmp_path))
    (again,) = PI.load(path)
    commit(store, again)
    assert store.info(foreign.session_id).working_dir == str(tmp_path)


@pytest.mark.parametrize(
    ("tool", "where", "named"),
    [
        ("claude-code", "claude-code/d-kimuson", True),
        ("codex", "codex/feipi-subagents", True),
        ("pi", "pi/pi-mono", True),
        ("opencode", "opencode/goniz-opencode-ios", False),  # captured parts: no session info
    ],
)
def test_no_corpus_session_of_any_tool_names_a_working_directory(
    tmp_path: Path, tool: str, where: str, named: bool
) -> None:
    importer = importer_for(tool)
    store = Store(tmp_path / "home")
    recorded = 0
    for unit in importer.find(corpus() / where):
        for foreign in importer.load(unit):
            commit(store, foreign)
            for session in foreign.walk():  # subagents and forks too
                info = store.info(session.session_id)
                assert info.working_dir is None, (unit, session.source_id)
                if session.working_dir is not None:
                    assert info.extra["import"]["working_dir"] == session.working_dir
                    recorded += 1
    assert (recorded > 0) == named  # the directories the corpus names were kept for display

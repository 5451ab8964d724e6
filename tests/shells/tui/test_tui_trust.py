"""The TUI runs a session under its own directory's configuration, not its own.

Started in A (a trusted project allowing every command), the TUI opens a session
whose working directory is B, a repository whose ``.infai/config.toml`` denies
``touch`` (and tries to allow everything, which an untrusted file may not). B's
deny holds and A's allow does not reach B: judged by the file the command
would have made. What B's file left out is shown in the chat.

Driven by Textual's pilot at 80x24 (helpers: tests/support/tui_pilot.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from infai.agent import Harness
from infai.llm import Message, ScriptedModel, ToolCall
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import AssistantMessage, ToolView
from infai.store import Store
from tui_pilot import run_app, send, until


def test_a_session_of_another_directory_runs_under_its_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here, there = tmp_path / "A", tmp_path / "B"
    for root in (here, there):
        (root / ".infai").mkdir(parents=True)
    user = tmp_path / "user.toml"
    user.write_text(f"trusted_projects = [{str(here)!r}]\n")
    monkeypatch.setenv("INFAI_CONFIG", str(user))
    (here / ".infai" / "config.toml").write_text('[permissions]\nallow = ["bash *"]\n')
    (there / ".infai" / "config.toml").write_text(
        '[permissions]\nallow = ["bash *"]\ndeny = ["bash touch*"]\n'
    )
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(there)).id
    space = Harness(store, here)
    call = ToolCall("c1", "bash", {"command": "touch pwned"})
    space.model = ScriptedModel([Message(role="assistant", tool_calls=(call,)), "done"])
    app = InfaiApp(space, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: app.session is not None, "the session")
        shown = " ".join(str(n.render()) for n in app.query(".notice"))
        assert "allow rules were left out" in shown and str(there) in shown
        await send(pilot, "go")
        await until(pilot, lambda: not app.busy and bool(app.query(ToolView)), "the call")
        await until(pilot, lambda: not app.busy and bool(app.query(AssistantMessage)), "done")

    run_app(app, scenario, (80, 24))
    assert not (there / "pwned").exists()  # with A's rules, it ran
    with store.open_reader(sid) as reader:
        results = [e for e in reader.context().events if e.kind == "tool_result"]
    assert len(results) == 1 and results[0].record.is_error  # type: ignore[union-attr]

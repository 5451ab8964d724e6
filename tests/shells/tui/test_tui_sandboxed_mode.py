"""The approval mode for a verified sandbox, as the TUI user meets it: with
``[sandbox] approvals = "sandboxed"`` and a passing doctor, a shell command and a
write inside the working directory run without a question (the answer is
recorded as the mode's), while an escalation still opens the dialog."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from textual.pilot import Pilot

from infai.agent import Config, Harness
from infai.llm import ScriptedModel
from infai.shells.tui import InfaiApp
from infai.shells.tui.modals import ApprovalScreen
from infai.store import Store, ToolResultRecord
from infai.tools import SandboxSettings, record_pass
from infai.tools.sandbox_verified import MODE_LABEL
from tui_pilot import SIZES, asked, bash_call, run_app, send, until, write_call

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)


def _harness(tmp_path: Path, model: ScriptedModel) -> Harness:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    config = Config(default_model="offline", sandbox=SandboxSettings(approvals="sandboxed"))
    space = Harness(Store(tmp_path / "home"), work, config=config)
    space.model = model
    probe = space.sandbox.probe()
    assert probe.ok, probe.reason
    record_pass(Path(space.store.home), probe.bwrap, config.sandbox)  # as `infai doctor` does
    return space


@pytest.mark.parametrize("size", SIZES)
def test_confined_work_runs_unasked_and_an_escalation_still_asks(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    escalate = bash_call("touch outside-the-sandbox.txt")
    escalate = replace(
        escalate,
        tool_calls=tuple(
            replace(c, arguments={**c.arguments, "outside_sandbox": True})
            for c in escalate.tool_calls
        ),
    )
    model = ScriptedModel(
        [bash_call("echo made > made.txt"), write_call("notes.txt"), "done", escalate, "ok"]
    )
    space = _harness(tmp_path, model)
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "make them")
        await until(pilot, lambda: not app.busy, "the turn")
        assert not isinstance(app.screen, ApprovalScreen)  # nothing was asked
        await send(pilot, "now outside")
        dialog = await asked(pilot, app)  # the question, and its typing grace over
        assert dialog.ask.tool == "bash!"  # the escalation is asked about
        await pilot.pause(0.3)  # a loaded machine: well past the grace
        await pilot.press("n")
        await until(pilot, lambda: not app.busy, "the second turn", tries=3000)

    run_app(app, scenario, size)
    work = space.working_dir
    assert (work / "made.txt").read_text() == "made\n" and (work / "notes.txt").exists()
    assert not (work / "outside-the-sandbox.txt").exists()
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        results = [e.record for e in reader.context().events if e.kind == "tool_result"]
    by = [r.metadata["permission"]["by"] for r in results if isinstance(r, ToolResultRecord)]
    assert by == [MODE_LABEL, MODE_LABEL, "user"]

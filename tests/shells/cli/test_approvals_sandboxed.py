"""The approval mode for a verified sandbox (issue 25): with ``[sandbox] approvals =
"sandboxed"`` and a passing ``infai doctor``, confined work runs without asking,
and anything that needs more still asks. Judged by effect: a headless ``infai
run`` (where "ask" means "deny") either ran the command or did not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from infai.agent import Harness
from infai.shells.cli import main
from infai.store import ToolResultRecord
from infai.store.file import Store
from infai.tools import Rule, ToolContext
from infai.tools.sandbox_verified import MODE_LABEL

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    home, work, config = tmp_path / "home", tmp_path / "work", tmp_path / "user.toml"
    work.mkdir()
    config.write_text('[sandbox]\napprovals = "sandboxed"\n')
    monkeypatch.setenv("INFAI_CONFIG", str(config))
    monkeypatch.chdir(work)
    return home, work, config


def infai(home: Path, *args: str, code: int | None = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    if code is not None:
        assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def script(tmp_path: Path, command: str) -> str:
    """A model that runs ``command`` with the bash tool, then says done."""
    path = tmp_path / f"script-{abs(hash(command))}.json"
    call = {"id": "c1", "name": "bash", "arguments": {"command": command}}
    path.write_text(json.dumps([{"content": "", "tool_calls": [call]}, "done"]))
    return f"scripted:{path}"


def decisions(home: Path) -> list[dict[str, Any]]:
    """Every tool result's recorded permission decision, oldest session first."""
    store, found = Store(home), []
    for info in sorted(store.list_sessions(), key=lambda i: i.id):
        with store.open_reader(info.id) as reader:
            for event in reader.context().events:
                record = event.record
                if isinstance(record, ToolResultRecord) and "permission" in record.metadata:
                    found.append(record.metadata["permission"])
    return found


def test_confined_commands_run_unasked_only_after_the_doctor_passed(
    setup: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    home, work, _ = setup
    model = script(tmp_path, "echo made > made.txt")
    before = infai(home, "run", "--model", model, "make it")
    assert not (work / "made.txt").exists()  # asked, and nobody can approve headless
    assert "infai doctor" in before.stderr  # the notice says what to do

    doctor = infai(home, "doctor")
    assert 'approvals = "sandboxed" applies' in doctor.output
    assert (home / "doctor-passed.json").stat().st_mode & 0o777 == 0o600

    infai(home, "run", "--model", model, "make it")
    assert (work / "made.txt").read_text() == "made\n"
    assert decisions(home)[-1]["by"] == MODE_LABEL  # the session records who decided


def test_what_needs_more_still_asks(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """An escalation asks (headless: denied), and a confined command that tries to
    write outside runs but cannot: the sandbox is the boundary the mode trusts."""
    home, work, _ = setup
    infai(home, "doctor")
    outside = tmp_path / "outside.txt"
    infai(home, "run", "--model", script(tmp_path, f"echo x > {outside}"), "go")
    assert not outside.exists()
    assert decisions(home)[-1]["by"] == MODE_LABEL
    path = tmp_path / "esc.json"
    arguments = {"command": "touch esc.txt", "outside_sandbox": True}
    call = {"id": "c1", "name": "bash", "arguments": arguments}
    path.write_text(json.dumps([{"content": "", "tool_calls": [call]}, "done"]))
    infai(home, "run", "--model", f"scripted:{path}", "escalate")
    assert not (work / "esc.txt").exists()
    assert decisions(home)[-1]["verdict"] == "deny"


def test_changed_sandbox_settings_need_the_doctor_again(
    setup: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    home, work, config = setup
    infai(home, "doctor")
    config.write_text('[sandbox]\napprovals = "sandboxed"\nhidden = ["~/.secret-stuff"]\n')
    out = infai(home, "run", "--model", script(tmp_path, "touch t.txt"), "go")
    assert not (work / "t.txt").exists()
    assert "has not passed with this sandbox" in out.stderr


def test_a_project_cannot_turn_the_mode_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (work / ".infai").mkdir(parents=True)
    (work / ".infai" / "config.toml").write_text('[sandbox]\napprovals = "sandboxed"\n')
    (tmp_path / "user.toml").write_text("")
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "user.toml"))
    monkeypatch.chdir(work)
    infai(home, "doctor")
    out = infai(home, "run", "--model", script(tmp_path, "touch p.txt"), "go")
    assert not (work / "p.txt").exists()
    assert "approvals ignored" in out.stderr


@pytest.mark.parametrize("network", [False, True])
def test_the_rulings_of_the_mode(
    setup: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch, network: bool
) -> None:
    home, work, config = setup
    config.write_text(f'[sandbox]\napprovals = "sandboxed"\nnetwork = {str(network).lower()}\n')
    infai(home, "doctor")
    harness = Harness(Store(home), work, model_name="offline")
    policy = harness.policy()
    policy.rules.append(Rule("ask", "bash", "git push*"))
    policy.rules.append(Rule("deny", "write_file", "secret.txt"))
    ctx = ToolContext(work.resolve(), "s")

    def by(tool: str, **arguments: Any) -> str:
        ruling = policy.rule_on(tool, arguments, ctx)
        return ruling.verdict if ruling.by != MODE_LABEL else "mode"

    commands = "ask" if network else "mode"  # with network, no command is unasked
    assert by("bash", command="make build && rm -rf dist") == commands
    assert by("bash", command="git push origin main") == "ask"  # the user's ask rule
    assert by("bash", command="ls", outside_sandbox=True) == "ask"  # an escalation
    assert by("write_file", path="src/a.py", content="") == "mode"
    assert by("edit_file", path="a.py", old_text="a", new_text="b") == "mode"
    assert by("write_file", path="secret.txt", content="") == "deny"
    assert by("write_file", path=".git/config", content="") == "ask"
    assert by("write_file", path=str(work.parent / "x"), content="") == "ask"
    assert by("read_file", path="/usr/lib/os-release") in ("mode", "allow")
    assert by("read_file", path="/etc/shadow") == "ask"
    assert by("read_file", path="/proc/self/environ") == "ask"
    assert by("read_file", path=str(Path.home() / ".bashrc")) == "ask"
    assert by("mcp__notes__write_note") == "ask"
    # a subagent's delegated policy keeps the mode
    child = policy.delegate("task")
    assert child.rule_on("write_file", {"path": "b.py", "content": ""}, ctx).by == MODE_LABEL

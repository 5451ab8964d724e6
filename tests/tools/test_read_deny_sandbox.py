"""A read deny holds for shell commands too: the files it names are hidden in the sandbox.

Finding (issue 28, medium, last clause): ``deny read_file .env`` kept the file
tools away from ``.env`` while ``cat .env`` under an allowed ``bash`` printed it.
Judged by effect: the secret never reaches a command's output, through the real
tool under the real bubblewrap and through ``infai run``, with a control.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from infai.shells.cli import main
from infai.tools import Policy, Rule, Sandbox, SandboxSettings, ToolContext, ToolOutput, read_denied
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)
SECRET = "API_KEY=sk-live-777"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "pkg" / "deep").mkdir(parents=True)
    (work / ".env").write_text(SECRET + "\n")
    (work / "pkg" / "deep" / ".env").write_text(SECRET + "-deep\n")
    (work / "pkg" / "keys").mkdir()
    (work / "pkg" / "keys" / "id").write_text(SECRET + "-dir\n")
    (work / "notes.txt").write_text("plain\n")
    return work


def bash(work: Path, command: str, policy: Policy) -> ToolOutput:
    context = ToolContext(work, "s", denied_reads=policy.denied_read_patterns())
    tool = Bash(sandbox=Sandbox(SandboxSettings(mode="required")))
    return asyncio.run(tool.run({"command": command}, context))


def test_files_a_read_rule_denies_read_as_nothing_for_commands(work: Path) -> None:
    policy = Policy(
        [
            Rule.parse("deny", "read_file .env"),
            Rule.parse("deny", "grep */deep/.env"),
            Rule.parse("deny", "read_file pkg/keys"),
        ]
    )
    out = bash(work, "cat .env pkg/deep/.env pkg/keys/id notes.txt; ls pkg/keys; true", policy)
    assert SECRET not in out.content, out.content
    assert "plain" in out.content  # the rest of the work is as it was
    assert (work / ".env").read_text() == SECRET + "\n"  # hidden, not changed
    # control: without the rules the same command prints all three
    out = bash(work, "cat .env pkg/deep/.env pkg/keys/id", Policy([]))
    assert out.content.count(SECRET) == 3


def test_a_rule_denying_every_read_hides_nothing(work: Path) -> None:
    assert Policy([Rule.parse("deny", "read_file *")]).denied_read_patterns() == ()
    assert Policy([Rule.parse("deny", "bash cat*")]).denied_read_patterns() == ()


def test_a_walk_stopped_by_its_budget_says_so(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_denied, "MAX_WALKED", 1)
    found = read_denied.denied_files(work, ["**/.env"])
    assert found.stopped and "not hidden from this command" in found.note()
    assert read_denied.denied_files(work, [".env"]).paths == [str(work / ".env")]


def test_infai_run_hides_them_from_the_agents_commands(
    work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[permissions]\ndeny = ["read_file .env"]\n[sandbox]\nmode = "required"\n')
    monkeypatch.setenv("INFAI_CONFIG", str(config))
    monkeypatch.chdir(work)
    replies = tmp_path / "replies.json"
    call = {"id": "c1", "name": "bash", "arguments": {"command": "cat .env; true"}}
    replies.write_text(json.dumps([{"content": "", "tool_calls": [call]}, "done"]))
    home = tmp_path / "home"
    args = ["--home", str(home), "run", "--json", "--allow", "bash *"]
    result = CliRunner().invoke(main, [*args, "--model", f"scripted:{replies}", "go"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert SECRET not in result.stdout
    assert '"kind": "tool_result"' in result.stdout or "tool_result" in result.stdout

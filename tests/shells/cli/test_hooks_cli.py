"""Hooks through the whole CLI: configured in the user's file, fired by `infai run`,
listed by `infai session log`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main


def infai(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def test_run_fires_a_guard_and_session_log_shows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "keep.txt").write_text("x")
    guard = tmp_path / "guard.sh"
    guard.write_text("#!/bin/bash\ngrep -q 'rm -rf' && { echo 'not here' >&2; exit 2; }\nexit 0\n")
    guard.chmod(0o755)
    user = tmp_path / "config.toml"
    user.write_text(f'[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "{guard}"\n')
    monkeypatch.setenv("INFAI_CONFIG", str(user))
    call = {"id": "c1", "name": "bash", "arguments": {"command": "rm -rf keep.txt"}}
    replies = work / "script.json"
    replies.write_text(json.dumps([{"content": "", "tool_calls": [call]}, "gave up"]))
    out = infai(tmp_path / "home", "run", "--model", f"scripted:{replies}", "--allow", "bash", "go")
    assert "blocked by a PreToolUse hook: not here" in out.stderr
    assert (work / "keep.txt").exists()
    sid = out.stderr.strip().splitlines()[-1].removeprefix("session ")
    log = infai(tmp_path / "home", "session", "log", sid).stdout
    line = next(line for line in log.splitlines() if "hook/system" in line)
    assert "hook PreToolUse(bash) exit 2 block (" in line

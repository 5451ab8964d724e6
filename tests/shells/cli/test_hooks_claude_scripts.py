"""Claude Code users' hook scripts, unchanged (bash and jq, as they are written for
Claude Code), through `infai run`: each has the effect Claude Code's hooks
reference gives it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main


def infai(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def hook(path: Path, body: str) -> Path:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)
    return path


class Project:
    """A working directory, the user's config naming hooks, a scripted model."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp_path
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.home = tmp_path / "home"
        self.config = tmp_path / "config.toml"
        monkeypatch.chdir(self.work)
        monkeypatch.setenv("INFAI_CONFIG", str(self.config))

    def hooks(self, toml: str) -> None:
        self.config.write_text(toml)

    def run(self, replies: list[Any], *args: str, code: int = 0) -> Result:
        script = self.tmp / "replies.json"
        script.write_text(json.dumps(replies))
        return infai(self.home, "run", "--model", f"scripted:{script}", *args, code=code)

    def messages(self, session: str) -> list[dict[str, Any]]:
        """What the model is sent now, as `infai session context` shows it."""
        out = infai(self.home, "session", "context", "--explain", "--json", session).stdout
        found: list[dict[str, Any]] = json.loads(out)["messages"]
        return found


def session_of(result: Result) -> str:
    return result.stderr.strip().splitlines()[-1].removeprefix("session ")


def test_a_startup_session_start_hook_fires_for_a_new_session_and_a_resume_one_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path, monkeypatch)
    said = tmp_path / "sources.log"
    startup = hook(tmp_path / "startup.sh", f'jq -r .source >> {said}\necho "use tabs here"\n')
    resume = hook(tmp_path / "resume.sh", f'jq -r .source >> {said}\necho "welcome back"\n')
    p.hooks(
        f'[[hooks.SessionStart]]\nmatcher = "startup"\ncommand = "{startup}"\n'
        f'[[hooks.SessionStart]]\nmatcher = "resume"\ncommand = "{resume}"\n'
    )
    sid = session_of(p.run(["first"], "hi"))
    assert said.read_text() == "startup\n"
    sent = json.dumps(p.messages(sid))
    assert "use tabs here" in sent and "welcome back" not in sent
    p.run(["second"], "--session", sid, "again")
    assert said.read_text() == "startup\nresume\n"
    assert "welcome back" in json.dumps(p.messages(sid))


def test_a_system_message_is_shown_to_the_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path, monkeypatch)
    done = hook(
        tmp_path / "done.sh",
        "jq -n '{systemMessage: \"All checks passed, session complete\"}'\n",
    )
    warn = hook(
        tmp_path / "warn.sh",
        'jq -n --arg f "$(jq -r .tool_input.file_path)" '
        '\'{systemMessage: ("heads up: " + $f + " is generated")}\'\n',
    )
    p.hooks(
        f'[[hooks.Stop]]\ncommand = "{done}"\n'
        f'[[hooks.PostToolUse]]\nmatcher = "Write"\ncommand = "{warn}"\n'
    )
    write = {"id": "c1", "name": "write_file", "arguments": {"path": "gen.py", "content": "x"}}
    out = p.run([{"content": "", "tool_calls": [write]}, "written"], "--allow", "write_file", "go")
    assert "All checks passed, session complete" in out.stderr
    assert f"heads up: {p.work / 'gen.py'} is generated" in out.stderr
    sid = session_of(out)
    assert "heads up" not in json.dumps(p.messages(sid))  # for the user, not the model


def test_a_post_tool_use_hook_reads_the_commands_own_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path, monkeypatch)
    seen = tmp_path / "stdout.txt"
    logger = hook(tmp_path / "log.sh", f"jq -j .tool_response.stdout > {seen}\n")
    p.hooks(f'[[hooks.PostToolUse]]\nmatcher = "Bash"\ncommand = "{logger}"\n')
    call = {"id": "c1", "name": "bash", "arguments": {"command": "echo hello; echo world"}}
    p.run([{"content": "", "tool_calls": [call]}, "ok"], "--allow", "bash", "go")
    assert seen.read_text() == "hello\nworld\n"

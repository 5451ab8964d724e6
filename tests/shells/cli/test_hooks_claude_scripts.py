"""Claude Code users' hook scripts, unchanged (bash and jq, as they are written for
Claude Code), through `infai run`: each has the effect Claude Code's hooks
reference gives it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from infai.agent.hooks_payload import tool_arguments, tool_input
from infai.shells.cli import main
from infai.store import Store, ToolCallRecord, ToolResultRecord
from mcp_servers import SCRIPT


@pytest.fixture(autouse=True)
def _jq() -> None:
    assert shutil.which("jq"), "these hook scripts read their payload with jq: install it (apt)"


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


def test_updated_input_rewrites_the_call_and_the_policy_judges_what_will_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path, monkeypatch)
    (p.work / "notes.txt").write_text("hello\nworld\n")
    (p.work / "keep.txt").write_text("precious")
    # grep with line numbers always; a harmless call turned into one a rule denies
    rewrite = hook(
        tmp_path / "rewrite.sh",
        'jq \'{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "allow",\n'
        '  updatedInput: (.tool_input | .command |= (sub("^grep "; "grep -n ")\n'
        '                                          | sub("^true$"; "rm keep.txt")))}}\'\n',
    )
    seen = tmp_path / "post.txt"
    logger = hook(tmp_path / "post.sh", f"jq -r .tool_input.command >> {seen}\n")
    edit_to = hook(
        tmp_path / "edit.sh",
        'jq \'{hookSpecificOutput: {hookEventName: "PreToolUse",\n'
        "  updatedInput: (.tool_input | .new_string |= ascii_upcase)}}'\n",
    )
    p.hooks(
        '[permissions]\ndeny = ["bash rm *"]\n'
        f'[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "{rewrite}"\n'
        f'[[hooks.PreToolUse]]\nmatcher = "Edit"\ncommand = "{edit_to}"\n'
        f'[[hooks.PostToolUse]]\nmatcher = "Bash"\ncommand = "{logger}"\n'
    )
    calls = [
        {"id": "c1", "name": "bash", "arguments": {"command": "grep world notes.txt"}},
        {"id": "c2", "name": "bash", "arguments": {"command": "true"}},
        {
            "id": "c3",
            "name": "edit_file",
            "arguments": {"path": "notes.txt", "old_text": "hello", "new_text": "bye"},
        },
    ]
    replies: list[Any] = [{"content": "", "tool_calls": [call]} for call in calls]
    out = p.run([*replies, "ok"], "--allow", "bash", "--allow", "edit_file", "go")
    assert (p.work / "keep.txt").exists()  # the deny rule judged what would run
    assert (p.work / "notes.txt").read_text() == "BYE\nworld\n"
    assert seen.read_text() == "grep -n world notes.txt\n"  # PostToolUse sees what ran
    results = [m for m in p.messages(session_of(out)) if m["role"] == "tool"]
    assert results[0]["content"].startswith("exit code 0\n2:world")
    assert "deny bash rm *" in results[1]["content"] and results[1]["is_error"]
    with Store(p.home) as store:  # what ran is kept with the result; the call is the model's
        view = store.open_reader(session_of(out))
        stored = [view.event(e.id, resolve=True).record for e in view.entries()]
    ran = [r.metadata.get("hook_input") for r in stored if isinstance(r, ToolResultRecord)]
    assert ran[:2] == [{"command": "grep -n world notes.txt"}, {"command": "rm keep.txt"}]
    asked = [r.arguments for r in stored if isinstance(r, ToolCallRecord)]
    assert asked[0] == {"command": "grep world notes.txt"}


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("bash", {"command": "ls", "timeout_seconds": 30}),
        ("read_file", {"path": "/w/a.py", "start_line": 3, "end_line": 9}),
        ("write_file", {"path": "/w/a.py", "content": "x"}),
        ("edit_file", {"path": "/w/a.py", "old_text": "a", "new_text": "b"}),
        ("grep", {"pattern": "def", "path": "/w", "glob": "*.py"}),
        ("list_files", {"pattern": "*.md", "path": "/w"}),
        ("task", {"prompt": "look", "description": "d"}),
        ("mcp__docs__search", {"query": "q"}),
    ],
)
def test_updated_input_in_claude_codes_fields_is_infais_arguments_again(
    tool: str, arguments: dict[str, Any]
) -> None:
    shown = tool_input(tool, arguments, Path("/w"))
    assert tool_arguments(tool, shown) == arguments


def test_exit_2_of_a_session_start_hook_is_shown_to_the_user_and_blocks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path, monkeypatch)
    check = hook(
        tmp_path / "check.sh",
        'if [ ! -f "$CLAUDE_PROJECT_DIR/.envrc" ]; then\n'
        '  echo "no .envrc: run direnv allow first" >&2; exit 2\nfi\n',
    )
    p.hooks(f'[[hooks.SessionStart]]\ncommand = "{check}"\n')
    out = p.run(["answered"], "hi")
    assert "no .envrc: run direnv allow first" in out.stderr
    assert out.stdout.strip() == "answered"


def test_a_stop_hook_reads_the_last_reply_and_lets_the_turn_end_on_the_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path, monkeypatch)
    seen = tmp_path / "stops.log"
    until = hook(
        tmp_path / "until-tests.sh",
        "input=$(cat)\n"
        f'echo "$input" | jq -c "[.stop_hook_active, .last_assistant_message]" >> {seen}\n'
        'if [ "$(echo "$input" | jq -r .stop_hook_active)" = "true" ]; then exit 0; fi\n'
        'echo "Run the test suite before you finish." >&2\nexit 2\n',
    )
    p.hooks(f'[[hooks.Stop]]\ncommand = "{until}"\n')
    out = p.run(["All done, no tests needed.", "Tests pass now."], "fix it")
    assert out.stdout.strip().endswith("Tests pass now.")
    assert seen.read_text().splitlines() == [
        '[false,"All done, no tests needed."]',
        '[true,"Tests pass now."]',
    ]
    sent = p.messages(session_of(out))
    assert "Run the test suite before you finish." in sent[2]["content"]


def test_claude_codes_nested_settings_shape_configures_the_same_hooks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path, monkeypatch)
    (p.work / "keep.txt").write_text("precious")
    guard = hook(
        tmp_path / "block-rm.sh",
        "if jq -r .tool_input.command | grep -Eq 'rm -(rf|fr)'; then\n"
        '  echo "BLOCKED: use trash instead" >&2; exit 2\nfi\n',
    )
    # settings.json's {"matcher": ..., "hooks": [{"type": "command", ...}]}, written in TOML
    p.hooks(
        '[[hooks.PreToolUse]]\nmatcher = "Bash"\n'
        f'hooks = [{{ type = "command", command = "{guard}", timeout = 30 }}]\n'
    )
    call = {"id": "c1", "name": "bash", "arguments": {"command": "rm -rf keep.txt"}}
    out = p.run([{"content": "", "tool_calls": [call]}, "ok"], "--allow", "bash", "go")
    assert "BLOCKED: use trash instead" in out.stderr
    assert (p.work / "keep.txt").exists()
    p.hooks('[[hooks.Stop]]\nhooks = [{ type = "prompt", prompt = "done?" }]\n')
    bad = p.run(["ok"], "go", code=2)
    assert f"{p.config}: hooks.Stop[0].hooks[0].type: only command hooks" in bad.stderr


def test_a_guard_on_the_project_prefix_sees_normalised_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path, monkeypatch)
    inside = hook(
        tmp_path / "inside.sh",
        'file=$(jq -r .tool_input.file_path)\ncase "$file" in\n'
        '  "$CLAUDE_PROJECT_DIR"/*) exit 0;;\n'
        '  *) echo "outside the project: $file" >&2; exit 2;;\nesac\n',
    )
    p.hooks(f'[[hooks.PreToolUse]]\nmatcher = "Write|Edit"\ncommand = "{inside}"\n')
    write = {"id": "c1", "name": "write_file", "arguments": {"path": "../x.txt", "content": "x"}}
    out = p.run([{"content": "", "tool_calls": [write]}, "ok"], "--allow", "write_file", "go")
    result = next(m for m in p.messages(session_of(out)) if m["role"] == "tool")
    assert (
        result["content"] == f"blocked by a PreToolUse hook: outside the project: {tmp_path}/x.txt"
    )


def test_a_compact_session_start_hook_puts_its_context_back_after_a_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path, monkeypatch)
    reinject = hook(
        tmp_path / "reinject.sh",
        'if [ "$(jq -r .source)" = "compact" ]; then\n'
        '  echo "Reminder after compaction: deploys go through make release"\nfi\n',
    )
    p.hooks(
        "compact_at = 0.5\n"  # of the scripted model's window: the second prompt compacts
        f'[[hooks.SessionStart]]\nmatcher = "compact"\ncommand = "{reinject}"\n'
    )
    long = "word " * 70_000  # over half of the scripted model's 128k-token window
    sid = session_of(p.run([long], "hi"))
    summary = {
        "summary": "a long answer",
        **{k: [] for k in ("goals", "constraints", "decisions", "files_changed")},
        **{k: [] for k in ("unresolved", "facts")},
    }
    p.run([json.dumps(summary), "ok"], "--session", sid, "again")
    sent = p.messages(sid)
    said = [m["content"] for m in sent]
    assert "a long answer" in said[0]  # from the summary on
    assert any("Reminder after compaction: deploys go through make release" in m for m in said)


def test_a_session_end_matcher_picks_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path, monkeypatch)
    ended = tmp_path / "ended.log"
    p.hooks(
        f'[[hooks.SessionEnd]]\nmatcher = "clear"\ncommand = "echo on-clear >> {ended}"\n'
        f'[[hooks.SessionEnd]]\nmatcher = "logout|other"\ncommand = "echo on-other >> {ended}"\n'
        f'[[hooks.SessionEnd]]\ncommand = "jq -r .reason >> {ended}"\n'
    )
    p.run(["ok"], "hi")
    assert sorted(ended.read_text().splitlines()) == ["on-other", "other"]


def test_an_mcp_guard_matches_mcp_tools_by_regex_and_reads_their_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path, monkeypatch)
    log = p.work / "server.log"  # where the sandboxed server may write
    seen = tmp_path / "seen.log"
    guard = hook(
        tmp_path / "mcp-guard.sh",
        f"input=$(cat)\necho \"$input\" | jq -c '[.tool_name, .tool_input]' >> {seen}\n"
        'jq -n --arg t "$(echo "$input" | jq -r .tool_name)" \'{hookSpecificOutput: {\n'
        '  hookEventName: "PreToolUse", permissionDecision: "deny",\n'
        '  permissionDecisionReason: ("no writes through " + $t)}}\'\n',
    )
    server = json.dumps([str(SCRIPT), "stdio", str(log)])
    p.hooks(
        f'[mcp.servers.t]\ncommand = "{sys.executable}"\nargs = {server}\n'
        f'[[hooks.PreToolUse]]\nmatcher = "mcp__.*__write"\ncommand = "{guard}"\n'
    )
    calls = [
        {"id": "c1", "name": "mcp__t__write", "arguments": {"path": str(tmp_path / "w.txt")}},
        {"id": "c2", "name": "mcp__t__echo", "arguments": {"text": "hi"}},
    ]
    replies: list[Any] = [{"content": "", "tool_calls": [call]} for call in calls]
    out = p.run([*replies, "ok"], "--allow", "mcp__t__*", "go")
    assert (
        seen.read_text()
        == json.dumps(["mcp__t__write", {"path": str(tmp_path / "w.txt")}], separators=(",", ":"))
        + "\n"
    )
    assert not (tmp_path / "w.txt").exists()
    assert "call write" not in log.read_text() and "call echo" in log.read_text()
    results = [m["content"] for m in p.messages(session_of(out)) if m["role"] == "tool"]
    assert results[0] == "blocked by a PreToolUse hook: no writes through mcp__t__write"

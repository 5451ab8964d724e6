"""Hooks as Claude Code runs them: real bash scripts reading the JSON payload on stdin."""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession, Harness, PromptBlocked
from infai.agent.config import ConfigError, load_config
from infai.agent.hooks import HookSpec
from infai.agent.hooks_payload import tool_names
from infai.agent.subagent import TaskTool
from infai.llm import FunctionModel, Message, Request, ToolCall
from infai.store import HookRecord, MessageRecord, Store, ToolResultRecord
from infai.tools import Policy, Rule, Toolbox, builtin_tools
from infai.tools.policy import Ask, Reply

MODEL = "function"


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)
    return str(path)


def field(path: str) -> str:
    """Shell text printing one field of the payload on stdin (as ``jq -r`` would)."""
    return f'python3 -c "import json,sys; print(json.load(sys.stdin){path})"'


def config(tmp_path: Path, hooks: str, project: Path) -> Any:
    user = tmp_path / "user.toml"
    user.write_text(f'trusted_projects = ["{project}"]\n' + hooks)
    return load_config(project, user)


class Script:
    """A model that makes the given tool calls, one per request, then answers; it
    keeps every request it was sent."""

    def __init__(self, *calls: tuple[str, dict[str, Any]], answers: int = 1) -> None:
        self.calls = list(calls)
        self.requests: list[Request] = []

    def __call__(self, request: Request) -> Message:
        self.requests.append(request)
        if self.calls:
            name, args = self.calls.pop(0)
            call = ToolCall(f"c{len(self.requests)}", name, args)
            return Message(role="assistant", tool_calls=(call,))
        return Message(role="assistant", content=f"done {len(self.requests)}")

    def sent(self) -> str:
        return json.dumps([[m.content for m in r.messages] for r in self.requests])


def open_session(
    tmp_path: Path, project: Path, hooks: str, model: Script, rules: list[Rule] | None = None
) -> AgentSession:
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(project)).id
    cfg = config(tmp_path, hooks, project)
    allowed = [Rule.parse("allow", "bash"), Rule.parse("allow", "write_file")]
    policy = Policy(allowed if rules is None else rules)
    return AgentSession(
        store,
        sid,
        model=FunctionModel(model, name=MODEL),
        toolbox=Toolbox(builtin_tools()),
        permissions=policy,
        hooks=cfg.hooks,
    )


async def run(session: AgentSession, prompt: str) -> list[Any]:
    return [event async for event in session.prompt(prompt)]


def records(session: AgentSession) -> list[Any]:
    view = session.view
    return [view.event(e.id, resolve=True).record for e in view.entries()]


def hook_records(session: AgentSession) -> list[HookRecord]:
    return [r for r in records(session) if isinstance(r, HookRecord)]


def sync(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper


@pytest.fixture
def project(tmp_path: Path) -> Path:
    here = tmp_path / "project"
    here.mkdir()
    return here


@sync
async def test_guard_blocks_rm_rf_and_the_model_reads_why(tmp_path: Path, project: Path) -> None:
    (project / "keep.txt").write_text("precious")
    guard = script(
        tmp_path / "guard.sh",
        "cmd=$(" + field("['tool_input']['command']") + ")\n"
        'if [[ "$cmd" == *"rm -rf"* ]]; then echo "no rm -rf here, use trash" >&2; exit 2; fi\n'
        "exit 0\n",
    )
    model = Script(("bash", {"command": "rm -rf keep.txt"}))
    hooks = f'[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "{guard}"\n'
    async with open_session(tmp_path, project, hooks, model) as session:
        await run(session, "clean up")
        ran = hook_records(session)
        results = [r for r in records(session) if isinstance(r, ToolResultRecord)]
        assert session.store.info(session.session_id).format == 4  # it holds hook events
    assert (project / "keep.txt").read_text() == "precious"  # the command never ran
    assert "no rm -rf here, use trash" in model.sent()  # the model was told why
    assert isinstance(results[0], ToolResultRecord) and results[0].is_error
    assert results[0].metadata["permission"]["by"] == "hook"
    assert [(r.event, r.exit_code, r.decision, r.tool) for r in ran] == [
        ("PreToolUse", 2, "block", "bash")
    ]


@sync
async def test_logger_sees_claude_code_names_and_formatter_rewrites(
    tmp_path: Path, project: Path
) -> None:
    log = tmp_path / "calls.log"
    logger = script(tmp_path / "log.sh", f"cat >> {log}; echo >> {log}\n")
    formatter = script(
        tmp_path / "fmt.sh",
        "f=$(" + field("['tool_input']['file_path']") + ")\n"
        'tr a-z A-Z < "$f" > "$f.tmp" && mv "$f.tmp" "$f"\n',
    )
    hooks = (
        f'[[hooks.PreToolUse]]\ncommand = "{logger}"\n'
        f'[[hooks.PostToolUse]]\nmatcher = "Write|Edit"\ncommand = "{formatter}"\n'
    )
    model = Script(("write_file", {"path": "a.txt", "content": "hello"}))
    async with open_session(tmp_path, project, hooks, model) as session:
        await run(session, "write it")
    payload = json.loads(log.read_text().splitlines()[0])
    assert payload["hook_event_name"] == "PreToolUse" and payload["tool_name"] == "Write"
    assert payload["tool_input"] == {"file_path": str(project / "a.txt"), "content": "hello"}
    assert payload["cwd"] == str(project) and payload["tool_use_id"] == "c1"
    assert (project / "a.txt").read_text() == "HELLO"  # PostToolUse formatted it


@sync
async def test_prompt_context_reaches_the_model_and_a_block_stops_the_prompt(
    tmp_path: Path, project: Path
) -> None:
    inject = script(
        tmp_path / "ctx.sh",
        "p=$(" + field("['prompt']") + ")\n"
        'if [[ "$p" == *secret* ]]; then echo "no secrets in prompts" >&2; exit 2; fi\n'
        'echo "branch is feature-x; dir=$CLAUDE_PROJECT_DIR"\n',
    )
    model = Script()
    hooks = f'[[hooks.UserPromptSubmit]]\ncommand = "{inject}"\n'
    async with open_session(tmp_path, project, hooks, model) as session:
        await run(session, "hello")
        ended = (await run(session, "my secret is 42"))[-1]
        started = await session.start("another secret")
        with pytest.raises(PromptBlocked, match="no secrets in prompts"):
            await started.asked()  # the server answers 409, naming the hook's reason
        await started.wait()
        prompts = [
            r.content for r in records(session) if isinstance(r, MessageRecord) and r.model is None
        ]
    assert f"branch is feature-x; dir={project}" in model.sent()
    assert len(model.requests) == 1  # the blocked prompt was never sent
    assert ended.outcome == "error" and "no secrets in prompts" in ended.error
    assert prompts == ["hello"]  # nor stored


@sync
async def test_stop_hook_sends_the_turn_back_once(tmp_path: Path, project: Path) -> None:
    stop = script(
        tmp_path / "stop.sh",
        "active=$(" + field("['stop_hook_active']") + ")\n"
        'if [ "$active" = "False" ]; then echo "run the tests first" >&2; exit 2; fi\n',
    )
    model = Script()
    hooks = f'[[hooks.Stop]]\ncommand = "{stop}"\n'
    async with open_session(tmp_path, project, hooks, model) as session:
        events = await run(session, "fix it")
        ran = hook_records(session)
    assert len(model.requests) == 2 and "run the tests first" in model.sent()
    assert events[-1].outcome == "done"
    assert [(r.event, r.exit_code) for r in ran] == [("Stop", 2), ("Stop", 0)]


def decide(verdict: str, path: Path) -> str:
    out = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": verdict,
            "permissionDecisionReason": f"hook says {verdict}",
        }
    }
    return script(path, f"cat > /dev/null; echo '{json.dumps(out)}'\n")


@sync
async def test_json_allow_answers_the_default_question_never_a_deny_rule(
    tmp_path: Path, project: Path
) -> None:
    allow = decide("allow", tmp_path / "allow.sh")
    hooks = f'[[hooks.PreToolUse]]\ncommand = "{allow}"\n'
    model = Script(
        ("write_file", {"path": "ok.txt", "content": "x"}),
        ("bash", {"command": "touch denied.txt"}),
        ("write_file", {"path": "secret.txt", "content": "x"}),
        ("bash", {"command": "touch out.txt", "outside_sandbox": True}),
    )
    rules = [Rule.parse("deny", "bash touch*"), Rule.parse("ask", "write_file secret*")]
    async with open_session(tmp_path, project, hooks, model, rules) as session:
        await run(session, "go")  # no approver: what still asks is denied
    assert (project / "ok.txt").exists()  # the hook's allow answered the default's ask
    assert not (project / "denied.txt").exists()  # the deny rule still binds
    assert not (project / "secret.txt").exists()  # so does an ask rule
    assert not (project / "out.txt").exists()  # and the sandbox: an escalation still asks
    assert "permission denied by rule" in model.sent()


@sync
async def test_json_deny_wins_over_an_allow_rule(tmp_path: Path, project: Path) -> None:
    deny = decide("deny", tmp_path / "deny.sh")
    hooks = f'[[hooks.PreToolUse]]\nmatcher = "Write"\ncommand = "{deny}"\n'
    model = Script(("write_file", {"path": "no.txt", "content": "x"}))
    async with open_session(tmp_path, project, hooks, model) as session:
        await run(session, "go")
    assert not (project / "no.txt").exists() and "hook says deny" in model.sent()


@sync
async def test_timeout_is_killed_and_does_not_block(tmp_path: Path, project: Path) -> None:
    slow = script(tmp_path / "slow.sh", "sleep 30\n")
    hooks = f'[[hooks.PreToolUse]]\ncommand = "{slow}"\ntimeout = 0.5\n'
    model = Script(("write_file", {"path": "a.txt", "content": "x"}))
    async with open_session(tmp_path, project, hooks, model) as session:
        events = await run(session, "go")
        ran = hook_records(session)
    assert (project / "a.txt").exists()
    assert ran[0].timed_out and ran[0].exit_code is None
    assert any("timed out" in str(getattr(e, "event", "")) for e in events)


def test_untrusted_project_hooks_are_left_out(tmp_path: Path, project: Path) -> None:
    (project / ".infai").mkdir()
    (project / ".infai" / "config.toml").write_text('[[hooks.PreToolUse]]\ncommand = "curl evil"\n')
    user = tmp_path / "user.toml"
    user.write_text("")
    cfg = load_config(project, user)
    assert cfg.hooks == () and any("hooks (PreToolUse) were left out" in w for w in cfg.warnings)
    user.write_text(f'trusted_projects = ["{project}"]\n')
    assert [h.command for h in load_config(project, user).hooks] == ["curl evil"]


@sync
async def test_stop_hook_reads_a_claude_code_transcript(tmp_path: Path, project: Path) -> None:
    seen = tmp_path / "seen.jsonl"
    stop = script(
        tmp_path / "stop.sh",
        'in=$(cat); t=$(printf "%s" "$in" | ' + field("['transcript_path']") + ")\n"
        f'cp "$t" {seen}\n',
    )
    model = Script(("write_file", {"path": "a.txt", "content": "x"}))
    hooks = f'[[hooks.Stop]]\ncommand = "{stop}"\n'
    async with open_session(tmp_path, project, hooks, model) as session:
        await run(session, "write a")
    lines = [json.loads(line) for line in seen.read_text().splitlines()]
    assert lines[0]["type"] == "user" and lines[0]["message"]["content"] == "write a"
    use = next(b for line in lines for b in line["message"]["content"] if "tool_use" in str(b))
    assert use["name"] == "Write" and use["input"]["file_path"] == str(project / "a.txt")
    assert lines[-1]["type"] == "assistant"
    assert lines[-1]["message"]["content"] == [{"type": "text", "text": "done 2"}]


@sync
async def test_notification_session_end_and_manual_pre_compact(
    tmp_path: Path, project: Path
) -> None:
    log = tmp_path / "events.log"
    logger = script(tmp_path / "log.sh", f"cat >> {log}; echo >> {log}\n")
    hooks = "".join(
        f'[[hooks.{event}]]\ncommand = "{logger}"\n'
        for event in ("Notification", "SessionEnd", "PreCompact")
    )
    asked: list[str] = []

    async def approver(ask: Ask) -> Reply:
        asked.append(ask.tool)
        return "allow"

    model = Script(("write_file", {"path": "a.txt", "content": "x"}))
    session = open_session(tmp_path, project, hooks, model, rules=[])
    assert isinstance(session.permissions, Policy)
    session.permissions.approver = approver
    await run(session, "write")
    await session.compact()
    await session.aclose()
    got = [json.loads(line) for line in log.read_text().splitlines()]
    assert [g["hook_event_name"] for g in got] == ["Notification", "PreCompact", "SessionEnd"]
    assert got[0]["notification_type"] == "permission_prompt" and "Write" in got[0]["message"]
    assert got[1]["trigger"] == "manual" and asked == ["write_file"]
    with session.store.open_reader(session.session_id) as reader:
        kept = [reader.event(e.id, resolve=True).record for e in reader.entries()]
    assert [r.event for r in kept if isinstance(r, HookRecord)] == [
        "Notification",
        "PreCompact",
        "SessionEnd",
    ]


@sync
async def test_subagent_tool_calls_fire_hooks_and_it_ends_on_subagent_stop(
    tmp_path: Path, project: Path
) -> None:
    log = tmp_path / "events.log"
    logger = script(tmp_path / "log.sh", f"cat >> {log}; echo >> {log}\n")
    hooks = "".join(
        f'[[hooks.{event}]]\nmatcher = "Agent"\ncommand = "{logger}"\n'
        if event == "PreToolUse"
        else f'[[hooks.{event}]]\ncommand = "{logger}"\n'
        for event in ("PreToolUse", "Stop", "SubagentStop")
    )
    model = Script(("task", {"prompt": "look around", "description": "scout"}))
    session = open_session(tmp_path, project, hooks, model)
    task = TaskTool(session.store, session.model, builtin_tools(), session.permissions)
    session.toolbox.add(task)
    task.hooks = session.hooks
    async with session:
        await run(session, "delegate")
    got = [json.loads(line) for line in log.read_text().splitlines()]
    assert [g["hook_event_name"] for g in got] == ["PreToolUse", "SubagentStop", "Stop"]
    assert got[0]["tool_name"] == "Task" and got[0]["tool_input"]["description"] == "scout"
    assert got[1]["session_id"] != got[2]["session_id"] == session.session_id


@sync
async def test_post_tool_json_block_reaches_the_model_and_exit_1_is_only_shown(
    tmp_path: Path, project: Path
) -> None:
    out = {"decision": "block", "reason": "lint failed: E501"}
    lint = script(tmp_path / "lint.sh", f"cat > /dev/null; echo '{json.dumps(out)}'\n")
    broken = script(tmp_path / "broken.sh", "echo 'jq: not found' >&2; exit 1\n")
    hooks = (
        f'[[hooks.PostToolUse]]\nmatcher = "write_file"\ncommand = "{lint}"\n'
        f'[[hooks.PreToolUse]]\ncommand = "{broken}"\n'
    )
    model = Script(("write_file", {"path": "a.txt", "content": "x"}))
    async with open_session(tmp_path, project, hooks, model) as session:
        events = await run(session, "go")
        ran = hook_records(session)
    assert (project / "a.txt").exists()  # exit 1 does not block
    assert "[PostToolUse hook: lint failed: E501]" in model.sent()
    shown = [str(e.event) for e in events if type(e).__name__ == "Streamed"]
    assert any("failed (exit 1): jq: not found" in text for text in shown)
    assert [(r.event, r.exit_code, r.decision) for r in ran] == [
        ("PreToolUse", 1, "error"),
        ("PostToolUse", 0, "block"),
    ]


def test_matchers_and_bad_config(tmp_path: Path, project: Path) -> None:
    def spec(matcher: str) -> HookSpec:
        return HookSpec("PreToolUse", "true", matcher)

    assert spec("").matches(tool_names("bash")) and spec("*").matches(tool_names("grep"))
    assert spec("Bash").matches(tool_names("bash")) and spec("bash").matches(tool_names("bash"))
    assert not spec("Bas").matches(tool_names("bash"))  # a plain name is exact
    assert spec("Edit|Write").matches(tool_names("write_file"))
    assert spec("Agent").matches(tool_names("task")) and spec("Task").matches(tool_names("task"))
    assert spec("mcp__github__.*").matches(tool_names("mcp__github__list_issues"))
    assert tool_names("list_files")[0] == "Glob"
    user = tmp_path / "bad.toml"
    for text, said in [
        ('[[hooks.PreToolUs]]\ncommand = "x"\n', "hooks.PreToolUs: unknown event"),
        ("[[hooks.Stop]]\ntimeout = 5\n", "hooks.Stop[0].command: the shell command"),
        ('[[hooks.Stop]]\ncommand = "x"\ntimeout = 0\n', "hooks.Stop[0].timeout"),
        (
            '[[hooks.PreToolUse]]\ncommand = "x"\nmatcher = "("\n',
            "hooks.PreToolUse[0].matcher: not a regular expression",
        ),
    ]:
        user.write_text(text)
        with pytest.raises(ConfigError, match=f"{user}: {re.escape(said)}"):
            load_config(project, user)


@sync
async def test_session_start_context_reaches_the_first_request(
    tmp_path: Path, project: Path
) -> None:
    start = script(tmp_path / "start.sh", "cat > /dev/null; echo 'remember: tabs, not spaces'\n")
    hooks = f'[[hooks.SessionStart]]\nmatcher = "startup"\ncommand = "{start}"\n'
    model = Script()
    async with open_session(tmp_path, project, hooks, model) as session:
        await run(session, "hi")
        await run(session, "again")
        ran = hook_records(session)
    assert "remember: tabs, not spaces" in json.dumps(
        [m.content for m in model.requests[0].messages]
    )
    assert [r.event for r in ran] == ["SessionStart"]  # once per session opened


def test_workspace_wires_hooks_into_sessions_and_their_subagents(
    tmp_path: Path, project: Path
) -> None:
    cfg = config(tmp_path, '[[hooks.Stop]]\ncommand = "true"\n', project)
    space = Harness(Store(tmp_path / "home"), project, config=cfg)
    session = space.open()
    try:
        task = session.toolbox.get("task")
        assert session.hooks is not None and [s.event for s in session.hooks.specs] == ["Stop"]
        assert isinstance(task, TaskTool) and task.hooks is session.hooks
        space.use_model(session, "offline")
        task = session.toolbox.get("task")
        assert isinstance(task, TaskTool) and task.hooks is session.hooks  # kept on a switch
    finally:
        session.close()
        asyncio.run(space.aclose())

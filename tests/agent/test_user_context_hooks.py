"""The user's own ``!cmd`` and ``@file`` meet the hooks a model's ``Bash`` and
``Read`` calls meet: real bash hook scripts read Claude Code's payload on stdin,
a PreToolUse exit 2 stops the call with its stderr as the output, and every run
is recorded in the session (and published on its hub) like any hook's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession, Saved, file_note, run_as_user, shell_note
from infai.agent.config import load_config
from infai.llm import ScriptedModel
from infai.store import HookRecord, MessageRecord, Store
from infai.tools import Policy, Rule, Toolbox, builtin_tools


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)
    return str(path)


def field(path: str) -> str:
    """Shell text printing one field of the payload on stdin (as ``jq -r`` would)."""
    return f'python3 -c "import json,sys; print(json.load(sys.stdin){path})"'


def records(session: AgentSession) -> list[Any]:
    view = session.view
    return [view.event(e.id, resolve=True).record for e in view.entries()]


def hook_records(session: AgentSession) -> list[HookRecord]:
    return [r for r in records(session) if isinstance(r, HookRecord)]


def open_session(tmp_path: Path, project: Path, hooks: str) -> AgentSession:
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(project)).id
    user = tmp_path / "user.toml"
    user.write_text(f'trusted_projects = ["{project}"]\n' + hooks)
    return AgentSession(
        store,
        sid,
        model=ScriptedModel([]),
        toolbox=Toolbox(builtin_tools()),
        permissions=Policy([Rule.parse("allow", "bash")]),
        hooks=load_config(project, user).hooks,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    here = tmp_path / "project"
    here.mkdir()
    (here / "keep.txt").write_text("precious\n")
    (here / "secret.env").write_text("TOKEN=42\n")
    return here


def guard(tmp_path: Path) -> str:
    """Claude Code's classic guard: exit 2 (with why on stderr) for ``rm -rf`` and
    for reading a ``.env`` file; it logs each payload it reads."""
    log = tmp_path / "pre.log"
    return script(
        tmp_path / "guard.sh",
        "payload=$(cat)\n"
        f'echo "$payload" >> {log}\n'
        'cmd=$(echo "$payload" | ' + field("['tool_input'].get('command', '')") + ")\n"
        'path=$(echo "$payload" | ' + field("['tool_input'].get('file_path', '')") + ")\n"
        'if [[ "$cmd" == *"rm -rf"* ]]; then echo "no rm -rf here, use trash" >&2; exit 2; fi\n'
        'if [[ "$path" == *.env ]]; then echo "secrets stay out of the context" >&2; exit 2; fi\n'
        "exit 0\n",
    )


def logger(tmp_path: Path) -> str:
    log = tmp_path / "post.log"
    return script(tmp_path / "post.sh", f"cat >> {log}; echo >> {log}\n")


def hooks_toml(tmp_path: Path) -> str:
    return (
        f'[[hooks.PreToolUse]]\nmatcher = "Bash|Read"\ncommand = "{guard(tmp_path)}"\n'
        f'[[hooks.PostToolUse]]\nmatcher = "Bash|Read"\ncommand = "{logger(tmp_path)}"\n'
    )


def payloads(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_bang_command_a_pre_tool_use_hook_blocks_is_not_run_and_says_why(
    tmp_path: Path, project: Path
) -> None:
    async def scenario(session: AgentSession) -> tuple[Any, bool, list[Any]]:
        watcher = session.hub.subscribe()
        output, ran = await run_as_user(session, "bash", {"command": "rm -rf keep.txt"})
        watcher.close()
        return output, ran, [item async for item in watcher]

    with open_session(tmp_path, project, hooks_toml(tmp_path)) as session:
        output, ran, heard = asyncio.run(scenario(session))
        ran_hooks = hook_records(session)
    assert (project / "keep.txt").read_text() == "precious\n"  # never run
    assert not ran and output.is_error
    assert "no rm -rf here, use trash" in output.content  # the hook's stderr, shown
    sent = payloads(tmp_path / "pre.log")
    assert [(p["hook_event_name"], p["tool_name"], p["tool_input"]) for p in sent] == [
        ("PreToolUse", "Bash", {"command": "rm -rf keep.txt"})
    ]
    assert not (tmp_path / "post.log").exists()  # a blocked call has no PostToolUse
    assert [(r.event, r.exit_code, r.decision, r.tool) for r in ran_hooks] == [
        ("PreToolUse", 2, "block", "bash")
    ]
    assert [type(i.event.record) for i in heard if isinstance(i, Saved)] == [HookRecord]


def test_a_bang_command_that_runs_fires_pre_and_post_tool_use_recorded_before_its_note(
    tmp_path: Path, project: Path
) -> None:
    async def scenario(session: AgentSession) -> None:
        output, ran = await session.run_as_user("bash", {"command": "echo hello from me"})
        assert ran and not output.is_error and "hello from me" in output.content
        await session.add_context(shell_note("echo hello from me", output))

    with open_session(tmp_path, project, hooks_toml(tmp_path)) as session:
        asyncio.run(scenario(session))
        kept = records(session)
    post = payloads(tmp_path / "post.log")
    assert [(p["hook_event_name"], p["tool_name"]) for p in post] == [("PostToolUse", "Bash")]
    assert post[0]["tool_input"] == {"command": "echo hello from me"}
    assert "hello from me" in json.dumps(post[0]["tool_response"])
    assert [(r.event, r.tool) for r in kept if isinstance(r, HookRecord)] == [
        ("PreToolUse", "bash"),
        ("PostToolUse", "bash"),
    ]
    assert isinstance(kept[-1], MessageRecord) and "hello from me" in kept[-1].content


def test_an_attached_file_fires_read_hooks_and_a_block_keeps_it_out(
    tmp_path: Path, project: Path
) -> None:
    async def scenario(session: AgentSession) -> tuple[Any, bool]:
        output, ran = await session.run_as_user("read_file", {"path": "keep.txt"})
        assert ran and "precious" in output.content
        await session.add_context(file_note("keep.txt", output))
        return await session.run_as_user("read_file", {"path": "secret.env"})

    with open_session(tmp_path, project, hooks_toml(tmp_path)) as session:
        refused, ran = asyncio.run(scenario(session))
        kept = records(session)
    assert not ran and "secrets stay out of the context" in refused.content
    assert "TOKEN" not in refused.content
    sent = payloads(tmp_path / "pre.log")
    assert [(p["tool_name"], p["tool_input"]) for p in sent] == [
        ("Read", {"file_path": str(project / "keep.txt")}),
        ("Read", {"file_path": str(project / "secret.env")}),
    ]
    # the transcript the last hook read holds the file attached before
    assert "precious" in Path(sent[-1]["transcript_path"]).read_text()
    post = payloads(tmp_path / "post.log")
    assert [p["tool_input"]["file_path"] for p in post] == [str(project / "keep.txt")]
    assert [(r.event, r.decision) for r in kept if isinstance(r, HookRecord)] == [
        ("PreToolUse", None),
        ("PostToolUse", None),
        ("PreToolUse", "block"),
    ]
    assert not any("TOKEN" in getattr(r, "content", "") for r in kept)


def test_with_an_older_event_picked_the_hook_runs_wait_for_the_note_they_belong_to(
    tmp_path: Path, project: Path
) -> None:
    """A file attached to a prompt continuing from an older event: the pick is the
    prompt's (its files are restored first), so the hook runs are not appended at
    once but just before the attached file's note, on the branch from the pick."""

    async def scenario(session: AgentSession) -> tuple[int, int]:
        first = await session.add_context(MessageRecord(content="first"))
        await session.add_context(MessageRecord(content="second"))
        session.select(first.id)
        before = session.view.count
        output, ran = await session.run_as_user("read_file", {"path": "keep.txt"})
        assert ran and session.pending_parent == first.id  # still picked
        waiting = session.view.count
        note = await session.add_context(file_note("keep.txt", output))
        path = [e.id for e in session.view.path(note.id, to_boundary=False)]
        kinds = [type(session.view.event(i).record).__name__ for i in path]
        assert kinds == ["MessageRecord", "HookRecord", "HookRecord", "MessageRecord"]
        assert path[0] == first.id
        return before, waiting

    with open_session(tmp_path, project, hooks_toml(tmp_path)) as session:
        before, waiting = asyncio.run(scenario(session))
    assert waiting == before  # nothing appended at the pick by the read itself

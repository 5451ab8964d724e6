"""Hooks as a program on the SDK meets them (``Harness``, an approver, the hub):
a hook's non-blocking error reaches the user wherever the hook ran (a
Notification hook while a question is asked, a manual compaction's PreCompact,
as the TUI's /compact runs it), an ``ask`` hook's reason is in the question, and
``updatedInput`` rewrites the user's own command as it does the model's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from infai import Ask, Harness, Message, Notice, Reply, ScriptedModel, Streamed, ToolCall


def failing(path: Path, said: str) -> str:
    path.write_text(f"#!/bin/bash\ncat > /dev/null\necho '{said}' >&2\nexit 1\n")
    path.chmod(0o755)
    return str(path)


def allow(ask: Ask) -> Reply:
    return "allow"


def test_notification_and_manual_pre_compact_errors_are_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    notify = failing(tmp_path / "notify.sh", "notify-send: command not found")
    backup = failing(tmp_path / "backup.sh", "backup of the transcript failed")
    user = tmp_path / "config.toml"
    user.write_text(
        f'[[hooks.Notification]]\ncommand = "{notify}"\n'
        f'[[hooks.PreCompact]]\nmatcher = "manual"\ncommand = "{backup}"\n'
        '[[hooks.SessionStart]]\nmatcher = "compact"\ncommand = "echo keep: tabs"\n'
    )
    monkeypatch.setenv("INFAI_CONFIG", str(user))
    write = ToolCall("c1", "write_file", {"path": "a.txt", "content": "a"})
    model = ScriptedModel(
        [Message("assistant", tool_calls=(write,)), "written", "summary", "summary"]
    )

    async def main() -> tuple[list[str], list[str]]:
        harness = Harness.for_directory(work, model=model, approver=allow)
        async with harness, harness.session() as session:
            turn = [e async for e in session.prompt("write a.txt")]
            events = session.hub.subscribe()
            await session.compact()
            events.close()
            compacting = [e async for e in events]
            sent = await session.context()
        assert "keep: tabs" in sent.messages[-1].content  # put back after the summary

        def shown(items: list[object]) -> list[str]:
            return [
                i.event.message
                for i in items
                if isinstance(i, Streamed) and isinstance(i.event, Notice)
            ]

        return shown(list(turn)), shown(list(compacting))

    in_turn, in_compaction = asyncio.run(main())
    assert (work / "a.txt").read_text() == "a"
    assert any("notify-send: command not found" in text for text in in_turn)
    assert any("backup of the transcript failed" in text for text in in_compaction)


def test_an_ask_hooks_reason_is_in_the_question_even_where_the_rules_ask_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    ask = tmp_path / "ask.sh"
    ask.write_text(
        "#!/bin/bash\ncat > /dev/null\n"
        """echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", """
        """"permissionDecision": "ask", "permissionDecisionReason": "this is release config"}}'\n"""
    )
    ask.chmod(0o755)
    user = tmp_path / "config.toml"
    user.write_text(f'[[hooks.PreToolUse]]\nmatcher = "Write"\ncommand = "{ask}"\n')
    monkeypatch.setenv("INFAI_CONFIG", str(user))
    write = ToolCall("c1", "write_file", {"path": "release.toml", "content": "v = 2"})
    model = ScriptedModel([Message("assistant", tool_calls=(write,)), "written"])
    asked: list[str] = []

    def answer(question: Ask) -> Reply:
        asked.append(question.reason)
        return "allow"

    async def main() -> None:
        harness = Harness.for_directory(work, model=model, approver=answer)
        async with harness, harness.session() as session:
            async for _event in session.prompt("bump the release"):
                pass

    asyncio.run(main())
    assert len(asked) == 1 and "this is release config" in asked[0]


def test_a_notification_hooks_error_while_the_users_own_command_asks_is_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    notify = failing(tmp_path / "notify.sh", "notify-send: command not found")
    user = tmp_path / "config.toml"
    user.write_text(f'[[hooks.Notification]]\ncommand = "{notify}"\n')
    monkeypatch.setenv("INFAI_CONFIG", str(user))

    async def main() -> list[str]:
        harness = Harness.for_directory(work, model=ScriptedModel([]), approver=allow)
        async with harness, harness.session() as session:
            events = session.hub.subscribe()
            _, ran = await session.run_as_user("write_file", {"path": "n.txt", "content": "n"})
            assert ran
            events.close()
            return [
                e.event.message
                async for e in events
                if isinstance(e, Streamed) and isinstance(e.event, Notice)
            ]

    shown = asyncio.run(main())
    assert any("notify-send: command not found" in text for text in shown)


def test_the_users_own_command_is_rewritten_by_an_updated_input_as_the_models_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    rewrite = tmp_path / "rewrite.sh"
    rewrite.write_text(
        "#!/bin/bash\n"
        'jq \'{hookSpecificOutput: {hookEventName: "PreToolUse",\n'
        '  updatedInput: {command: (.tool_input.command | sub("typed"; "rewritten"))}}}\'\n'
    )
    rewrite.chmod(0o755)
    user = tmp_path / "config.toml"
    user.write_text(f'[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "{rewrite}"\n')
    monkeypatch.setenv("INFAI_CONFIG", str(user))

    async def main() -> str:
        harness = Harness.for_directory(work, model=ScriptedModel([]), approver=allow)
        async with harness, harness.session() as session:
            output, ran = await session.run_as_user("bash", {"command": "echo typed"})
            assert ran
            return output.content

    assert "rewritten" in asyncio.run(main())

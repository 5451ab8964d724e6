"""The rule pipeline sends exactly what the context assembly sent before it
(``tests/support/old_context.py``, the old code kept as the oracle): on sessions
built by real turns against scripted models, with every kind of event, and on
every session imported from the corpus of other tools' files, at every tip."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from import_corpus import corpus
from infai.agent import run_turn
from infai.agent.context import ContextPipeline, UnsendableEvent, context_pipeline, to_messages
from infai.agent.context.rules import pruned_outputs
from infai.llm import Message, ScriptedModel, ToolCall, ToolSpec
from infai.shells.cli.main import main
from infai.store import (
    BranchSummaryRecord,
    GapRecord,
    HookRecord,
    MessageRecord,
    SessionView,
    SnapshotRecord,
    Store,
    ToolCallRecord,
    ToolResultRecord,
)
from infai.tools import AllowAll, Toolbox, ToolContext, ToolOutput
from old_context import to_messages as old_to_messages


class Echo:
    spec = ToolSpec("echo", "Echo", {"type": "object"})

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        return ToolOutput("line\n" * int(arguments.get("n", 1)))


def _same_at_every_tip(view: SessionView, pruned: frozenset[str], every: int = 1) -> int:
    """Compare old and new at each ``every``-th event and each leaf; the count compared."""
    tips = [e.id for e in list(view.entries())[::every]] + [e.id for e in view.leaves()]
    new = ContextPipeline.default(pruned)
    for tip in dict.fromkeys(tips):
        events = view.context(tip).events
        try:
            want: list[Message] | str = old_to_messages(events, pruned)
        except UnsendableEvent as exc:
            want = str(exc)
        try:
            got: list[Message] | str = new.messages(events)
        except UnsendableEvent as exc:
            got = str(exc)
        assert got == want, f"context at {tip} differs"
        if isinstance(got, list):  # again, each event's first part remembered
            assert new.messages(events) == want
    return len(tips)


async def _turns(store: Store, sid: str) -> None:
    call = ToolCall("c1", "echo", {"n": 3})
    model = ScriptedModel(
        [
            Message(role="assistant", content="looking", tool_calls=(call,)),
            "done",
            Message(
                role="assistant",
                tool_calls=(ToolCall("c2", "echo", {}), ToolCall("c3", "nope", {})),
            ),
            "again",
        ]
    )
    with store.open_writer(sid) as writer:
        for prompt in ("first", "second"):
            async for _ in run_turn(
                writer,
                model,
                prompt,
                toolbox=Toolbox([Echo()]),
                permissions=AllowAll(),
                context=ToolContext(Path("."), sid),
            ):
                pass


def test_a_session_of_every_kind_gets_the_same_context(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    asyncio.run(_turns(store, sid))
    with store.open_writer(sid) as w:
        first = w.path()[0].id
        w.append(SnapshotRecord(tree="0" * 64, reason="turn start"), "system")
        w.append(HookRecord(event="UserPromptSubmit", command="x", context="ctx"), "system")
        w.append(HookRecord(event="PreToolUse", command="y"), "system")
        w.append(MessageRecord(content="prompt left"), "user")
        marker = MessageRecord(content="[turn interrupted]", metadata={"interrupted": True})
        w.append(marker, "user")
        w.append(MessageRecord(content="next"), "user")
        w.append(ToolCallRecord(call_id="d1", name="echo", arguments={}), "assistant")
        w.append(SnapshotRecord(tree="0" * 64, reason="after echo"), "system")
        w.append(ToolResultRecord(call_id="d1", name="echo", content="out"), "tool")
        w.append(ToolResultRecord(call_id="zz", name="echo", content="dangling"), "tool")
        w.append(ToolCallRecord(call_id="d2", name="echo", arguments={}), "assistant")
        w.append(GapRecord(summary="2 events lost", lost=[]), "system")
        w.append(BranchSummaryRecord(summary="tried X"), "assistant", parent=first)
        w.append(MessageRecord(content="odd"), "tool")  # a role no model takes
    with store.open_reader(sid) as view:
        assert _same_at_every_tip(view, frozenset()) > 20
        results = [e.id for e in view.entries() if e.kind == "tool_result"]
        _same_at_every_tip(view, frozenset(results[::2]))  # as an OpenCode import prunes


def test_a_compacted_session_gets_the_same_context(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    summary = '{"summary": "so far", "goals": ["g"], "facts": ["f"]}'
    model = ScriptedModel(["one " * 400, summary, "after"], context_window=300)

    async def go() -> None:
        with store.open_writer(sid) as writer:
            for prompt in ("a", "b"):
                async for _ in run_turn(
                    writer,
                    model,
                    prompt,
                    toolbox=Toolbox([]),
                    permissions=AllowAll(),
                    context=ToolContext(Path("."), sid),
                ):
                    pass

    asyncio.run(go())
    with store.open_reader(sid) as view:
        assert any(e.kind == "compaction" for e in view.entries())
        _same_at_every_tip(view, frozenset())


@pytest.mark.parametrize("tool", ["claude-code", "codex", "pi", "opencode"])
def test_every_imported_corpus_session_gets_the_same_context(tmp_path: Path, tool: str) -> None:
    home = tmp_path / "home"
    result = CliRunner().invoke(main, ["--home", str(home), "import", tool, str(corpus() / tool)])
    assert result.exit_code in (0, 1), result.output  # 1: some corpus file is refused
    store = Store(home)
    sessions = store.list_sessions()
    assert sessions
    compared = 0
    for info in sessions:
        pruned = pruned_outputs(info.extra)
        assert context_pipeline(info.extra, []).names == ContextPipeline.default(pruned).names
        with store.open_reader(info.id) as view:
            count = sum(1 for _ in view.entries())
            compared += _same_at_every_tip(view, pruned, every=max(1, count // 25))
    assert compared >= len(sessions)


def test_to_messages_is_the_default_pipeline(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    asyncio.run(_turns(store, sid))
    with store.open_reader(sid) as view:
        events = view.context().events
        assert to_messages(events) == old_to_messages(events)

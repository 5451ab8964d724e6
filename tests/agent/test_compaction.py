"""Compaction: manual, automatic at the threshold, and the failure paths."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infai.agent import Saved, Streamed, run_turn, to_messages
from infai.agent.compaction import SUMMARY_ASK as SUMMARY_ASK_TEXT
from infai.agent.compaction import CompactionFailed, compact, parse_summary
from infai.agent.loop import INTERRUPTED_TURN
from infai.llm import Message, Notice, OfflineModel, ProviderError, Request, ScriptedModel
from infai.shells.cli import main
from infai.store import CompactionRecord, MessageRecord, SessionWriter, Store, Usage
from infai.tools import AllowAll, Toolbox, ToolContext

SUMMARY = {
    "summary": "Parser rewritten; tests pass except one.",
    "goals": ["ship the parser"],
    "constraints": ["no new dependencies"],
    "decisions": ["use a hand-written lexer"],
    "files_changed": ["src/parser.py"],
    "unresolved": ["test_unicode fails"],
    "facts": ["run tests with: make test"],
}


@pytest.fixture
def writer(tmp_path: Path) -> Any:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        yield w


def turn(writer: SessionWriter, model: Any, prompt: str) -> list[Any]:
    async def go() -> list[Any]:
        context = ToolContext(Path("."), writer.session_id)
        return [
            e
            async for e in run_turn(
                writer, model, prompt, toolbox=Toolbox(), permissions=AllowAll(), context=context
            )
        ]

    return asyncio.run(go())


def test_manual_compaction_appends_a_boundary_with_every_section(writer: SessionWriter) -> None:
    turn(writer, ScriptedModel(["first answer"]), "first question")
    model = ScriptedModel([f"```json\n{json.dumps(SUMMARY)}\n```"])
    event = asyncio.run(compact(writer, model))
    record = event.record
    assert isinstance(record, CompactionRecord)
    assert record.summary == SUMMARY["summary"] and record.facts == SUMMARY["facts"]
    assert record.files_changed == ["src/parser.py"] and record.unresolved == ["test_unicode fails"]
    request = model.requests[0]
    assert request.purpose == "summary" and "JSON object" in request.system
    assert [m.content for m in request.messages][:2] == ["first question", "first answer"]
    # The next context starts at the boundary; the old events stay in the store.
    assert [e.kind for e in writer.context().events] == ["compaction"]
    assert writer.count == 3
    first = to_messages(writer.context().events)[0]
    assert "Parser rewritten" in first.content
    assert "- run tests with: make test" in first.content


@pytest.mark.parametrize(
    "replies",
    [
        [ProviderError("overloaded", status=529)],
        ["I summarised it for you!", ProviderError("overloaded", status=529)],
        ['{"goals": []}', "  "],  # not usable, then nothing at all
        ["", ""],
    ],
)
def test_a_failed_summary_changes_nothing_and_a_retry_works(
    writer: SessionWriter, replies: list[Any]
) -> None:
    turn(writer, ScriptedModel(["answer"]), "question")
    before = (writer.count, writer.head)
    with pytest.raises(CompactionFailed):
        asyncio.run(compact(writer, ScriptedModel(replies)))
    assert (writer.count, writer.head) == before
    asyncio.run(compact(writer, ScriptedModel([json.dumps(SUMMARY)])))
    assert writer.count == before[0] + 1


def test_an_unusable_summary_is_asked_again_with_what_was_wrong(writer: SessionWriter) -> None:
    turn(writer, ScriptedModel(["answer"]), "question")
    model = ScriptedModel(["Sure! The work is nearly done.", json.dumps(SUMMARY)])
    event = asyncio.run(compact(writer, model))
    assert event.record.facts == SUMMARY["facts"]  # type: ignore[union-attr]
    again = model.requests[1].messages
    assert again[-2].role == "assistant" and again[-2].content.startswith("Sure!")
    assert "not a JSON object" in again[-1].content and "Sure! The work" in again[-1].content


def test_a_second_unusable_summary_is_kept_as_plain_text(writer: SessionWriter) -> None:
    turn(writer, ScriptedModel(["answer"]), "question")
    model = ScriptedModel(["no json here", "Still prose: parser done, tests left."])
    event = asyncio.run(compact(writer, model))
    record = event.record
    assert record.summary == "Still prose: parser done, tests left."  # type: ignore[union-attr]
    assert record.facts == [] and record.goals == []  # type: ignore[union-attr]
    assert [e.kind for e in writer.context().events] == ["compaction"]


def test_a_summary_error_shows_what_the_model_said() -> None:
    with pytest.raises(CompactionFailed, match="the model said: 'I summarised it'"):
        parse_summary("I summarised it")


def test_a_cancelled_summary_changes_nothing(writer: SessionWriter) -> None:
    turn(writer, ScriptedModel(["answer"]), "question")
    before = writer.count
    started = asyncio.Event()

    class Slow:
        name, context_window = "slow", 1000

        async def stream(self, request: Request) -> Any:
            started.set()
            await asyncio.Event().wait()
            yield  # pragma: no cover

    async def scenario() -> None:
        task = asyncio.create_task(compact(writer, Slow()))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert writer.count == before


def test_compaction_runs_by_itself_at_the_threshold(writer: SessionWriter) -> None:
    heavy = Message(role="assistant", content="long answer", usage=Usage(input_tokens=850))
    model = ScriptedModel([heavy, json.dumps(SUMMARY), "after"], context_window=1000)
    turn(writer, model, "q1")
    events = turn(writer, model, "q2")  # 850 >= 0.8 * 1000: q2 is stored, then compaction
    notices = [
        e.event.message for e in events if isinstance(e, Streamed) and isinstance(e.event, Notice)
    ]
    assert notices == ["compacting: 850 of 1,000 tokens in use"]  # readable numbers
    saved = [e.event for e in events if isinstance(e, Saved)]
    assert [e.kind for e in saved] == ["message", "compaction", "message", "message"]
    stored, boundary, restated = saved[:3]
    # the summary covers what came before q2 (beside the stored q2); q2 follows it again
    assert boundary.parent_id == stored.parent_id and restated.parent_id == boundary.id
    assert stored.record == restated.record
    assert isinstance(boundary.record, CompactionRecord) and boundary.record.tokens_before == 850
    assert model.requests[1].purpose == "summary"
    assert [m.role for m in model.requests[2].messages] == ["user", "user"]  # summary, q2
    assert [e.kind for e in writer.context().events] == ["compaction", "message", "message"]


def test_the_prompt_is_durable_before_an_automatic_compaction(writer: SessionWriter) -> None:
    started = asyncio.Event()

    class SlowSummary(ScriptedModel):
        async def stream(self, request: Request) -> Any:
            if request.purpose == "summary":
                started.set()
                await asyncio.Event().wait()  # never answers: cancelled below
            async for event in super().stream(request):
                yield event

    heavy = Message(role="assistant", content="long answer", usage=Usage(input_tokens=850))
    model = SlowSummary([heavy], context_window=1000)
    turn(writer, model, "q1")

    async def scenario() -> None:
        async def drive() -> None:
            async for _ in run_turn(
                writer,
                model,
                "typed before the summary",
                toolbox=Toolbox(),
                permissions=AllowAll(),
                context=ToolContext(Path("."), writer.session_id),
            ):
                pass

        task = asyncio.create_task(drive())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    path = [e.record for e in writer.context().events]
    assert [getattr(r, "content", None) for r in path][-2:] == [
        "typed before the summary",
        INTERRUPTED_TURN,
    ]
    assert writer.pending_parent is None
    assert not any(e.kind == "compaction" for e in writer.context().events)


def test_a_long_tool_loop_is_compacted_between_model_calls(
    writer: SessionWriter, tmp_path: Path
) -> None:
    from infai.llm import ToolCall
    from infai.tools import builtin_tools

    (tmp_path / "notes.txt").write_text("remember this\n")
    call = ToolCall("c1", "read_file", {"path": "notes.txt"})
    heavy = Message(role="assistant", tool_calls=(call,), usage=Usage(input_tokens=900))
    model = ScriptedModel([heavy, json.dumps(SUMMARY), "done reading"], context_window=1000)

    async def go() -> list[Any]:
        context = ToolContext(tmp_path, writer.session_id)
        tools = Toolbox(builtin_tools())
        return [
            e
            async for e in run_turn(
                writer, model, "read it", toolbox=tools, permissions=AllowAll(), context=context
            )
        ]

    events = asyncio.run(go())
    kinds = [e.event.kind for e in events if isinstance(e, Saved)]
    # prompt, reply + call, result, then (900 >= 800) a compaction before asking again
    assert kinds == ["message", "message", "tool_call", "tool_result", "compaction", "message"]
    assert model.requests[1].purpose == "summary"
    # the summary was made with the tool's result in view, and the next call starts from it
    assert any("remember this" in m.content for m in model.requests[1].messages)
    assert [m.role for m in model.requests[2].messages] == ["user"]
    assert writer.context().events[-1].record.content == "done reading"  # type: ignore[union-attr]


def test_a_huge_tool_result_counts_before_the_next_call(
    writer: SessionWriter, tmp_path: Path
) -> None:
    """Reported usage is stale once a big result is appended: it is estimated on top."""
    from infai.llm import ToolCall
    from infai.tools import builtin_tools

    (tmp_path / "big.txt").write_text("x" * 3000)  # ~750 tokens
    call = ToolCall("c1", "read_file", {"path": "big.txt"})
    light = Message(role="assistant", tool_calls=(call,), usage=Usage(input_tokens=100))
    failing = ProviderError("no summary today")
    model = ScriptedModel([light, failing, "answered anyway", "x"], context_window=1000)

    async def go() -> list[Any]:
        context = ToolContext(tmp_path, writer.session_id)
        tools = Toolbox(builtin_tools())
        return [
            e
            async for e in run_turn(
                writer, model, "read", toolbox=tools, permissions=AllowAll(), context=context
            )
        ]

    events = asyncio.run(go())
    notices = [
        e.event.message for e in events if isinstance(e, Streamed) and isinstance(e.event, Notice)
    ]
    assert notices[0].startswith("compacting: ")  # 100 reported + ~750 estimated >= 800
    assert int(notices[0].split()[1]) > 800
    assert notices[1].startswith("compaction failed, continuing without it")
    assert model.requests[2].purpose == "chat"  # the turn went on
    assert len(notices) == 2  # and did not retry the summary at every later step


def test_compaction_of_a_context_larger_than_the_window_still_fits(
    writer: SessionWriter,
) -> None:
    from infai.store import ToolCallRecord, ToolResultRecord

    writer.append(MessageRecord(content="the goal: ship it"), "user")
    for i in range(30):
        writer.append(MessageRecord(content=f"step {i}"), "assistant")
        writer.append(ToolCallRecord(call_id=f"c{i}", name="bash", arguments={}), "assistant")
        writer.append(ToolResultRecord(call_id=f"c{i}", name="bash", content="y" * 400), "tool")
    model = ScriptedModel([json.dumps(SUMMARY)], context_window=2000)
    asyncio.run(compact(writer, model))
    sent = model.requests[0].messages
    assert sent[0].content == "the goal: ship it"  # the first message stays
    assert "messages omitted here to fit the window" in sent[1].content
    assert sum(len(m.content) for m in sent) < 2000 * 4
    calls = {c.id for m in sent for c in m.tool_calls}
    assert all(m.tool_call_id in calls for m in sent if m.role == "tool")  # nothing dangles
    assert sent[-1].content == SUMMARY_ASK_TEXT


def test_below_the_threshold_nothing_is_compacted(writer: SessionWriter) -> None:
    light = Message(role="assistant", content="short", usage=Usage(input_tokens=799))
    model = ScriptedModel([light, "again"], context_window=1000)
    turn(writer, model, "q1")
    turn(writer, model, "q2")
    assert all(r.purpose == "chat" for r in model.requests)


def test_the_offline_model_summarises_deterministically(writer: SessionWriter) -> None:
    turn(writer, OfflineModel(), "build the parser")
    event = asyncio.run(compact(writer, OfflineModel()))
    assert isinstance(event.record, CompactionRecord)
    assert event.record.goals == ["build the parser"]
    assert parse_summary(json.dumps(SUMMARY)).decisions == ["use a hand-written lexer"]


def test_cli_compact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    home = str(tmp_path / "home")
    runner = CliRunner()
    ran = runner.invoke(main, ["--home", home, "run", "hello"])
    sid = ran.stderr.strip().splitlines()[-1].removeprefix("session ")
    out = runner.invoke(main, ["--home", home, "compact", sid])
    assert out.exit_code == 0, out.output
    with Store(Path(home)).open_reader(sid) as reader:
        assert reader.event(out.stdout.strip()).kind == "compaction"
    empty = Store(Path(home)).create_session().id
    failed = runner.invoke(main, ["--home", home, "compact", empty])
    assert failed.exit_code == 1 and "nothing to compact" in failed.stderr


def test_compaction_with_an_older_event_picked_summarises_that_branch(
    writer: SessionWriter,
) -> None:
    model = ScriptedModel(["A1", "B1", json.dumps(SUMMARY), "after"])
    turn(writer, model, "alpha")
    answer_a = writer.head
    turn(writer, model, "beta")
    assert answer_a is not None
    writer.select(answer_a)
    event = asyncio.run(compact(writer, model))
    summarised = [m.content for m in model.requests[2].messages[:-1]]
    assert summarised == ["alpha", "A1"]  # not the branch being left
    assert event.parent_id == answer_a and event.branch_from == answer_a
    turn(writer, model, "go on")
    assert [m.role for m in model.requests[3].messages] == ["user", "user"]  # summary, prompt

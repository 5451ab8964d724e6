"""One turn of the agent against scripted models: what is stored, when, and what is sent."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from infai.agent import Saved, Streamed, TurnEnded, run_turn, to_messages
from infai.agent.context import INTERRUPTED, INTERRUPTED_NOTE
from infai.agent.loop import INTERRUPTED_TURN, TURN_PROMPT, AgentEvent
from infai.llm import (
    Done,
    FunctionModel,
    Message,
    ProviderError,
    ReasoningDelta,
    Request,
    ScriptedModel,
    TextDelta,
    ToolCall,
    ToolSpec,
)
from infai.store import (
    BranchSummaryRecord,
    CompactionRecord,
    MessageRecord,
    SessionWriter,
    Store,
    ToolCallRecord,
    ToolResultRecord,
)
from infai.tools import AllowAll, Decision, Toolbox, ToolContext, ToolOutput


class Add:
    spec = ToolSpec("add", "Add two numbers", {"type": "object"})

    def __init__(self, store: Store | None = None, sid: str = "") -> None:
        self.store, self.sid = store, sid
        self.saw_call_durable = False

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        if self.store is not None:  # the call must be durable before the tool runs
            with self.store.open_reader(self.sid) as reader:
                head = reader.event(reader.head or "")
                self.saw_call_durable = head.kind == "tool_call"
        return ToolOutput(str(arguments["a"] + arguments["b"]))


class Broken:
    spec = ToolSpec("broken", "Always fails")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        raise RuntimeError("disk on fire")


class Stuck:
    spec = ToolSpec("stuck", "Never finishes")

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class DenyAll:
    async def decide(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> Decision:
        return Decision("deny", by="test policy", reason=f"{tool} is not allowed here")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home")


def call(name: str, call_id: str = "call_1", **arguments: Any) -> Message:
    return Message(role="assistant", tool_calls=(ToolCall(call_id, name, arguments),))


async def drive(writer: SessionWriter, model: Any, prompt: str, **kwargs: Any) -> list[AgentEvent]:
    kwargs.setdefault("toolbox", Toolbox([Add(), Broken()]))
    kwargs.setdefault("permissions", AllowAll())
    kwargs.setdefault("context", ToolContext(Path("."), writer.session_id))
    return [e async for e in run_turn(writer, model, prompt, **kwargs)]


def stored(writer: SessionWriter) -> list[tuple[str, str, Any]]:
    return [(e.kind, e.role, e.record) for e in writer.context().events]


def test_a_plain_turn_stores_the_prompt_and_the_settled_reply(store: Store) -> None:
    sid = store.create_session().id
    model = ScriptedModel(["Hello! How can I help with this repository today?"])
    with store.open_writer(sid) as w:
        events = asyncio.run(drive(w, model, "hi"))
        assert isinstance(events[0], Saved) and events[0].event.role == "user"
        assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "done"
        deltas = [e.event for e in events if isinstance(e, Streamed)]
        assert "".join(d.text for d in deltas if isinstance(d, TextDelta)).startswith("Hello!")
        (_, _, user), (_, _, reply) = stored(w)
        assert user == MessageRecord(content="hi", metadata={TURN_PROMPT: True})
        assert isinstance(reply, MessageRecord) and reply.content.startswith("Hello!")
        assert reply.model == "scripted" and reply.stop_reason == "end_turn"
        assert reply.usage is not None and reply.usage.output_tokens > 0
    assert [m.content for m in model.requests[0].messages] == ["hi"]
    assert store.fsck(sid).ok


def test_the_prompt_is_durable_before_the_model_is_asked(store: Store) -> None:
    sid = store.create_session().id
    seen: list[str] = []

    def answer(request: Request) -> str:
        with store.open_reader(sid) as reader:  # another reader, as after a crash
            seen.extend(e.preview for e in reader.path())
        return "ok"

    with store.open_writer(sid) as w:
        asyncio.run(drive(w, FunctionModel(answer), "remember me"))
    assert seen == ["remember me"]


def test_tool_calls_are_durable_before_they_run_and_results_go_back(store: Store) -> None:
    sid = store.create_session().id
    model = ScriptedModel([call("add", a=2, b=3), "The sum is 5."])
    add = Add(store, sid)
    with store.open_writer(sid) as w:
        events = asyncio.run(drive(w, model, "what is 2+3?", toolbox=Toolbox([add])))
        assert add.saw_call_durable
        kinds = [(k, r) for k, r, _ in stored(w)]
        assert kinds == [
            ("message", "user"),
            ("message", "assistant"),
            ("tool_call", "assistant"),
            ("tool_result", "tool"),
            ("message", "assistant"),
        ]
        result = stored(w)[3][2]
        assert isinstance(result, ToolResultRecord) and result.content == "5"
        permission = result.metadata["permission"]
        assert permission["verdict"] == "allow" and permission["by"] == "allow-all"
        assert permission["at"].endswith("Z")
    assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "done"
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool"]
    assert second[1].tool_calls == (ToolCall("call_1", "add", {"a": 2, "b": 3}),)
    assert second[2].tool_call_id == "call_1" and second[2].content == "5"
    assert model.requests[0].tools == (Add.spec,)


@pytest.mark.parametrize(
    ("reply", "toolbox", "permissions", "expect"),
    [
        (call("add", a=1, b=1), None, DenyAll(), "permission denied by test policy"),
        (call("broken"), None, None, "tool 'broken' failed: RuntimeError: disk on fire"),
        (call("teleport"), None, None, "unknown tool 'teleport'"),
        (
            Message(
                role="assistant",
                content="",
                tool_calls=(ToolCall("call_1", "add", {}, error="its arguments are not JSON"),),
            ),
            None,
            None,
            "tool call 'add' was not run: its arguments are not JSON",
        ),
    ],
)
def test_a_refused_or_failing_call_becomes_an_error_result_and_the_loop_goes_on(
    store: Store, reply: Message, toolbox: Any, permissions: Any, expect: str
) -> None:
    sid = store.create_session().id
    model = ScriptedModel([reply, "I could not do that."])
    kwargs: dict[str, Any] = {}
    if permissions is not None:
        kwargs["permissions"] = permissions
    with store.open_writer(sid) as w:
        events = asyncio.run(drive(w, model, "go", **kwargs))
        result = stored(w)[3][2]
    assert isinstance(result, ToolResultRecord) and result.is_error
    assert expect in result.content
    assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "done"
    assert model.requests[1].messages[-1].is_error


def test_a_provider_error_ends_the_turn_as_data_and_stores_nothing_of_it(store: Store) -> None:
    sid = store.create_session().id
    model = ScriptedModel([ProviderError("rate limited", status=429, retryable=True)])
    with store.open_writer(sid) as w:
        events = asyncio.run(drive(w, model, "hi"))
        assert [k for k, _, _ in stored(w)] == ["message"]
    assert events[-1] == TurnEnded("error", "rate limited")


def test_a_turn_stops_after_max_steps(store: Store) -> None:
    sid = store.create_session().id
    model = ScriptedModel([call("add", f"c{i}", a=i, b=i) for i in range(3)])
    with store.open_writer(sid) as w:
        events = asyncio.run(drive(w, model, "loop", max_steps=2))
    assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "error"
    assert "2 model calls" in (events[-1].error or "")


def test_cancelling_during_a_tool_leaves_a_valid_session_and_an_interrupted_result(
    store: Store,
) -> None:
    sid = store.create_session().id
    stuck = Stuck()
    model = ScriptedModel([call("stuck")])

    async def scenario(w: SessionWriter) -> None:
        task = asyncio.create_task(drive(w, model, "wait", toolbox=Toolbox([stuck])))
        await stuck.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with store.open_writer(sid) as w:
        asyncio.run(scenario(w))
        kinds = [k for k, _, _ in stored(w)]
        assert kinds == ["message", "message", "tool_call", "message"]
        assert stored(w)[-1][2].content == INTERRUPTED_TURN
        messages = to_messages(w.context().events)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2].content == INTERRUPTED and messages[2].is_error
    assert store.fsck(sid).ok


def test_cancelling_during_the_stream_keeps_the_prompt_and_what_was_said(store: Store) -> None:
    """Nothing read is thrown away: the partial reply is kept, marked interrupted, and
    the next turn sends it to the model as what it had said."""
    sid = store.create_session().id
    streaming = asyncio.Event()

    class Hanging:
        name, context_window = "hanging", 1000

        async def stream(self, request: Request) -> Any:
            yield ReasoningDelta("let me see")
            yield TextDelta("The answer ")
            yield TextDelta("is")
            streaming.set()
            await asyncio.Event().wait()
            yield Done(Message(role="assistant"))

    async def scenario(w: SessionWriter) -> None:
        task = asyncio.create_task(drive(w, Hanging(), "question"))
        await streaming.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with store.open_writer(sid) as w:
        asyncio.run(scenario(w))
        kept = stored(w)
        contents = [r.content for _, _, r in kept]
        assert contents == ["question", "The answer is", INTERRUPTED_TURN]
        _, role, cut = kept[1]
        assert role == "assistant" and cut.metadata == {"interrupted": True}
        assert cut.reasoning == "let me see" and cut.stop_reason == "interrupted"
        model = ScriptedModel(["42"])
        asyncio.run(drive(w, model, "go on"))
    sent = [(m.role, m.content) for m in model.requests[0].messages]
    assert sent == [  # the marker is said as a note, with the next prompt: one user message
        ("user", "question"),
        ("assistant", "The answer is"),
        ("user", f"{INTERRUPTED_NOTE}\n\ngo on"),
    ]


def test_a_cancel_before_any_text_keeps_no_empty_reply(store: Store) -> None:
    sid = store.create_session().id
    streaming = asyncio.Event()

    class Thinking:
        name, context_window = "thinking", 1000

        async def stream(self, request: Request) -> Any:
            yield ReasoningDelta("hmm")
            streaming.set()
            await asyncio.Event().wait()
            yield Done(Message(role="assistant"))

    async def scenario(w: SessionWriter) -> None:
        task = asyncio.create_task(drive(w, Thinking(), "question"))
        await streaming.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with store.open_writer(sid) as w:
        asyncio.run(scenario(w))
        assert [r.content for _, _, r in stored(w)] == ["question", INTERRUPTED_TURN]


def test_context_assembly_repairs_and_labels_what_the_store_holds(store: Store) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(CompactionRecord(summary="Worked on the parser.", goals=["ship"]), "assistant")
        w.append(MessageRecord(content="go on"), "user")
        w.append(MessageRecord(content="checking"), "assistant")
        w.append(ToolCallRecord(call_id="a", name="read", arguments={"p": 1}), "assistant")
        w.append(ToolCallRecord(call_id="b", name="read", arguments={"p": 2}), "assistant")
        w.append(ToolResultRecord(call_id="b", name="read", content="two"), "tool")
        w.append(ToolResultRecord(call_id="zzz", name="read", content="orphan"), "tool")
        w.append(BranchSummaryRecord(summary="Tried a regex; too slow."), "assistant")
        messages = to_messages(w.context().events)
    roles = [m.role for m in messages]
    assert roles == ["user", "user", "assistant", "tool", "tool", "user"]
    assert "Worked on the parser." in messages[0].content and "- ship" in messages[0].content
    assert [c.id for c in messages[2].tool_calls] == ["a", "b"]
    assert (messages[3].tool_call_id, messages[3].content) == ("b", "two")
    assert (messages[4].tool_call_id, messages[4].content) == ("a", INTERRUPTED)
    assert "Tried a regex" in messages[5].content
    assert all(m.content != "orphan" for m in messages)


def test_headless_policy_denies_a_write_and_records_who_decided(
    store: Store, tmp_path: Path
) -> None:
    from infai.tools import Policy, builtin_tools

    work = tmp_path / "work"
    work.mkdir()
    sid = store.create_session(working_dir=str(work)).id
    model = ScriptedModel(
        [
            call("write_file", path="x.txt", content="hi"),
            call("read_file", "c2", path="x.txt"),
            "ok",
        ]
    )
    with store.open_writer(sid) as w:
        asyncio.run(
            drive(
                w,
                model,
                "write then read",
                toolbox=Toolbox(builtin_tools()),
                permissions=Policy(),
                context=ToolContext(work, sid),
            )
        )
        results = [r for _, _, r in stored(w) if isinstance(r, ToolResultRecord)]
    assert not (work / "x.txt").exists()
    denied, read = results
    assert denied.is_error and "nobody can approve" in denied.content
    assert denied.metadata["permission"]["by"] == "default"
    assert read.is_error and "cannot read x.txt" in read.content  # allowed, file absent
    assert read.metadata["permission"]["verdict"] == "allow"


def test_a_session_keeps_its_context_in_memory_between_turns(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.agent import AgentSession
    from infai.store.file.writer import SessionWriter as Writer

    sid = store.create_session(working_dir=str(tmp_path)).id
    model = ScriptedModel(["a1", "a2", "a3", "b1"])
    reads: list[str | None] = []
    real_context = Writer.context

    def counting(self: Writer, at: str | None = None) -> Any:
        reads.append(at)
        return real_context(self, at)

    monkeypatch.setattr(Writer, "context", counting)
    with AgentSession(
        store, sid, model=model, toolbox=Toolbox(), permissions=AllowAll()
    ) as session:

        async def prompt(text: str) -> None:
            async for _ in session.prompt(text):
                pass

        asyncio.run(prompt("q1"))
        first = len(reads)
        asyncio.run(prompt("q2"))
        asyncio.run(prompt("q3"))
        assert len(reads) == first  # served from memory
        fresh = to_messages(real_context(session.writer).events)  # type: ignore[arg-type]
        assert [m.content for m in model.requests[2].messages] == [m.content for m in fresh][:-1]
        # Branching from an older event rebuilds it.
        q1 = session.writer.path()[0].id
        session.select(q1)
        asyncio.run(prompt("instead"))
        assert len(reads) > first
        assert [m.content for m in model.requests[3].messages] == ["q1", "instead"]

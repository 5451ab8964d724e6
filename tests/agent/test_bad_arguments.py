"""A model's bad tool arguments are answered with an error result and the turn goes
on: arguments nested 1,000 levels deep, a NUL byte in a path, a wrong type. No
traceback, no stuck turn, and the session stays valid."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from infai.agent import Saved, TurnEnded, run_turn
from infai.agent.loop import AgentEvent
from infai.llm import Done, Message, Request, StreamEvent, ToolCall
from infai.llm.fakes import ScriptedModel
from infai.store import SessionWriter, Store, ToolCallRecord, ToolResultRecord
from infai.tools import Decision, Policy, Toolbox, ToolContext, builtin_tools


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


class Replay:
    """Hands back settled messages as they are, with no streamed deltas: a message
    too deep for json.dumps (which ScriptedModel's streaming uses) still arrives."""

    name = "replay"
    context_window = 128_000

    def __init__(self, replies: list[Message]) -> None:
        self.replies = replies
        self.requests: list[Request] = []

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        reply = self.replies.pop(0)

        async def events() -> AsyncIterator[StreamEvent]:
            yield Done(reply)

        return events()


class Recording:
    """A policy that allows all, remembering what it was asked to rule on."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def decide(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> Decision:
        self.seen.append(arguments)
        return Decision("allow", by="test")


def calling(name: str, **arguments: Any) -> Message:
    return Message(role="assistant", tool_calls=(ToolCall("call_1", name, arguments),))


def drive(store: Store, work: Path, model: Any, permissions: Any) -> tuple[str, list[AgentEvent]]:
    sid = store.create_session().id

    async def turn(writer: SessionWriter) -> list[AgentEvent]:
        context = ToolContext(work, sid)
        toolbox = Toolbox(builtin_tools())
        return [
            e
            async for e in run_turn(
                writer, model, "go", toolbox=toolbox, permissions=permissions, context=context
            )
        ]

    with store.open_writer(sid) as writer:
        return sid, asyncio.run(turn(writer))


def results(store: Store, sid: str) -> list[ToolResultRecord]:
    with store.open_reader(sid) as reader:
        return [e.record for e in reader.context().events if isinstance(e.record, ToolResultRecord)]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home")


@pytest.mark.parametrize("depth", [100, 1000])
def test_deeply_nested_arguments_are_an_error_result_and_the_turn_goes_on(
    store: Store, tmp_path: Path, depth: int
) -> None:
    """The old loop tried to store the call, the store refused it (nested deeper
    than it keeps), and the exception ended the turn with the reply unstored."""
    (tmp_path / "a.txt").write_text("hello\n")
    reply = calling("read_file", path="a.txt", extra=nested(depth))
    model = Replay([reply, Message(role="assistant", content="I see.")])
    policy = Recording()
    sid, events = drive(store, tmp_path, model, policy)
    assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "done"
    (result,) = results(store, sid)
    assert result.is_error and "was not run" in result.content and "nested deeper" in result.content
    assert policy.seen == []  # never ruled on, never run
    assert model.requests[1].messages[-1].is_error
    with store.open_reader(sid) as reader:
        calls = [e.record for e in reader.context().events if isinstance(e.record, ToolCallRecord)]
    assert calls == [ToolCallRecord(call_id="call_1", name="read_file", arguments={})]
    assert store.fsck(sid).ok
    assert any(isinstance(e, Saved) and e.event.kind == "tool_result" for e in events)


def test_deep_arguments_streamed_by_a_scripted_model(store: Store, tmp_path: Path) -> None:
    model = ScriptedModel([calling("grep", pattern="x", extra=nested(200)), "done"])
    sid, events = drive(store, tmp_path, model, Recording())
    assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "done"
    (result,) = results(store, sid)
    assert result.is_error and "nested deeper" in result.content
    assert store.fsck(sid).ok


def test_a_nul_byte_in_a_path_is_an_error_result_before_the_policy_rules(
    store: Store, tmp_path: Path
) -> None:
    """The old policy resolved the path, raised ValueError (embedded null byte), and
    the exception ended the turn."""
    model = ScriptedModel([calling("write_file", path="a\0b.txt", content="x"), "ok"])
    sid, events = drive(store, tmp_path, model, Policy())
    assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "done"
    (result,) = results(store, sid)
    assert result.is_error and "'path'" in result.content and "NUL" in result.content
    assert list(tmp_path.glob("a*")) == []


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "wanted"),
    [
        ("read_file", {"path": "a.txt", "start_line": "abc"}, "start_line", "an integer"),
        ("read_file", {"path": 5}, "path", "a string"),
        ("read_file", {"path": ["a.txt"]}, "path", "a string"),
        ("read_file", {}, "path", "is required"),
        # str.isdigit() holds for these, int() refuses them: once "tool failed: ValueError"
        ("read_file", {"path": "a.txt", "start_line": "\u00b2"}, "start_line", "an integer"),
        ("read_file", {"path": "a.txt", "end_line": "9" * 5000}, "end_line", "an integer"),
        ("bash", {"command": "true", "timeout_seconds": "\u00b2"}, "timeout_seconds", "an integer"),
        ("edit_file", {"path": "a.txt", "old_text": 5, "new_text": "x"}, "old_text", "a string"),
        ("grep", {"pattern": "h", "glob": {}}, "glob", "a string"),
    ],
)
def test_badly_typed_arguments_are_an_error_naming_the_field_and_its_type(
    store: Store, tmp_path: Path, tool: str, arguments: dict[str, Any], field: str, wanted: str
) -> None:
    """Checked before the policy rules: it never sees a path the tool would read
    differently (the old policy matched str(["a.txt"]), the tool read "5")."""
    (tmp_path / "a.txt").write_text("hello\n")
    policy = Recording()
    model = ScriptedModel([calling(tool, **arguments), "ok"])
    sid, events = drive(store, tmp_path, model, policy)
    assert isinstance(events[-1], TurnEnded) and events[-1].outcome == "done"
    (result,) = results(store, sid)
    assert result.is_error and f"argument {field!r}" in result.content
    assert wanted in result.content and "failed" not in result.content
    assert policy.seen == []
    assert (tmp_path / "a.txt").read_text() == "hello\n"

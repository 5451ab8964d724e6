"""The provider-neutral messages and the models that need no network."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from infai.llm import (
    Done,
    FunctionModel,
    Message,
    OfflineModel,
    ProviderError,
    ReasoningDelta,
    Request,
    ScriptedModel,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    collect,
)
from infai.llm.fakes import estimate_tokens


def run(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    async def drain() -> list[StreamEvent]:
        return [event async for event in events]

    return asyncio.run(drain())


def request(*texts: str, system: str = "") -> Request:
    return Request(messages=tuple(Message(role="user", content=t) for t in texts), system=system)


def assemble(
    events: list[StreamEvent],
) -> tuple[str, str, list[tuple[str, str, dict[str, object]]]]:
    """What a shell showing only the deltas would have put together."""
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    calls: dict[int, list[str]] = {}
    heads: dict[int, tuple[str, str]] = {}
    for e in events:
        if isinstance(e, ToolCallDelta):
            if e.id is not None and e.name is not None:
                heads[e.index] = (e.id, e.name)
            calls.setdefault(e.index, []).append(e.arguments)
    tools = [(*heads[i], json.loads("".join(calls[i]))) for i in sorted(calls)]
    return text, reasoning, tools


def test_scripted_model_streams_deltas_that_add_up_to_the_settled_message() -> None:
    call = ToolCall(
        id="call_1", name="read_file", arguments={"path": "src/app.py", "lines": [1, 40]}
    )
    reply = Message(
        role="assistant",
        content="Let me look at the file first, then I will explain.",
        reasoning="The user wants an explanation; reading the file is the first step.",
        tool_calls=(call,),
    )
    model = ScriptedModel([reply])
    events = run(model.stream(request("explain app.py")))
    assert isinstance(events[-1], Done)
    assert not any(isinstance(e, Done) for e in events[:-1])
    settled = events[-1].message
    text, reasoning, tools = assemble(events)
    assert text == settled.content == reply.content
    assert reasoning == settled.reasoning == reply.reasoning
    assert tools == [("call_1", "read_file", call.arguments)]
    assert sum(isinstance(e, TextDelta) for e in events) > 1  # streamed, not one blob
    assert sum(isinstance(e, ToolCallDelta) for e in events) == 2  # arguments split
    assert settled.stop_reason == "tool_use"
    assert settled.model == "scripted"
    assert settled.usage is not None and settled.usage.input_tokens == estimate_tokens(
        "explain app.py"
    )


def test_scripted_model_replays_in_order_and_records_requests() -> None:
    model = ScriptedModel(
        ["first", ProviderError("rate limited", status=429, retryable=True), "third"]
    )
    first = asyncio.run(collect(model.stream(request("a"))))
    second = asyncio.run(collect(model.stream(request("b"))))
    third = asyncio.run(collect(model.stream(request("c", system="be brief"))))
    assert isinstance(first, Message) and first.content == "first"
    assert first.stop_reason == "end_turn"
    assert second == ProviderError("rate limited", status=429, retryable=True)
    assert isinstance(third, Message) and third.content == "third"
    assert [r.messages[0].content for r in model.requests] == ["a", "b", "c"]
    assert model.requests[2].system == "be brief"
    assert model.remaining == 0


def test_a_scripted_model_out_of_replies_says_so_as_data() -> None:
    model = ScriptedModel([], name="empty")
    events = run(model.stream(request("hello")))
    assert len(events) == 1 and isinstance(events[0], ProviderError)
    assert "no reply left" in events[0].message and "empty" in events[0].message


def test_collect_turns_a_truncated_stream_into_a_retryable_error() -> None:
    async def truncated() -> AsyncIterator[StreamEvent]:
        yield TextDelta("half a rep")

    outcome = asyncio.run(collect(truncated()))
    assert isinstance(outcome, ProviderError) and outcome.retryable
    assert "without a reply" in outcome.message


def test_function_model_answers_from_the_request() -> None:
    seen: list[Request] = []

    def answer(req: Request) -> str:
        seen.append(req)
        return f"{len(req.messages)} messages, last: {req.messages[-1].content}"

    model = FunctionModel(answer, name="fn", context_window=1000)
    outcome = asyncio.run(collect(model.stream(request("x", "y"))))
    assert isinstance(outcome, Message)
    assert outcome.content == "2 messages, last: y" and outcome.model == "fn"
    assert model.context_window == 1000 and len(seen) == 1


def test_a_message_with_usage_keeps_it() -> None:
    from infai.store import Usage

    usage = Usage(input_tokens=7, output_tokens=3)
    model = ScriptedModel([Message(role="assistant", content="ok", usage=usage)])
    outcome = asyncio.run(collect(model.stream(request("q"))))
    assert isinstance(outcome, Message) and outcome.usage == usage


@pytest.mark.parametrize("prompt", ["What does this repo do?\nSecond line", "  spaced  "])
def test_offline_model_is_deterministic_and_quotes_the_prompt(prompt: str) -> None:
    model = OfflineModel()
    first = asyncio.run(collect(model.stream(request(prompt))))
    again = asyncio.run(collect(model.stream(request(prompt))))
    assert first == again and isinstance(first, Message)
    assert repr(prompt.strip().splitlines()[0]) in first.content
    assert first.tool_calls == () and first.model == "offline"
    assert first.usage is not None and first.usage.output_tokens == estimate_tokens(first.content)


def test_offline_model_without_a_user_message() -> None:
    outcome = asyncio.run(collect(OfflineModel().stream(Request(messages=()))))
    assert isinstance(outcome, Message) and "no user message" in outcome.content

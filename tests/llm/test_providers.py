"""The OpenAI and Anthropic providers, through their real SDKs, against fake servers.

The servers in :mod:`fakeapi` (tests/support) speak each provider's streaming wire format
on 127.0.0.1; every test here runs the official SDK's HTTP and SSE code.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from fakeapi import FakeAnthropic, FakeOpenAI, FakeServer, Reply
from infai.agent import Saved, Streamed, run_turn
from infai.llm import (
    Done,
    Message,
    Model,
    Notice,
    ProviderError,
    ReasoningDelta,
    Request,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    close_model,
)
from infai.llm.anthropic_provider import AnthropicModel
from infai.llm.openai_provider import OpenAIModel
from infai.llm.providers import ModelSpec, ModelUnavailable, RetryPolicy
from infai.llm.registry import build_model
from infai.store import Store, ToolResultRecord
from infai.tools import AllowAll, Toolbox, ToolContext, builtin_tools

FAST = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05)
HELLO = Request(
    messages=(Message(role="user", content="hi"),),
    system="be brief",
    tools=(ToolSpec("read_file", "Read a file.", {"type": "object"}),),
)
FLAVOURS = ["openai", "anthropic"]


def server(flavour: str, *replies: Reply) -> FakeServer:
    return FakeOpenAI(list(replies)) if flavour == "openai" else FakeAnthropic(list(replies))


def model(flavour: str, fake: FakeServer, **options: Any) -> Model:
    spec = ModelSpec(
        flavour,
        "fake-model",
        base_url=fake.base_url,
        key_env="FAKE_KEY",
        retry=FAST,
        **options,
    )
    return OpenAIModel(spec) if flavour == "openai" else AnthropicModel(spec)


def run(m: Model, request: Request = HELLO) -> list[StreamEvent]:
    async def go() -> list[StreamEvent]:
        try:
            return [event async for event in m.stream(request)]
        finally:
            await close_model(m)

    return asyncio.run(go())


def settled(events: list[StreamEvent]) -> Message:
    assert isinstance(events[-1], Done), events[-1]
    return events[-1].message


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-test-123")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_text_streams_in_deltas_and_settles_with_usage(flavour: str) -> None:
    with server(flavour, Reply(text="Hello there, friend.", input_tokens=42, output_tokens=7)) as s:
        events = run(model(flavour, s))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "Hello there, friend."
    message = settled(events)
    assert message.content == "Hello there, friend." and message.stop_reason == "end_turn"
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (42, 7)
    assert message.metadata["provider"] == flavour
    [request] = s.requests
    assert "sk-test-123" in json.dumps(request.headers)  # the key from key_env was sent


def test_openai_request_has_system_tools_and_usage_option() -> None:
    with FakeOpenAI([Reply(text="ok")]) as s:
        run(model("openai", s))
    body = s.requests[0].body
    assert s.requests[0].path == "/v1/chat/completions"
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["tools"][0]["function"]["name"] == "read_file"


def test_anthropic_request_has_system_tools_and_max_tokens() -> None:
    with FakeAnthropic([Reply(text="ok")]) as s:
        run(model("anthropic", s, max_tokens=1000))
    body = s.requests[0].body
    assert s.requests[0].path == "/v1/messages"
    assert body["system"] == "be brief" and body["max_tokens"] == 1000
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["tools"] == [
        {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}
    ]
    assert "thinking" not in body


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tool_calls_split_across_chunks_are_reassembled(flavour: str) -> None:
    calls: list[tuple[str, str, dict[str, Any] | str]] = [
        ("call_a", "read_file", {"path": "src/main.py", "start": 3}),
        ("call_b", "grep", {"pattern": "def \\w+"}),
    ]
    with server(flavour, Reply(text="Let me look.", tool_calls=calls)) as s:
        events = run(model(flavour, s))
    fragments = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(fragments) > 4  # names once, arguments in pieces
    assert {f.index for f in fragments} == {0, 1}
    message = settled(events)
    assert message.tool_calls == (
        ToolCall("call_a", "read_file", {"path": "src/main.py", "start": 3}),
        ToolCall("call_b", "grep", {"pattern": "def \\w+"}),
    )
    assert message.stop_reason == "tool_use" and message.content == "Let me look."


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tool_arguments_that_are_not_json_settle_as_a_call_that_will_not_run(
    flavour: str,
) -> None:
    with server(flavour, Reply(tool_calls=[("c1", "bash", '{"command": "ls')])) as s:
        events = run(model(flavour, s))
    message = settled(events)
    [call] = message.tool_calls
    assert call.name == "bash" and call.arguments == {}
    assert call.error is not None and "not a JSON object" in call.error
    assert '\'{"command": "ls\'' in call.error


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_reasoning_streams_as_reasoning(flavour: str) -> None:
    with server(flavour, Reply(text="42", reasoning="six times seven")) as s:
        events = run(model(flavour, s))
    thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert thought == "six times seven" and settled(events).reasoning == "six times seven"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_rate_limit_is_retried_after_retry_after_with_a_notice(flavour: str) -> None:
    limited = Reply(status=429, error_message="slow down", retry_after=0.02)
    with server(flavour, limited, Reply(text="finally")) as s:
        events = run(model(flavour, s))
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 1
    assert "rate limited (HTTP 429): slow down" in notices[0]
    assert "retrying in 0.0s (attempt 2 of 3)" in notices[0]
    assert settled(events).content == "finally" and len(s.requests) == 2


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_server_errors_are_retried_then_reported_as_data(flavour: str) -> None:
    down = [Reply(status=503, error_message="maintenance") for _ in range(3)]
    with server(flavour, *down) as s:
        events = run(model(flavour, s))
    assert sum(isinstance(e, Notice) for e in events) == 2  # attempts 2 and 3 announced
    error = events[-1]
    assert isinstance(error, ProviderError)
    assert error.status == 503 and error.retryable and "maintenance" in error.message
    assert len(s.requests) == 3


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_refused_key_is_not_retried(flavour: str) -> None:
    with server(flavour, Reply(status=401, error_message="invalid x-api-key")) as s:
        events = run(model(flavour, s))
    assert not any(isinstance(e, Notice) for e in events)
    error = events[-1]
    assert isinstance(error, ProviderError) and error.status == 401 and not error.retryable
    assert "the API key was refused" in error.message and "invalid x-api-key" in error.message
    assert len(s.requests) == 1


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_error_inside_the_stream_ends_it_after_the_text_so_far(flavour: str) -> None:
    with server(flavour, Reply(text="partial answer", stream_error="overloaded now")) as s:
        events = run(model(flavour, s))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "partial answer"
    error = events[-1]
    assert isinstance(error, ProviderError) and "overloaded now" in error.message
    assert len(s.requests) == 1  # text was shown: no silent restart


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_malformed_stream_is_an_error(flavour: str) -> None:
    with server(flavour, Reply(text="abc", malformed=True)) as s:
        events = run(model(flavour, s))
    error = events[-1]
    assert isinstance(error, ProviderError) and "malformed stream" in error.message


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_dropped_connection_is_an_error(flavour: str) -> None:
    with server(flavour, Reply(text="abc", drop=True)) as s:
        events = run(model(flavour, s))
    error = events[-1]
    assert isinstance(error, ProviderError) and error.retryable
    assert "connection failed" in error.message or "ended before" in error.message


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_unreachable_server_is_retried_then_reported(flavour: str) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spec = ModelSpec(
        flavour,
        "m",
        base_url=f"http://127.0.0.1:{port}" + ("/v1" if flavour == "openai" else ""),
        key_env="FAKE_KEY",
        retry=FAST,
    )
    m = OpenAIModel(spec) if flavour == "openai" else AnthropicModel(spec)
    events = run(m)
    assert sum(isinstance(e, Notice) for e in events) == 2
    error = events[-1]
    assert isinstance(error, ProviderError) and "connection failed" in error.message


def test_openai_conversation_with_tool_results_maps_to_chat_messages() -> None:
    call = ToolCall("call_1", "read_file", {"path": "a.txt"})
    request = Request(
        messages=(
            Message(role="user", content="read a.txt"),
            Message(role="assistant", content="", tool_calls=(call,)),
            Message(role="tool", content="hello", tool_call_id="call_1", tool_name="read_file"),
        )
    )
    with FakeOpenAI([Reply(text="it says hello")]) as s:
        run(model("openai", s), request)
    assert s.requests[0].body["messages"] == [
        {"role": "user", "content": "read a.txt"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
    ]


def test_anthropic_merges_turns_and_sends_thinking_back_with_its_signature() -> None:
    calls = (ToolCall("t1", "read_file", {"path": "a"}), ToolCall("t2", "grep", {"pattern": "x"}))
    thinking = {
        "provider": "anthropic",
        "thinking_blocks": [
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "thinking", "thinking": "plan", "signature": "sig-abc"},
        ],
    }
    request = Request(
        messages=(
            Message(role="assistant", content="from a summary"),  # must not open the turns
            Message(role="user", content="go"),
            Message(
                role="assistant",
                content="",
                reasoning="plan",
                tool_calls=calls,
                metadata=thinking,
            ),
            Message(role="tool", content="A", tool_call_id="t1"),
            Message(role="tool", content="", tool_call_id="t2", is_error=True),
            Message(role="user", content="and then?"),
            Message(role="assistant", content="other", reasoning="x", metadata={"provider": "o"}),
        )
    )
    with FakeAnthropic([Reply(text="done")]) as s:
        run(model("anthropic", s, thinking_budget=2048), request)
    body = s.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] >= 2048 + 1024
    turns = body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant"] * 3  # a user turn opens
    assert turns[0]["content"] == [{"type": "text", "text": "(continue)"}]
    block = {"type": "thinking", "thinking": "plan", "signature": "sig-abc"}
    assert turns[3]["content"][:2] == [{"type": "redacted_thinking", "data": "opaque"}, block]
    kinds = [b["type"] for b in turns[3]["content"]]
    assert kinds == ["redacted_thinking", "thinking", "tool_use", "tool_use"]
    results = turns[4]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
    assert results[1] == {
        "type": "tool_result",
        "tool_use_id": "t2",
        "content": "(no output)",
        "is_error": True,
    }
    # reasoning from another provider has no signature: never sent as a thinking block
    assert turns[5]["content"] == [{"type": "text", "text": "other"}]


def test_anthropic_usage_counts_cached_tokens_in_the_input() -> None:
    with FakeAnthropic([Reply(text="hi", input_tokens=100, cached_tokens=900)]) as s:
        message = settled(run(model("anthropic", s)))
    assert message.usage is not None
    assert message.usage.input_tokens == 1000 and message.usage.cache_read_tokens == 900


def test_anthropic_thinking_blocks_are_kept_in_order_with_their_signatures() -> None:
    reply = Reply(
        text="42", reasoning="hmm", signature="sig-x", quirks={"redacted", "two_thinking"}
    )
    with FakeAnthropic([reply]) as s:
        message = settled(run(model("anthropic", s, thinking_budget=1024)))
    assert message.metadata["thinking_blocks"] == [
        {"type": "redacted_thinking", "data": "opaque-data"},
        {"type": "thinking", "thinking": "hmm", "signature": "sig-x"},
        {"type": "thinking", "thinking": "second thought", "signature": "sig-x-1"},
    ]
    assert message.reasoning == "hmmsecond thought"
    # and they go back exactly so
    back = Request(messages=(Message(role="user", content="q"), message))
    with FakeAnthropic([Reply(text="ok")]) as s:
        run(model("anthropic", s, thinking_budget=1024), back)
    sent = s.requests[0].body["messages"][1]["content"]
    assert sent[:3] == message.metadata["thinking_blocks"]


def test_anthropic_adaptive_thinking_is_requested_as_such() -> None:
    with FakeAnthropic([Reply(text="ok")]) as s:
        run(model("anthropic", s, adaptive_thinking=True, thinking_budget=999))
    assert s.requests[0].body["thinking"] == {"type": "adaptive"}


def test_anthropic_never_sends_whitespace_only_text() -> None:
    request = Request(
        messages=(
            Message(role="user", content="go"),
            Message(role="assistant", content="\n\n", tool_calls=(ToolCall("t1", "ls", {}),)),
            Message(role="tool", content="a b", tool_call_id="t1"),
            Message(role="user", content="  "),
            Message(role="assistant", content=" \n"),
        )
    )
    with FakeAnthropic([Reply(text="ok")]) as s:
        run(model("anthropic", s), request)
    turns = s.requests[0].body["messages"]
    assert turns[1]["content"] == [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result"]
    assert turns[3]["content"] == [{"type": "text", "text": "(empty)"}]


@pytest.mark.parametrize(
    "quirks", [{"bare_finish"}, {"usage_without_choices"}, {"no_usage"}, {"late_id"}]
)
def test_openai_compatible_server_quirks(quirks: set[str]) -> None:
    calls: list[tuple[str, str, dict[str, Any] | str]] = [("c1", "grep", {"pattern": "x"})]
    with FakeOpenAI([Reply(text="hi", tool_calls=calls, quirks=quirks)]) as s:
        message = settled(run(model("openai", s)))
    assert message.content == "hi"
    assert message.tool_calls == (ToolCall("c1", "grep", {"pattern": "x"}),)
    assert (message.usage is None) == ("no_usage" in quirks)


def test_openai_fragments_with_repeated_names_or_no_index() -> None:
    calls: list[tuple[str, str, dict[str, Any] | str]] = [
        ("a", "read_file", {"path": "1"}),
        ("b", "grep", {"pattern": "2"}),
    ]
    for quirks in ({"repeat_name"}, {"no_index", "repeat_name"}):
        with FakeOpenAI([Reply(tool_calls=calls, quirks=quirks)]) as s:
            message = settled(run(model("openai", s)))
        assert message.tool_calls == (
            ToolCall("a", "read_file", {"path": "1"}),
            ToolCall("b", "grep", {"pattern": "2"}),
        ), quirks


def test_openai_error_objects_in_the_stream_are_retried_only_when_transient() -> None:
    fatal = Reply(stream_error="context length exceeded", stream_error_type="invalid_request_error")
    with FakeOpenAI([fatal]) as s:
        events = run(model("openai", s))
    error = events[-1]
    assert isinstance(error, ProviderError) and not error.retryable
    assert "invalid_request_error" in error.message and len(s.requests) == 1
    with FakeOpenAI([Reply(stream_error="busy"), Reply(text="fine")]) as s:
        events = run(model("openai", s))
    assert settled(events).content == "fine" and len(s.requests) == 2


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_x_should_retry_overrides_the_status(flavour: str) -> None:
    no = Reply(status=503, headers={"x-should-retry": "false"})
    with server(flavour, no) as s:
        events = run(model(flavour, s))
    assert isinstance(events[-1], ProviderError) and len(s.requests) == 1
    yes = Reply(status=400, headers={"x-should-retry": "true"})
    with server(flavour, yes, Reply(text="ok")) as s:
        events = run(model(flavour, s))
    assert settled(events).content == "ok" and len(s.requests) == 2


def test_a_retry_after_longer_than_two_minutes_is_not_waited_for() -> None:
    with FakeOpenAI([Reply(status=429, retry_after=3600)]) as s:
        events = run(model("openai", s))
    error = events[-1]
    assert isinstance(error, ProviderError) and error.retry_after == 3600
    assert not any(isinstance(e, Notice) for e in events) and len(s.requests) == 1


def test_openai_max_tokens_name_depends_on_the_endpoint() -> None:
    import openai

    with FakeOpenAI([Reply(text="a"), Reply(text="b")]) as s:
        run(model("openai", s, max_tokens=100))  # a compatible server: the classic name
        official = OpenAIModel(
            ModelSpec("openai", "o3", key_env="FAKE_KEY", max_tokens=100, retry=FAST),
            client=openai.AsyncOpenAI(api_key="k", base_url=s.base_url, max_retries=0),
        )
        run(official)  # OpenAI's own API (no base_url configured): the newer name
    assert s.requests[0].body["max_tokens"] == 100
    assert s.requests[1].body["max_completion_tokens"] == 100
    assert "max_tokens" not in s.requests[1].body


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_whole_tool_turn_through_the_agent_loop(flavour: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    replies = [
        Reply(text="Reading.", tool_calls=[("c1", "read_file", {"path": "notes.txt"})]),
        Reply(text="It says 42."),
    ]
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id
    with server(flavour, *replies) as s, store.open_writer(sid) as writer:
        m = model(flavour, s)

        async def go() -> list[Any]:
            context = ToolContext(tmp_path, sid)
            try:
                return [
                    e
                    async for e in run_turn(
                        writer,
                        m,
                        "what do my notes say?",
                        toolbox=Toolbox(builtin_tools()),
                        permissions=AllowAll(),
                        context=context,
                    )
                ]
            finally:
                await close_model(m)

        events = asyncio.run(go())
        kinds = [e.event.kind for e in events if isinstance(e, Saved)]
        assert kinds == ["message", "message", "tool_call", "tool_result", "message"]
        result = next(
            e.event.record for e in events if isinstance(e, Saved) and e.event.kind == "tool_result"
        )
        assert isinstance(result, ToolResultRecord) and "the answer is 42" in result.content
        second = json.dumps(s.requests[1].body)
        assert "the answer is 42" in second and "c1" in second


def test_names_build_the_right_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    gpt = build_model("openai:gpt-4.1")
    claude = build_model("anthropic:claude-sonnet-4-5")
    assert isinstance(gpt, OpenAIModel) and gpt.name == "openai:gpt-4.1"
    assert isinstance(claude, AnthropicModel) and claude.context_window == 200_000
    with pytest.raises(ModelUnavailable, match="lacks the model"):
        build_model("openai:")


def test_a_missing_key_is_a_clear_error_unless_a_base_url_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ModelUnavailable, match="set ANTHROPIC_API_KEY"):
        build_model("anthropic:claude")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # a local server
    assert isinstance(build_model("openai:llama3"), OpenAIModel)


def test_openai_base_url_and_key_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeOpenAI([Reply(text="env ok")]) as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
        message = settled(run(build_model("openai:local-model")))
    assert message.content == "env ok"
    assert s.requests[0].headers["authorization"] == "Bearer sk-from-env"
    assert s.requests[0].body["model"] == "local-model"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cancelling_a_turn_closes_the_stream_and_marks_the_turn(
    flavour: str, tmp_path: Path
) -> None:
    from infai.agent.loop import INTERRUPTED_TURN

    # 2 s of answer left after the first delta (a cancel that lands after the end
    # is no cancel: a loaded machine can keep the test from looking for 0.2 s)
    slow = Reply(text="a slow and very long answer " * 20, pieces=20, pause=0.1)
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with server(flavour, slow) as s, store.open_writer(sid) as writer:
        m = model(flavour, s)

        async def go() -> list[Any]:
            seen: list[Any] = []

            async def consume() -> None:
                context = ToolContext(tmp_path, sid)
                async for event in run_turn(
                    writer, m, "talk", toolbox=Toolbox(), permissions=AllowAll(), context=context
                ):
                    seen.append(event)

            task = asyncio.create_task(consume())
            while not any(isinstance(e, Streamed) and isinstance(e.event, TextDelta) for e in seen):
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await close_model(m)
            return seen

        asyncio.run(go())
        assert s.disconnected.wait(10), "the server never saw the client go"
        contents = [e.record.content for e in writer.context().events]  # type: ignore[union-attr]
        # what had streamed is kept, marked interrupted (issue 13), then the marker
        assert contents[0] == "talk" and contents[-1] == INTERRUPTED_TURN
        assert len(contents) == 3 and contents[1].startswith("a slow and very long answer")

"""A reply cut at the output limit (OpenAI ``finish_reason=length``, Anthropic
``stop_reason=max_tokens``), through the real SDKs against the fake servers:
it is stored as cut (stop reason ``max_tokens``, tool calls or not), the user
is told, and a tool call cut off mid-arguments tells the model its arguments
were truncated, not that they were "not a JSON object"."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from fakeapi import FakeAnthropic, FakeOpenAI, FakeServer, Reply
from infai.agent import Saved, Streamed, run_turn
from infai.llm import Done, Message, Model, Notice, Request, StreamEvent, close_model
from infai.llm.anthropic_provider import AnthropicModel
from infai.llm.openai_provider import OpenAIModel
from infai.llm.providers import ModelSpec, RetryPolicy
from infai.store import MessageRecord, Store, ToolResultRecord
from infai.tools import AllowAll, Toolbox, ToolContext, builtin_tools

FLAVOURS = ["openai", "anthropic"]
#: what each provider's wire says for "stopped at the output limit"
CUT = {"openai": "length", "anthropic": "max_tokens"}
HALF_A_WRITE = '{"path": "notes.txt", "content": "line one\\nline tw'


def server(flavour: str, *replies: Reply) -> FakeServer:
    return FakeOpenAI(list(replies)) if flavour == "openai" else FakeAnthropic(list(replies))


def model(flavour: str, fake: FakeServer) -> Model:
    spec = ModelSpec(
        flavour,
        "fake-model",
        base_url=fake.base_url,
        key_env="FAKE_KEY",
        retry=RetryPolicy(attempts=1, base_delay=0.01, max_delay=0.01),
    )
    return OpenAIModel(spec) if flavour == "openai" else AnthropicModel(spec)


def stream(m: Model) -> list[StreamEvent]:
    async def go() -> list[StreamEvent]:
        try:
            request = Request(messages=(Message(role="user", content="hi"),))
            return [event async for event in m.stream(request)]
        finally:
            await close_model(m)

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-test")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_text_reply_cut_at_the_limit_is_marked_and_said(flavour: str) -> None:
    with server(flavour, Reply(text="The first half of", stop=CUT[flavour])) as s:
        events = stream(model(flavour, s))
    done = events[-1]
    assert isinstance(done, Done) and done.message.stop_reason == "max_tokens"
    assert done.message.content == "The first half of"
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert notices == ["the reply was cut at the model's output limit (max_tokens)"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_tool_call_cut_off_says_its_arguments_were_truncated(flavour: str) -> None:
    calls: list[tuple[str, str, dict[str, Any] | str]] = [
        ("c0", "read_file", {"path": "a.txt"}),
        ("c1", "write_file", HALF_A_WRITE),
    ]
    with server(flavour, Reply(text="Writing.", tool_calls=calls, stop=CUT[flavour])) as s:
        events = stream(model(flavour, s))
    done = events[-1]
    assert isinstance(done, Done) and done.message.stop_reason == "max_tokens"
    whole, cut = done.message.tool_calls
    assert whole.error is None and whole.arguments == {"path": "a.txt"}
    assert cut.error is not None and "not a JSON object" not in cut.error
    assert cut.error.startswith("its arguments were cut off: the reply reached the output limit")
    assert f"after {len(HALF_A_WRITE)} characters" in cut.error
    assert any(isinstance(e, Notice) and "while writing a tool call" in e.message for e in events)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_model_reads_that_its_cut_call_was_truncated(flavour: str, tmp_path: Path) -> None:
    replies = [
        Reply(tool_calls=[("c1", "write_file", HALF_A_WRITE)], stop=CUT[flavour]),
        Reply(text="I will write it in two parts."),
    ]
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id
    with server(flavour, *replies) as s, store.open_writer(sid) as writer:
        m = model(flavour, s)

        async def go() -> list[Any]:
            try:
                return [
                    e
                    async for e in run_turn(
                        writer,
                        m,
                        "write my notes",
                        toolbox=Toolbox(builtin_tools()),
                        permissions=AllowAll(),
                        context=ToolContext(tmp_path, sid),
                    )
                ]
            finally:
                await close_model(m)

        events = asyncio.run(go())
    saved = [e.event.record for e in events if isinstance(e, Saved)]
    replied = [r for r in saved if isinstance(r, MessageRecord) and r.stop_reason]
    assert replied[0].stop_reason == "max_tokens"  # the stored event says it was cut
    [result] = [r for r in saved if isinstance(r, ToolResultRecord)]
    assert result.is_error and "was not run: its arguments were cut off" in result.content
    assert not (tmp_path / "notes.txt").exists()
    said = [
        e.event.message for e in events if isinstance(e, Streamed) and isinstance(e.event, Notice)
    ]
    assert any("cut at the model's output limit" in n for n in said)
    second = json.dumps(s.requests[1].body)
    assert "its arguments were cut off" in second and "not a JSON object" not in second

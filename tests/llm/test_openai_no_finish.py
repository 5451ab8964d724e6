"""A Chat Completions stream that ends with ``data: [DONE]`` but never sends a
``finish_reason`` (some services behind OpenRouter) is a complete reply; one that
ends without either is cut short. Against :class:`fakeapi.FakeOpenAI`, through
the official SDK's real HTTP and SSE code."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fakeapi import FakeOpenAI, Reply
from infai.agent import Saved, run_turn
from infai.llm import Done, Message, ProviderError, Request, StreamEvent, close_model
from infai.llm.openai_provider import OpenAIModel
from infai.llm.providers import ModelSpec, RetryPolicy
from infai.store import MessageRecord, Store, ToolResultRecord
from infai.tools import AllowAll, Toolbox, ToolContext, builtin_tools

FAST = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.02)
HELLO = Request(messages=(Message(role="user", content="hi"),))


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-test")


def model(fake: FakeOpenAI) -> OpenAIModel:
    spec = ModelSpec("openai", "m", base_url=fake.base_url, key_env="FAKE_KEY", retry=FAST)
    return OpenAIModel(spec)


def stream(fake: FakeOpenAI) -> list[StreamEvent]:
    async def go() -> list[StreamEvent]:
        m = model(fake)
        try:
            return [event async for event in m.stream(HELLO)]
        finally:
            await close_model(m)

    return asyncio.run(go())


@pytest.mark.parametrize("quirks", [{"no_finish"}, {"no_finish", "no_usage"}])
def test_a_text_reply_ended_by_done_without_finish_reason_is_complete(quirks: set[str]) -> None:
    with FakeOpenAI([Reply(text="all of it", quirks=quirks)]) as s:
        events = stream(s)
    done = events[-1]
    assert isinstance(done, Done), done
    assert done.message.content == "all of it" and done.message.stop_reason == "end_turn"
    assert len(s.requests) == 1  # nothing was retried


def test_a_tool_call_ended_by_done_without_finish_reason_is_tool_use() -> None:
    call = ("c1", "read_file", {"path": "a.txt"})
    with FakeOpenAI([Reply(text="Reading.", tool_calls=[call], quirks={"no_finish"})]) as s:
        events = stream(s)
    done = events[-1]
    assert isinstance(done, Done), done
    assert done.message.stop_reason == "tool_use"
    [settled] = done.message.tool_calls
    assert (settled.id, settled.name, settled.arguments) == ("c1", "read_file", {"path": "a.txt"})


def test_a_stream_ended_without_done_or_finish_reason_is_still_cut_short() -> None:
    cut = Reply(text="half of", quirks={"no_finish", "no_done"})
    with FakeOpenAI([cut, cut]) as s:
        events = stream(s)
    error = events[-1]
    assert isinstance(error, ProviderError) and "ended before the reply did" in error.message


def test_a_finish_reason_without_done_is_still_accepted() -> None:
    """As before: a ``finish_reason`` alone says the reply is whole."""
    with FakeOpenAI([Reply(text="whole", quirks={"no_done"})]) as s:
        events = stream(s)
    assert isinstance(events[-1], Done) and events[-1].message.content == "whole"


def test_the_tool_call_runs_through_the_agent_loop(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    replies = [
        Reply(tool_calls=[("c1", "read_file", {"path": "notes.txt"})], quirks={"no_finish"}),
        Reply(text="It says 42.", quirks={"no_finish"}),
    ]
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id
    with FakeOpenAI(replies) as s, store.open_writer(sid) as writer:
        m = model(s)

        async def go() -> list[Any]:
            try:
                return [
                    e
                    async for e in run_turn(
                        writer,
                        m,
                        "what do my notes say?",
                        toolbox=Toolbox(builtin_tools()),
                        permissions=AllowAll(),
                        context=ToolContext(tmp_path, sid),
                    )
                ]
            finally:
                await close_model(m)

        events = asyncio.run(go())
    records = [e.event.record for e in events if isinstance(e, Saved)]
    [result] = [r for r in records if isinstance(r, ToolResultRecord)]
    assert not result.is_error and "the answer is 42" in result.content
    last = records[-1]
    assert isinstance(last, MessageRecord) and last.content == "It says 42."
    assert len(s.requests) == 2

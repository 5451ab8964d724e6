"""A subagent's permission question, through the API: its own call's arguments, who asks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_server import Running, harnesses

from infai.llm import Message, ToolCall
from infai.llm.fakes import ScriptedModel


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.fixture
def make(tmp_path: Path, work: Path) -> Iterator[Callable[..., Running]]:
    yield from harnesses(tmp_path / "home", work)


def test_a_subagents_question_shows_its_own_call(make: Callable[..., Running], work: Path) -> None:
    task = ToolCall("t1", "task", {"prompt": "write the file"})
    write = ToolCall("w1", "write_file", {"path": "sub.txt", "content": "from the child"})
    replies: list[Any] = [
        Message(role="assistant", tool_calls=(task,)),
        Message(role="assistant", tool_calls=(write,)),  # the subagent's call
        "the child is done",
        "all done",
    ]
    h = make(lambda name: ScriptedModel(replies))
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "delegate")
        question = stream.until("approval")[-1].data
        assert question["tool"] == "write_file"
        assert question["arguments"] == {"path": "sub.txt", "content": "from the child"}
        assert question["caller"] and question["call_event_id"] is None
        answer = {"id": question["id"], "answer": "deny"}
        assert h.client.post(f"/v1/sessions/{sid}/approvals", json=answer).status_code == 200
        stream.until("turn_ended")
    assert not (work / "sub.txt").exists()

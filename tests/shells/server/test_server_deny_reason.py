"""Deny with a reason, through the API: the call's result (what the model is given next)
holds the user's words."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_server import Running, harnesses

from infai.llm import Message, ToolCall
from infai.llm.fakes import ScriptedModel
from infai.store import ToolResultRecord


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.fixture
def make(tmp_path: Path, work: Path) -> Iterator[Callable[..., Running]]:
    yield from harnesses(tmp_path / "home", work)


def test_a_denial_with_a_reason_reaches_the_model(make: Callable[..., Running], work: Path) -> None:
    write = ToolCall("w1", "write_file", {"path": "a.txt", "content": "x"})
    model = ScriptedModel([Message(role="assistant", tool_calls=(write,)), "understood"])
    h = make(lambda name: model)
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "write it")
        question = stream.until("approval")[-1].data
        url = f"/v1/sessions/{sid}/approvals"
        bad: list[dict[str, Any]] = [
            {"id": question["id"], "answer": "allow", "reason": "no"},
            {"id": question["id"], "answer": "deny", "reason": "   "},
        ]
        for body in bad:
            assert h.client.post(url, json=body).status_code == 422
        body = {"id": question["id"], "answer": "deny", "reason": "use b.txt instead"}
        assert h.client.post(url, json=body).status_code == 200
        resolved = stream.until("approval_resolved")[-1].data
        assert resolved["answer"] == "deny" and resolved["reason"] == "use b.txt instead"
        stream.until("turn_ended")
    assert not (work / "a.txt").exists()
    with h.store.open_reader(sid) as reader:
        [result] = [e.record for e in reader.context().events if e.kind == "tool_result"]
    assert isinstance(result, ToolResultRecord) and result.is_error
    assert "denied by the user: use b.txt instead" in result.content

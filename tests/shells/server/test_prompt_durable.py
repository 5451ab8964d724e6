"""An accepted prompt is a stored prompt: ``POST /prompt`` answers 202 only once the
prompt is durable, and names its event.

The prompt's append is slowed (a slow disk), so a cancel sent the moment the 202
arrives would, if the 202 came first, land before or during it: the prompt lost,
or kept with no interruption marker. Answered after it, the cancel finds the
turn past its prompt, and the marker follows it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_server import Running, harnesses

from infai.llm import Done, Message, Request, StreamEvent
from infai.store import MessageRecord
from infai.store.file.writer import SessionWriter

SLOW_APPEND = 0.3  # seconds the prompt's append takes (far more than a request's trip)


class Silent:
    """A model that never says anything until cancelled."""

    name = "silent"
    context_window = 128_000

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        await asyncio.Event().wait()
        yield Done(Message(role="assistant"))


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    work = tmp_path / "work"
    work.mkdir()
    yield from harnesses(tmp_path / "home", work)


@pytest.fixture
def slow_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    real = SessionWriter.append

    def append(self: SessionWriter, record: Any, role: str, **kw: Any) -> Any:
        if role == "user" and not (
            isinstance(record, MessageRecord) and record.metadata.get("interrupted")
        ):
            time.sleep(SLOW_APPEND)  # a slow disk under the prompt (in a worker thread)
        return real(self, record, role, **kw)

    monkeypatch.setattr(SessionWriter, "append", append)


@pytest.mark.parametrize("stream", [False, True])
def test_a_cancel_right_after_the_202_finds_the_prompt_and_marks_it(
    make: Callable[..., Running], slow_prompts: None, stream: bool
) -> None:
    h = make(lambda name: Silent())
    sid = h.new_session()
    url = f"/v1/sessions/{sid}/prompt"
    body = {"text": "keep me", "stream": stream}
    if stream:
        with h.client.stream("POST", url, json=body) as response:
            assert response.status_code == 200
            prompt, turn = response.headers["infai-prompt"], response.headers["infai-turn"]
            cancelled = h.client.post(f"/v1/sessions/{sid}/cancel", json={"turn": turn})
    else:
        response = h.client.post(url, json=body)
        assert response.status_code == 202, response.text
        answer = response.json()
        prompt, turn = answer["prompt"], answer["turn"]
        assert set(answer) == {"turn", "session", "prompt"}
        cancelled = h.client.post(f"/v1/sessions/{sid}/cancel", json={"turn": turn})
    assert cancelled.json() == {"turn": turn, "outcome": "cancelled"}
    events = h.client.get(f"/v1/sessions/{sid}/events").json()["events"]
    messages = [e for e in events if e["kind"] == "message"]
    assert [m["preview"] for m in messages] == ["keep me", "[turn interrupted]"]
    assert messages[0]["id"] == prompt

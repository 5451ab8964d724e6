"""A plugin's hook handler that runs past its hook's timeout is a non-blocking
error, as a command's timeout is: the turn goes on, the run is recorded as timed
out and the user is told. What differs from a command (killed) is said too: a
coroutine is cancelled, a plain function cannot be stopped and runs on in its
worker thread, its answer ignored.

The handler is found by name through the plugin registry; here that lookup is
replaced (installing a plugin wheel is tests/agent/test_plugins.py's)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession, Streamed, TurnEnded
from infai.agent.hooks import HookSpec
from infai.llm import Message, Notice, ScriptedModel, ToolCall, ToolSpec
from infai.store import HookRecord, Store, ToolResultRecord
from infai.tools import AllowAll, Toolbox, ToolContext, ToolOutput

TIMEOUT = 0.2


class Echo:
    spec = ToolSpec("echo", "Says ok.", {"type": "object", "properties": {}})

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        return ToolOutput("ok")


def turn_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handler: Any, after: Any = None
) -> tuple[Any, ...]:
    """The turn's events and the session's records; ``after()`` runs once the turn
    is over, in its event loop (whose end waits for its worker threads)."""
    monkeypatch.setattr("infai.agent.hooks.hook_handler", lambda name: handler)
    store = Store(tmp_path / "home")
    sid = store.create_session(working_dir=str(tmp_path)).id
    call = Message(role="assistant", tool_calls=(ToolCall("c1", "echo", {}),))
    spec = HookSpec("PreToolUse", "handler:slow", timeout=TIMEOUT, handler="slow")
    session = AgentSession(
        store,
        sid,
        model=ScriptedModel([call, "done"]),
        toolbox=Toolbox([Echo()]),
        permissions=AllowAll(),
        hooks=[spec],
    )

    async def scenario() -> list[Any]:
        seen = [item async for item in session.prompt("go")]
        if after is not None:
            after()
        return seen

    with session:
        seen = asyncio.run(scenario())
        view = session.view
        kept = [view.event(e.id, resolve=True).record for e in view.entries()]
    return seen, kept


def said(seen: list[Any]) -> str:
    return "\n".join(
        i.event.message for i in seen if isinstance(i, Streamed) and isinstance(i.event, Notice)
    )


def test_a_plain_handler_past_its_timeout_runs_on_and_the_turn_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, finished = threading.Event(), threading.Event()

    def slow(payload: dict[str, Any]) -> dict[str, Any]:
        release.wait(30)
        finished.set()
        return {"decision": "block", "reason": "too late to count"}

    running: list[bool] = []

    def after() -> None:
        running.append(not finished.is_set())
        release.set()

    try:
        seen, kept = turn_with(tmp_path, monkeypatch, slow, after)
    finally:
        release.set()
    assert running == [True]  # still running when the turn was over: it did not wait
    assert finished.wait(10)  # it ran on in its thread
    assert seen[-1] == TurnEnded("done")
    result = next(r for r in kept if isinstance(r, ToolResultRecord))
    assert result.content == "ok" and not result.is_error  # its late block was ignored
    run = next(r for r in kept if isinstance(r, HookRecord))
    assert (run.command, run.timed_out, run.decision) == ("handler:slow", True, "error")
    assert run.stderr is not None and "runs on in its thread" in run.stderr
    assert f"failed (timed out after {TIMEOUT:g} s)" in said(seen)


def test_a_coroutine_handler_past_its_timeout_is_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cancelled = threading.Event()

    async def slow(payload: dict[str, Any]) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    seen, kept = turn_with(tmp_path, monkeypatch, slow)
    assert cancelled.is_set()
    assert seen[-1] == TurnEnded("done")
    run = next(r for r in kept if isinstance(r, HookRecord))
    assert (run.timed_out, run.decision) == (True, "error")
    assert run.stderr == "the handler was cancelled"

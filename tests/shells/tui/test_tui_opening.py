"""The first frame does not wait for the session: opening it may import the MCP
SDK and start servers (the screen stayed blank for seconds). With a backend whose
open waits until the test lets it: the app is mounted and drawn with its prompt
box focused and "opening session…" in the status bar while no session is open;
prompts sent meanwhile are queued, and sent in order once it is open; a draft
typed meanwhile stays in the box.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from textual.pilot import Pilot

from infai.agent import AgentSession
from infai.shells.tui import InfaiApp
from infai.shells.tui.backend import LocalBackend
from infai.shells.tui.panels import PromptInput, StatusBar
from infai.shells.tui.seam import TuiHarness
from infai.store import MessageRecord
from tui_pilot import ClosingModel, harness, run_app, send, until

#: on the old app the test gets the pilot only after the open; it must not hang then
RELEASE_ANYWAY_S = 5.0


class GatedBackend(LocalBackend):
    """The local store's sessions, opened only once :attr:`gate` is set."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def open(self, harness: TuiHarness, session_id: str | None) -> tuple[AgentSession, bool]:
        await self.gate.wait()
        return await super().open(harness, session_id)


def test_the_app_draws_and_queues_prompts_before_the_session_opens(tmp_path: Path) -> None:
    space = harness(tmp_path)
    sent: list[str] = []

    async def go() -> None:
        backend = GatedBackend()
        asyncio.get_running_loop().call_later(RELEASE_ANYWAY_S, backend.gate.set)
        app = InfaiApp(space, backend=backend)
        async with app.run_test(size=(80, 24)) as pilot:
            assert not backend.gate.is_set(), "the app waited for the session to open"
            await pilot.pause()
            assert app.session is None and app.opening
            assert isinstance(app.focused, PromptInput)
            assert "opening session" in str(app.query_one(StatusBar).render())
            await send(pilot, "one")
            await send(pilot, "two")
            await pilot.press(*"draft")
            assert app.queued == ["one", "two"] and app.session is None
            backend.gate.set()
            idle = lambda: not app.opening and not app.busy and not app.queued  # noqa: E731
            await until(pilot, idle, "the queued prompts sent")
            await until(pilot, lambda: not app.busy, "the last turn's end")
            assert app.prompt.prompt_text() == "draft"
            session = app.session
            assert session is not None
            with space.store.open_reader(session.session_id) as reader:
                events = reader.context().events
            sent.extend(
                e.record.content
                for e in events
                if e.role == "user" and isinstance(e.record, MessageRecord)
            )
            await app.action_quit()

    asyncio.run(go())
    assert sent == ["one", "two"]


class PreparedModel(ClosingModel):
    """A model with an SDK to import (as :class:`~infai.llm.providers.SdkModel`):
    notes the thread :meth:`prepare` ran in."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared_in: list[threading.Thread] = []

    def prepare(self) -> None:
        self.prepared_in.append(threading.current_thread())


def test_the_models_sdk_is_imported_in_a_thread_once_the_session_is_open(
    tmp_path: Path,
) -> None:
    model = PreparedModel()
    app = InfaiApp(harness(tmp_path, model))

    async def scenario(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: bool(model.prepared_in), "prepare")
        assert app.session is not None

    run_app(app, scenario, (80, 24))
    assert model.prepared_in[0] is not threading.main_thread()


def test_quitting_while_the_session_opens_ends_the_app(tmp_path: Path) -> None:
    """Ctrl-C twice before the session is open: the open stops, the app ends, and
    no session was made (the open was cancelled before it made one)."""
    space = harness(tmp_path)

    async def go() -> InfaiApp:
        backend = GatedBackend()
        app = InfaiApp(space, backend=backend)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app._opener is not None, "the open to start")
            await send(pilot, "never sent")
            await pilot.press("ctrl+c", "ctrl+c")
            await until(pilot, lambda: not app.is_running, "the app to end")
        return app

    app = asyncio.run(go())
    assert app.session is None and app.left_session is None
    assert space.store.list_sessions() == []


def test_a_model_switched_to_with_slash_model_is_warmed_in_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/model NAME``: the new model's SDK is imported while the user types the
    next prompt, off the event loop, not on that prompt's first request."""
    space = harness(tmp_path)
    warm = PreparedModel()
    monkeypatch.setattr(space, "_build", lambda name, config: warm)
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await app.switch_model("warm")
        await until(pilot, lambda: bool(warm.prepared_in), "prepare")

    run_app(app, scenario, (80, 24))
    assert warm.prepared_in[0] is not threading.main_thread()

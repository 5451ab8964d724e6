"""Compaction: /compact as a turn of its own, and an automatic one shown until it is done.

Driven by Textual's pilot at 80x24 and at a small 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual.pilot import Pilot

from infai.llm import Done, Message, Request, StreamEvent
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import ChatView, UserMessage
from infai.shells.tui.panels import MODEL_CHARS, StatusBar, short_model
from infai.shells.tui.prompt import PromptInput
from infai.store import Usage
from tui_pilot import SIZES, ClosingModel, StoreCalls, harness, run_app, send, until


@pytest.mark.parametrize("size", SIZES)
def test_compact_command_appends_a_boundary(tmp_path: Path, size: tuple[int, int]) -> None:
    space = harness(tmp_path)  # the offline model answers summaries too
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "hello")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "/compact")
        await until(pilot, lambda: bool(app.query(".boundary")), "the compaction boundary")
        assert not app.query(UserMessage)  # the context now starts at the summary

    run_app(app, scenario, size)
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        assert reader.context().events[0].kind == "compaction"


def test_a_compaction_is_a_turn_of_its_own(tmp_path: Path) -> None:
    model = ClosingModel("answer")
    space = harness(tmp_path, model)
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "/compact")
        await until(pilot, lambda: app.busy, "the compaction to start")
        await send(pilot, "two")  # queued while compacting: sent once the summary is in
        assert app.queued == ["two"] and app.query_one("#prompt", PromptInput).value == ""
        model.release.set()
        await until(pilot, lambda: not app.busy and len(app.query(UserMessage)) == 1)
        assert app.queued == []

    run_app(app, scenario, (80, 24))
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        kinds = [e.kind for e in reader.context().events]
    assert kinds == ["compaction", "message", "message"]  # two came after the summary


class FullModel(ClosingModel):
    """Every reply reports 900 of a 1,000-token window in use: the next prompt
    compacts first (the summary waits for ``release``)."""

    context_window = 1_000

    def __init__(self, name: str) -> None:
        super().__init__("an answer")
        self.name = name

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        if request.purpose == "summary":
            async for event in super().stream(request):
                yield event
            return
        usage = Usage(input_tokens=900, output_tokens=10)
        yield Done(Message(role="assistant", content="an answer", usage=usage))


@pytest.mark.parametrize("size", SIZES)
def test_auto_compaction_is_shown_until_done_and_its_notice_stays(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    model = FullModel("anthropic:claude-sonnet-4-5")
    app = InfaiApp(harness(tmp_path, model))

    def bar() -> str:
        return str(app.query_one(StatusBar).render())

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "two")
        await until(pilot, lambda: "compacting" in bar(), "the compaction notice")
        notice = "compacting: 910 of 1,000 tokens in use"
        # first; whole where the bar has room, else shortened so HEAD still fits
        assert bar().startswith(f" {notice}" if app.size.width >= 80 else " compacting: ")
        assert "HEAD #" in bar() and len(bar()) <= app.size.width
        model.release.set()
        await until(pilot, lambda: not app.busy, "the turn's end")
        assert bar().startswith(" ✓ compacted ") and "HEAD #" in bar()
        # the model's name where there is room (a narrow bar keeps HEAD and the tokens)
        assert "anthropic:claude-sonnet-4-5" in bar() or app.size.width < 80
        chat = app.query_one(ChatView)
        notices = [str(n.render()) for n in chat.query(".notice")]
        assert any(n.startswith("compacted (910 of 1,000 tokens in use before)") for n in notices)
        assert chat.query(".boundary") and len(chat.query(UserMessage)) == 1  # after the reload

    run_app(app, scenario, size)
    assert short_model("scripted:/tmp/" + "x/" * 40 + "replies.json").endswith("/replies.json")
    assert len(short_model("scripted:/tmp/" + "x/" * 40 + "replies.json")) == MODEL_CHARS


def test_a_compaction_is_shown_from_its_saved_event_not_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary the session publishes when it is saved is what the chat and the
    status bar show, manual or automatic: no reload, no store call of the TUI's own
    for /compact, and what is shown is what a reload shows."""
    model = FullModel("full")
    model.release.set()  # summaries answer at once
    space = harness(tmp_path, model)
    sid = space.new_session()
    calls = StoreCalls(monkeypatch, space.store, sid)
    app = InfaiApp(space, sid)
    reloads: list[str] = []
    real = InfaiApp.reload

    async def counted(self: InfaiApp) -> None:
        reloads.append("reload")
        await real(self)

    monkeypatch.setattr(InfaiApp, "reload", counted)

    def shown() -> tuple[str, int, int]:
        chat = app.query_one(ChatView)
        bar = str(app.query_one(StatusBar).render()).split("│")[0]
        return bar, len(chat.query(".boundary")), len(chat.query(UserMessage))

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        await until(pilot, lambda: not app.busy)
        before, opened = calls.count(), len(reloads)
        await send(pilot, "/compact")
        await until(pilot, lambda: not app.busy and bool(app.query(".boundary")), "/compact")
        assert (calls.count(), len(reloads)) == (before, opened), calls.calls[before:]
        assert not app.query(UserMessage)
        await send(pilot, "two")  # answered with 900 of 1000 tokens in use
        await until(pilot, lambda: not app.busy)
        await send(pilot, "three")  # compacts first
        await until(pilot, lambda: not app.busy and "✓ compacted" in shown()[0], "the auto one")
        assert len(reloads) == opened
        assert app.session is not None
        kinds = [entry.kind for entry in app.session.view.entries()]
        # one, two and three with their answers, two summaries, the prompt stated again,
        # and the first turn's files snapshot (the later turns' files are unchanged)
        assert len(kinds) == 10 and kinds.count("snapshot") == 1, kinds
        live = shown()
        assert live[1:] == (1, 1)  # the summary, then the prompt stated again
        await app.reload()
        assert shown() == live  # what a reload shows

    run_app(app, scenario, (80, 24))

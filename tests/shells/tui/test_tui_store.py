"""The TUI over its store: PostgreSQL as well as files, and a failure to save shown, not swallowed.

Driven by Textual's pilot at 80x24 and at a small 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from infai.llm import ScriptedModel
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import AssistantMessage
from infai.shells.tui.panels import StatusBar, Timeline
from infai.shells.workspace import Workspace
from tui_pilot import run_app, send, until, walk, workspace


def test_the_tui_on_a_postgresql_store(pg_url: str, tmp_path: Path) -> None:
    from infai.store.pg import PgStore

    store = PgStore(pg_url)
    work = tmp_path / "work"
    work.mkdir()
    space = Workspace(store, work)
    space.model = ScriptedModel(["stored in the database"])
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "hello")
        await until(pilot, lambda: not app.busy and bool(app.query(AssistantMessage)))
        await pilot.press("ctrl+t")
        assert len([n for n in walk(app.query_one(Timeline).root) if n.data]) == 2

    try:
        run_app(app, scenario, (80, 24))
        [info] = store.list_sessions()
        with store.open_reader(info.id) as reader:
            contents = [e.record.content for e in reader.context().events]  # type: ignore[union-attr]
        assert contents == ["hello", "stored in the database"]
    finally:
        store.close()


def test_a_store_failure_mid_turn_is_shown_not_swallowed(tmp_path: Path) -> None:
    from infai.store import StoreIOError

    app = InfaiApp(workspace(tmp_path, ScriptedModel(["a reply that cannot be saved"])))

    async def scenario(pilot: Pilot[None]) -> None:
        assert app.session is not None
        writer = app.session.writer
        real = writer.append_batch

        def failing(*args: Any, **kwargs: Any) -> Any:
            raise StoreIOError(28, "No space left on device")

        writer.append_batch = failing
        await send(pilot, "hi")
        await until(pilot, lambda: not app.busy)
        writer.append_batch = real
        assert any("could not be saved" in str(n.render()) for n in app.query(".notice"))
        assert "NOT saved" in str(app.query_one(StatusBar).render())
        assert not app.query(AssistantMessage)

    run_app(app, scenario, (80, 24))

"""The prompt box (issue 13, bug 5 and the prompt box's expectations): keys typed
right after Enter start the next prompt, whole; a paste that arrives as keys
(no bracketed paste) is one prompt; Ctrl-J inserts a newline; a prompt sent
during a turn is queued, shown, can be taken back with Up, and is sent when the
turn ends; Up/Down walk the history of this directory, kept in the store's home.

A terminal's read delivers a paste's keys together: here they are posted to the
app in one burst, without waiting between them (as the driver does), with their
stamps set explicitly; typing ahead is a burst whose stamps are a human's gap
apart. No wall-clock gap between pilot presses matters.

Driven by Textual's pilot at 80x24 and at 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual import events
from textual.pilot import Pilot

from infai.shells.tui import InfaiApp
from infai.shells.tui.panels import QueueBar
from infai.shells.tui.prompt import PromptInput
from infai.store import MessageRecord, SessionStore
from tui_pilot import SIZES, GatedModel, harness, run_app, until


def burst(app: InfaiApp, keys: str, start: float, gap: float = 0.0) -> None:
    """Post ``keys`` (``\\r`` is Enter) to the app at once, as one read of the
    terminal delivers them; key i is stamped ``start + i * gap``."""
    for index, char in enumerate(keys):
        key = events.Key("enter", "\r") if char == "\r" else events.Key(char, char)
        key.time = start + index * gap
        app.post_message(key)


def user_prompts(store: SessionStore) -> list[str]:
    [info] = store.list_sessions()
    with store.open_reader(info.id) as reader:
        events_ = reader.context().events
    records = [e.record for e in events_ if e.role == "user"]
    return [r.content for r in records if isinstance(r, MessageRecord)]


@pytest.mark.parametrize("size", SIZES)
def test_type_ahead_pastes_as_keys_newlines_the_queue_and_history(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    model = GatedModel()  # the first reply waits for release; later ones do not
    space = harness(tmp_path, model)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    earlier = [
        {"dir": str(space.working_dir), "text": "from an earlier run"},
        {"dir": str(tmp_path / "elsewhere"), "text": "another project's prompt"},
    ]
    (home / "tui-history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in earlier))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        prompt = app.query_one("#prompt", PromptInput)
        await until(pilot, lambda: app.session is not None and prompt.past != [])
        # "p1" Enter, then "XYZ" typed a person's gap (50 ms) after it, all received
        # before the box handles the Enter: p1 is sent alone, XYZ starts the next one
        burst(app, "p1\r", 100.0, gap=0.001)
        burst(app, "XYZ", 100.05, gap=0.05)
        await until(pilot, lambda: prompt.value == "XYZ", "XYZ in the box")
        await until(pilot, lambda: app.busy, "the first turn")
        # sent during the turn: queued, shown, the box is free
        await pilot.press("enter")
        await until(pilot, lambda: app.queued == ["XYZ"], "XYZ queued")
        assert prompt.value == "" and app.query_one(QueueBar).display
        assert "queued: XYZ" in str(app.query_one(QueueBar).render())
        await pilot.press("up")  # taken back to edit: no longer queued
        assert prompt.value == "XYZ" and app.queued == []
        assert not app.query_one(QueueBar).display
        await pilot.press("!", "enter")
        await until(pilot, lambda: app.queued == ["XYZ!"], "XYZ! queued")
        # a paste without bracketed paste: its line breaks come as Enter, all at once
        burst(app, "line a\rline b\rline c\r", 200.0, gap=0.0001)
        await until(pilot, lambda: len(app.queued) == 2, "the paste, queued whole")
        assert app.queued[1] == "line a\nline b\nline c"
        # Ctrl-J: a newline in the box
        await pilot.press("m", "ctrl+j", "n")
        assert prompt.value == "m\nn"
        await pilot.press("enter")
        await until(pilot, lambda: len(app.queued) == 3, "m/n queued")
        model.release.set()  # the first turn ends; the queue is sent in order
        done = lambda: not app.busy and not app.queued  # noqa: E731
        await until(pilot, done, "the queue sent", tries=3000)
        assert app.head.count == 9  # four turns of two, after the first turn's files
        # history: newest first on Up, this directory only, the draft back on Down
        await pilot.press("d", "r", "a", "f", "t")
        for expected in ("m\nn", "line a\nline b\nline c", "XYZ!", "p1", "from an earlier run"):
            await pilot.press("up")
            assert prompt.prompt_text() == expected
        await pilot.press("up")  # the oldest stays
        assert prompt.value == "from an earlier run"
        await pilot.press("down", "down", "down", "down", "down")
        assert prompt.value == "draft"

    run_app(app, scenario, size)
    assert user_prompts(space.store) == ["p1", "XYZ!", "line a\nline b\nline c", "m\nn"]
    kept = [json.loads(line) for line in (home / "tui-history.jsonl").read_text().splitlines()]
    here = [item["text"] for item in kept if item["dir"] == str(space.working_dir)]
    assert here == ["from an earlier run", "p1", "XYZ!", "line a\nline b\nline c", "m\nn"]


def test_the_history_file_is_the_owners_alone(tmp_path: Path) -> None:
    from infai.shells.tui import history

    history.append(tmp_path / "home", tmp_path, "a secret prompt")
    assert (tmp_path / "home" / history.FILE).stat().st_mode & 0o077 == 0
    with (tmp_path / "home" / history.FILE).open("a") as out:  # torn and foreign lines
        out.write('not json\n{"text": 3}\n')
    history.append(tmp_path / "home", tmp_path, "next")
    assert history.load(tmp_path / "home", tmp_path) == ["a secret prompt", "next"]

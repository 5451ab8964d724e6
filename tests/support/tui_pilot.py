"""What the TUI's pilot tests share: models that stream on cue, a harness under
tmp, running the app at a size, and waiting on what the screen shows.

Textual's pilot drives the app inside the test process; each test checks the
screen at 80x24 and at a small 60x20 (:data:`SIZES`) where the layout matters.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from textual import events
from textual.keys import _character_to_key
from textual.pilot import Pilot

from infai.agent import Config, Harness
from infai.llm import Done, Message, Request, StreamEvent, TextDelta, ToolCall
from infai.shells.tui import InfaiApp
from infai.shells.tui.modals import GRACE, ApprovalScreen
from infai.shells.tui.panels import PromptInput
from infai.store import Store

SIZES = [(80, 24), (60, 20)]


class GatedModel:
    """Streams "Hello " at once, the rest only when ``release`` is set."""

    name = "gated"
    context_window = 10_000

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        yield TextDelta("Hello ")
        await self.release.wait()
        yield TextDelta("world.")
        yield Done(Message(role="assistant", content="Hello world.", stop_reason="end_turn"))


def harness(tmp_path: Path, model: Any = None, allow: tuple[str, ...] = ()) -> Harness:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    space = Harness(Store(tmp_path / "home"), work, allow=allow)
    if model is not None:
        space.model = model
    return space


def files_workspace(tmp_path: Path, model: Any = None, allow: tuple[str, ...] = ()) -> Harness:
    """A harness whose sessions record their files on the timeline, by its own
    configuration (checkpoints on whatever the tests' shared one says); ``allow``:
    rules that let the model's tool calls run without asking."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    config = Config(default_model="offline")
    space = Harness(Store(tmp_path / "home"), work, config=config, allow=allow)
    if model is not None:
        space.model = model
    return space


def run_app(
    app: InfaiApp, scenario: Callable[[Pilot[None]], Awaitable[None]], size: tuple[int, int]
) -> None:
    async def go() -> None:
        async with app.run_test(size=size) as pilot:
            try:
                # the session opens after the first frame: a scenario starts once it has
                await until(pilot, lambda: not app.opening, "the session to open")
                await scenario(pilot)
            except BaseException:
                # end the app as a person does before the failure is reported:
                # Textual's own teardown waits forever on a turn that is waiting
                # for an answer to a dialog (a failed test hung CI for 600 s)
                with suppress(Exception):
                    await asyncio.wait_for(app.action_quit(), 30)
                raise

    asyncio.run(go())


async def until(
    pilot: Pilot[None], condition: Callable[[], bool], what: str = "", tries: int = 1500
) -> None:
    for _ in range(tries):
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"timed out waiting for {what or condition}")


async def typed(pilot: Pilot[None], text: str) -> None:
    """Type ``text`` key by key as a fast typist does: each key goes through the
    app's queue as :meth:`Pilot.press` sends it, in order, and then the app is
    waited for once (``press`` waits for the app to be idle after every key, at
    least 40 ms a key: most of a pilot test's time)."""
    driver = pilot.app._driver
    assert driver is not None
    for c in text:
        key = "space" if c == " " else c if c.isalnum() else _character_to_key(c)
        driver.send_message(events.Key(key, c))
    await pilot.pause()


async def send(pilot: Pilot[None], text: str) -> None:
    """Type ``text`` key by key (letters and spaces) and press Enter; in the prompt,
    wait until the app has taken what was sent (started its turn, queued it, run
    the command), so that a test's next look at the app sees it."""
    await typed(pilot, text)
    app = pilot.app
    in_prompt = isinstance(app, InfaiApp) and isinstance(app.focused, PromptInput)
    taken = app.taken if isinstance(app, InfaiApp) else 0
    await pilot.press("enter")
    if in_prompt:
        taken_now = lambda: not app.is_running or getattr(app, "taken", 0) > taken  # noqa: E731
        await until(pilot, taken_now, "the prompt")


async def asked(pilot: Pilot[None], app: InfaiApp) -> ApprovalScreen:
    """Wait for the approval dialog, then for its keys to count (the typing grace)."""
    await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the approval modal")
    await pilot.pause(GRACE + 0.05)
    assert isinstance(app.screen, ApprovalScreen)
    return app.screen


def inside_screen(app: InfaiApp, selector: str) -> bool:
    region = app.screen.query_one(selector).region
    width, height = app.size
    return region.height > 0 and region.right <= width and region.bottom <= height


def write_call(path: str) -> Message:
    arguments = {"path": path, "content": "hello\n"}
    return Message(role="assistant", tool_calls=(ToolCall("w1", "write_file", arguments),))


def bash_call(command: str) -> Message:
    """A reply calling the bash tool: files changed by the agent, not by hand."""
    return Message(role="assistant", tool_calls=(ToolCall("b1", "bash", {"command": command}),))


def walk(node: Any) -> list[Any]:
    out = []
    for child in node.children:
        out.append(child)
        out += walk(child)
    return out


class ClosingModel(GatedModel):
    """A gated model that counts how often it was closed."""

    def __init__(self, reply: str = "Hello world.") -> None:
        super().__init__()
        self.closed = 0
        self.reply = reply

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        if request.purpose == "summary":
            await self.release.wait()
            summary = '{"summary": "s", "goals": []}'
            yield Done(Message(role="assistant", content=summary))
            return
        for line in self.reply.splitlines(keepends=True):
            yield TextDelta(line)
        yield Done(Message(role="assistant", content=self.reply, stop_reason="end_turn"))

    async def aclose(self) -> None:
        self.closed += 1


#: a reply too large for a chunk line (over 16 KiB): the store keeps it in a blob
BIG_REPLY = "# Report\n\n" + "\n\n".join(f"Paragraph {i} with **bold** words." for i in range(700))


class StoreCalls:
    """Records the store calls the TUI's own code makes (not the agent's), and
    whether each ran with an event loop running in its thread.

    Wraps the methods of the store's class, of its writer's class and of its
    reader's (the session's view between turns), undone by ``monkeypatch``, and
    counts a call only when a frame of ``infai/shells/tui`` is on its stack
    nearer than the agent's turn machinery: a read the TUI hands to a thread
    counts too (the function it handed over is on the thread's stack), the
    agent's own appends and reads during a turn do not.
    """

    STORE: tuple[str, ...] = ("info", "list_sessions", "create_session", "update_info")
    STORE += ("remove_session", "open_writer", "open_reader")
    WRITER = ("entry", "entry_at", "entries", "path", "event", "resolve", "context", "close")

    def __init__(self, monkeypatch: Any, store: Any, session_id: str) -> None:
        #: (method, ran on the event loop's thread)
        self.calls: list[tuple[str, bool]] = []
        with store.open_writer(session_id) as writer:
            writer_class = type(writer)
        with store.open_reader(session_id) as reader:  # the view between turns
            reader_class = type(reader)
        classes = [(type(store), self.STORE), (writer_class, self.WRITER)]
        if reader_class is not writer_class:  # the writer's own first (it may inherit)
            classes.append((reader_class, self.WRITER))
        for cls, names in classes:
            for name in names:
                monkeypatch.setattr(cls, name, self._wrap(name, getattr(cls, name)))

    def _wrap(self, name: str, real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _from_tui():
                on_loop = asyncio_running_loop() is not None
                self.calls.append((name, on_loop))
            return real(*args, **kwargs)

        return wrapper

    def count(self) -> int:
        return len(self.calls)

    def on_loop(self) -> list[str]:
        return [name for name, on_loop in self.calls if on_loop]


def asyncio_running_loop() -> Any:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


#: the TUI's code, and the agent's turn machinery (a store call below it is the agent's)
TUI = "/infai/shells/tui/"
TURN: tuple[str, ...] = (
    "/infai/agent/loop.py",
    "/infai/agent/context.py",
    "/infai/agent/compaction.py",
)
TURN += ("/infai/tools/",)


#: the TUI's timer that looks for other processes' appends: not counted (it runs
#: every second while idle, whatever the test does; it runs in a thread too)
LOOK = "/infai/shells/tui/elsewhere.py"


def _from_tui() -> bool:
    """Whether the nearest caller that is the TUI or the agent's turn is the TUI
    (and not its look for other processes' appends)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename.replace(os.sep, "/")
        if LOOK in name:
            return False
        if TUI in name:
            return True
        if any(part in name for part in TURN):
            return False
        frame = frame.f_back  # type: ignore[assignment]
    return False

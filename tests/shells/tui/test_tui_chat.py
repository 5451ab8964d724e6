"""The TUI, driven by Textual's pilot at 80x24 and at a small 60x20."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.pilot import Pilot
from textual.widgets import Input

from infai.agent.session import KEPT_RULES
from infai.llm import Done, Message, Request, ScriptedModel, StreamEvent, TextDelta, ToolCall
from infai.shells.tui import InfaiApp
from infai.shells.tui.app import QUIT_WINDOW
from infai.shells.tui.chat import (
    PAGE,
    AssistantMessage,
    ChatView,
    FoldedMessage,
    ToolView,
    UserMessage,
)
from infai.shells.tui.modals import (
    GRACE,
    ApprovalScreen,
    HelpScreen,
    RenameScreen,
    SessionPicker,
)
from infai.shells.tui.panels import MODEL_CHARS, PendingBar, StatusBar, Timeline, short_model
from infai.shells.workspace import Workspace
from infai.store import MessageRecord, Store, ToolCallRecord, ToolResultRecord, Usage

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


def workspace(tmp_path: Path, model: Any = None, allow: tuple[str, ...] = ()) -> Workspace:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    space = Workspace(Store(tmp_path / "home"), work, allow=allow)
    if model is not None:
        space.model = model
    return space


def run_app(
    app: InfaiApp, scenario: Callable[[Pilot[None]], Awaitable[None]], size: tuple[int, int]
) -> None:
    async def go() -> None:
        async with app.run_test(size=size) as pilot:
            await scenario(pilot)

    asyncio.run(go())


async def until(pilot: Pilot[None], condition: Callable[[], bool], what: str = "") -> None:
    for _ in range(500):
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"timed out waiting for {what or condition}")


async def send(pilot: Pilot[None], text: str) -> None:
    """Type ``text`` key by key (letters and spaces) and press Enter."""
    await pilot.press(*("space" if c == " " else c for c in text))
    await pilot.press("enter")


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


@pytest.mark.parametrize("size", SIZES)
def test_a_prompt_is_answered_and_saved(tmp_path: Path, size: tuple[int, int]) -> None:
    space = workspace(tmp_path, ScriptedModel(["The **answer** is 42."]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "what is the answer")
        await until(pilot, lambda: not app.busy and bool(app.query(AssistantMessage)))
        chat = app.query_one(ChatView)
        [user] = chat.query(UserMessage)
        [reply] = chat.query(AssistantMessage)
        assert "what is the answer" in str(user.render())
        assert reply.text == "The **answer** is 42." and reply.event_id is not None
        assert app.query_one("#prompt", Input).value == ""
        assert "saved" in str(app.query_one(StatusBar).render())
        for part in ("#prompt", "StatusBar", "ChatView"):
            assert inside_screen(app, part), part

    run_app(app, scenario, size)
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        records = [e.record for e in reader.context().events]
    assert [r.content for r in records if isinstance(r, MessageRecord)] == [
        "what is the answer",
        "The **answer** is 42.",
    ]


def test_streaming_appends_to_the_reply_without_touching_the_rest(tmp_path: Path) -> None:
    model = GatedModel()
    app = InfaiApp(workspace(tmp_path, model))

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "hi")
        await until(pilot, lambda: bool(app.query(AssistantMessage)), "the first delta")
        chat = app.query_one(ChatView)
        user = chat.query_one(UserMessage)
        live = chat.query_one(AssistantMessage)
        markdown = live._markdown
        assert live.text == "Hello " and live.event_id is None
        assert "streaming" in str(app.query_one(StatusBar).render())
        await pilot.resize_terminal(60, 20)  # mid-stream: the layout must hold
        await pilot.pause()
        model.release.set()
        await until(pilot, lambda: not app.busy, "the turn's end")
        assert chat.query_one(UserMessage) is user  # nothing else was re-rendered
        assert chat.query_one(AssistantMessage) is live and live._markdown is markdown
        assert live.text == "Hello world." and live.event_id is not None
        for part in ("#prompt", "StatusBar"):
            assert inside_screen(app, part), part

    run_app(app, scenario, (80, 24))


def write_call(path: str) -> Message:
    arguments = {"path": path, "content": "hello\n"}
    return Message(role="assistant", tool_calls=(ToolCall("w1", "write_file", arguments),))


@pytest.mark.parametrize("size", SIZES)
def test_an_ask_opens_a_modal_and_allow_once_runs_the_tool(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = workspace(tmp_path, ScriptedModel([write_call("out.txt"), "written"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "write it")
        await asked(pilot, app)
        assert "write_file" in str(app.screen.query_one(".title").render())
        assert inside_screen(app, "ApprovalScreen > Vertical")
        await pilot.press("y")
        await until(pilot, lambda: not app.busy, "the turn's end")
        [tool] = app.query(ToolView)
        assert tool.has_result and not tool.has_class("failed")
        assert app.query_one(".diff")  # the write is shown as a diff

    run_app(app, scenario, size)
    assert (space.working_dir / "out.txt").read_text() == "hello\n"


@pytest.mark.parametrize("size", SIZES)
def test_deny_and_allow_always(tmp_path: Path, size: tuple[int, int]) -> None:
    replies: list[Any] = [write_call("a.txt"), "denied", write_call("b.txt"), "ok"]
    replies += [write_call("b.txt"), "again"]
    space = workspace(tmp_path, ScriptedModel(replies))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        await asked(pilot, app)
        await pilot.press("n")
        await until(pilot, lambda: not app.busy)
        assert app.query(ToolView)[0].has_class("failed")
        await send(pilot, "two")
        await asked(pilot, app)
        await pilot.press("a")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "three")  # the same call again: no question this time
        await until(pilot, lambda: not app.busy)
        assert not isinstance(app.screen, ApprovalScreen)

    run_app(app, scenario, size)
    assert not (space.working_dir / "a.txt").exists()
    assert (space.working_dir / "b.txt").read_text() == "hello\n"
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        results = [e.record for e in reader.context().events if e.kind == "tool_result"]
    verdicts = [r.metadata["permission"]["by"] for r in results if isinstance(r, ToolResultRecord)]
    assert verdicts[0] == "user" and verdicts[1] == "user" and verdicts[2].startswith("rule")


def test_keys_typed_as_the_dialog_opens_go_to_the_input_not_the_answer(tmp_path: Path) -> None:
    space = workspace(tmp_path, ScriptedModel([write_call("a.txt"), "ok"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the approval modal")
        await pilot.press("a", "n", "d", "backspace", "y")  # still typing: not answers
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.pause(GRACE + 0.05)  # the user stops and reads
        await pilot.press("y")
        await until(pilot, lambda: not app.busy)
        assert app.query_one("#prompt", Input).value == "any"

    run_app(app, scenario, (80, 24))
    assert (space.working_dir / "a.txt").read_text() == "hello\n"
    assert KEPT_RULES not in space.store.info(space.store.list_sessions()[0].id).extra


@pytest.mark.parametrize("size", SIZES)
def test_allow_always_with_an_edited_pattern_is_kept_with_the_session(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    replies: list[Any] = [write_call("notes/a.txt"), "ok", write_call("notes/b.txt"), "ok"]
    space = workspace(tmp_path, ScriptedModel(replies))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        screen = await asked(pilot, app)
        assert "allow always: notes/*" in str(screen.query_one("#keys").render())
        assert "write_file can change things" in str(screen.query_one(".reason").render())
        await pilot.press("e")
        field = screen.query_one("#pattern", Input)
        assert field.has_focus and field.value == "notes/*"
        assert inside_screen(app, "ApprovalScreen > Vertical")
        await pilot.press("escape")  # back to the question, nothing answered
        assert app.screen is screen and not field.has_focus
        await pilot.press("e")
        field = screen.query_one("#pattern", Input)
        assert field.has_focus and field.value == "notes/*"
        await pilot.press(*"notes/*.txt")  # typing replaces the suggestion (selected)
        await pilot.press("enter")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "two")  # covered by the edited pattern: no question
        await until(pilot, lambda: not app.busy)
        assert not isinstance(app.screen, ApprovalScreen)

    run_app(app, scenario, size)
    [info] = space.store.list_sessions()
    assert info.extra[KEPT_RULES] == ["write_file notes/*.txt"]
    assert (space.working_dir / "notes" / "b.txt").exists()


@pytest.mark.parametrize("size", SIZES)
def test_ctrl_c_cancels_the_turn_and_a_second_quits(tmp_path: Path, size: tuple[int, int]) -> None:
    space = workspace(tmp_path, GatedModel())
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "hi")
        await until(pilot, lambda: bool(app.query(AssistantMessage)))
        await pilot.press("ctrl+c")
        await until(pilot, lambda: app.turn is not None and app.turn.is_finished)
        assert not app.query(AssistantMessage)  # the unsaved reply is gone
        assert any("interrupted" in str(n.render()) for n in app.query(".notice"))
        await pilot.press("ctrl+c")
        await until(pilot, lambda: app.session is None, "the app to quit")

    run_app(app, scenario, size)
    [info] = space.store.list_sessions()
    assert space.store.fsck(info.id).ok
    with space.store.open_reader(info.id) as reader:
        contents = [e.record.content for e in reader.context().events]
    assert contents == ["hi", "[turn interrupted]"]


@pytest.mark.parametrize("size", SIZES)
def test_the_timeline_picks_an_older_event_and_the_next_prompt_branches(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = workspace(tmp_path, ScriptedModel(["first answer", "second answer", "branched"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "first")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "second")
        await until(pilot, lambda: not app.busy)
        await pilot.press("ctrl+t")
        timeline = app.query_one(Timeline)
        assert timeline.display and timeline.has_focus
        nodes = [n for n in _walk(timeline.root) if n.data]
        assert len(nodes) == 4
        first_answer = nodes[1]
        timeline.select_node(first_answer)
        await until(pilot, lambda: app.query_one(PendingBar).display, "the pending bar")
        assert "#1" in str(app.query_one(PendingBar).render())
        assert len(app.query(AssistantMessage)) == 1  # the chat shows the path to it
        assert app.session is not None and app.session.writer.pending_parent == first_answer.data
        await pilot.press("escape")
        await until(pilot, lambda: not app.query_one(PendingBar).display)
        timeline.select_node(first_answer)
        await until(pilot, lambda: app.query_one(PendingBar).display)
        await send(pilot, "other way")
        await until(pilot, lambda: not app.busy)
        assert not app.query_one(PendingBar).display
        writer = app.session.writer
        new_prompt = writer.path()[-2]
        assert new_prompt.parent_id == first_answer.data
        labels = [str(n.label) for n in _walk(timeline.root)]
        assert any("branch at #1" in label for label in labels)

    run_app(app, scenario, size)


def _walk(node: Any) -> list[Any]:
    out = []
    for child in node.children:
        out.append(child)
        out += _walk(child)
    return out


@pytest.mark.parametrize("size", SIZES)
def test_sessions_picker_resumes_and_starts_sessions(tmp_path: Path, size: tuple[int, int]) -> None:
    space = workspace(tmp_path, ScriptedModel(["a"]))
    older = space.store.create_session(name="older", working_dir=str(space.working_dir)).id
    newer = space.store.create_session(name="newer", working_dir=str(space.working_dir)).id
    app = InfaiApp(space, older)

    async def scenario(pilot: Pilot[None]) -> None:
        assert app.session is not None and app.session.session_id == older
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker))
        picker = app.screen
        assert isinstance(picker, SessionPicker)
        # newest first: opening a session with another model is activity too
        assert [i.id for i in picker.sessions] == [older, newer]
        assert inside_screen(app, "SessionPicker > Vertical")
        await pilot.press("down", "enter")  # the highlight starts on the current session
        await until(pilot, lambda: app.session is not None and app.session.session_id == newer)
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker))
        await pilot.press("n")
        await until(pilot, lambda: app.session is not None and app.session.session_id != newer)

    run_app(app, scenario, size)
    # the new session was left empty, so it is gone again; the others stay
    assert {i.id for i in space.store.list_sessions()} == {older, newer}


@pytest.mark.parametrize("size", SIZES)
def test_rename_help_and_commands(tmp_path: Path, size: tuple[int, int]) -> None:
    space = workspace(tmp_path, ScriptedModel(["x"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, RenameScreen))
        await pilot.press(*"demo", "enter")
        await until(pilot, lambda: not isinstance(app.screen, RenameScreen))
        assert app.session is not None
        assert space.store.info(app.session.session_id).name == "demo"
        await send(pilot, "/help")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await send(pilot, "/model nope")
        await until(pilot, lambda: any("unknown model" in n.message for n in app._notifications))
        await send(pilot, "/model offline")
        await until(pilot, lambda: app.session is not None and app.session.model.name == "offline")
        await send(pilot, "/frobnicate")
        await until(pilot, lambda: any("/frobnicate" in n.message for n in app._notifications))

    run_app(app, scenario, size)


@pytest.mark.parametrize("size", SIZES)
def test_compact_command_appends_a_boundary(tmp_path: Path, size: tuple[int, int]) -> None:
    space = workspace(tmp_path)  # the offline model answers summaries too
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


#: a reply too large for a chunk line (over 16 KiB): the store keeps it in a blob
BIG_REPLY = "# Report\n\n" + "\n\n".join(f"Paragraph {i} with **bold** words." for i in range(700))


@pytest.fixture(scope="module")
def big_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A session of 20,002 events on one path, some tool results and the last
    reply in blobs."""
    root = tmp_path_factory.mktemp("big")
    store = Store(root / "home")
    sid = store.create_session(name="big", working_dir=str(root / "work")).id
    (root / "work").mkdir()
    with store.open_writer(sid) as writer:
        for start in range(0, 20_000, 1000):
            batch: list[tuple[Any, str]] = []
            for i in range(start, start + 1000, 4):
                batch.append((MessageRecord(content=f"question {i}"), "user"))
                batch.append((ToolCallRecord(call_id=f"c{i}", name="read_file"), "assistant"))
                content = "B" * 20_000 if i % 40 == 0 else f"result {i}"
                result = ToolResultRecord(call_id=f"c{i}", name="read_file", content=content)
                batch.append((result, "tool"))
                batch.append((MessageRecord(content=f"answer {i}"), "assistant"))
            writer.append_batch(batch)
        writer.append(MessageRecord(content="the report, please"), "user")
        assert writer.append(MessageRecord(content=BIG_REPLY), "assistant").digest
    return root, sid


def test_a_20000_event_session_opens_a_page_without_reading_blobs(
    big_session: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import infai.store.reader as reader_module

    root, sid = big_session
    reads: list[str] = []
    real = reader_module.read_blob  # type: ignore[attr-defined]

    def counting(paths: Any, digest: str) -> bytes:
        reads.append(digest)
        return real(paths, digest)

    monkeypatch.setattr(reader_module, "read_blob", counting)
    space = Workspace(Store(root / "home"), root / "work")
    app = InfaiApp(space, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        chat = app.query_one(ChatView)
        assert chat.mounted_events == PAGE
        assert len(chat.children) <= PAGE + 1  # the page and the "earlier" button
        [report] = chat.query(FoldedMessage)  # the large reply: its preview, folded
        assert report.title.startswith("reply (large, unfold to read): # Report Paragraph 0")
        assert reads == []
        head = app.session.writer.head if app.session else None
        await pilot.press("ctrl+t")  # the timeline opens on HEAD, scrolled to it
        timeline = app.query_one(Timeline)
        await until(pilot, lambda: timeline.scroll_y > 0, "the timeline to scroll to HEAD")
        assert timeline.cursor_node is not None and timeline.cursor_node.data == head
        assert timeline.scroll_y <= timeline.cursor_line < timeline.scroll_y + timeline.size.height
        assert reads == []
        await pilot.press("ctrl+t")
        chat.scroll_home(animate=False)  # the user scrolls up to the "earlier" button
        await pilot.pause()
        await pilot.click("#more")
        await until(pilot, lambda: chat.mounted_events == 2 * PAGE)
        assert reads == []
        folded = [v for v in chat.query(ToolView) if "blob" in str(v._fold.title)]
        assert folded, "a blob result is shown folded"
        folded[0]._fold.collapsed = False
        await until(pilot, lambda: len(reads) == 1, "the blob to load on unfold")
        assert "BBBB" in str(folded[0]._body.render())
        report._fold.collapsed = False  # the large reply: read now, shown as Markdown
        await until(pilot, lambda: bool(report.query(AssistantMessage)), "the reply to load")
        assert len(reads) == 2 and report.query_one(AssistantMessage).text == BIG_REPLY
        assert "KiB" in report.title

    run_app(app, scenario, (80, 24))


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


def test_a_long_reply_is_followed_and_the_model_closed_on_exit(tmp_path: Path) -> None:
    long = "\n\n".join(f"paragraph {i}" for i in range(60))
    model = ClosingModel(long)
    app = InfaiApp(workspace(tmp_path, model))

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "talk")
        await until(pilot, lambda: not app.busy)
        await pilot.pause(0.2)
        chat = app.query_one(ChatView)
        assert chat.max_scroll_y > 0 and chat.scroll_y == chat.max_scroll_y  # the end is shown

    run_app(app, scenario, (80, 24))
    assert model.closed >= 1


def test_a_compaction_is_a_turn_of_its_own(tmp_path: Path) -> None:
    model = ClosingModel("answer")
    app = InfaiApp(workspace(tmp_path, model))

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "/compact")
        await until(pilot, lambda: app.busy, "the compaction to start")
        await send(pilot, "two")  # refused while compacting: the text stays in the input
        assert app.query_one("#prompt", Input).value == "two"
        model.release.set()
        await until(pilot, lambda: not app.busy)
        await pilot.press("enter")
        await until(pilot, lambda: not app.busy and len(app.query(UserMessage)) == 1)

    run_app(app, scenario, (80, 24))
    [info] = app.workspace.store.list_sessions()
    with app.workspace.store.open_reader(info.id) as reader:
        kinds = [e.kind for e in reader.context().events]
    assert kinds == ["compaction", "message", "message"]  # two came after the summary


def test_results_stay_with_their_calls_and_a_damaged_blob_does_not_crash(
    tmp_path: Path,
) -> None:
    space = workspace(tmp_path)
    sid = space.store.create_session(working_dir=str(space.working_dir)).id
    with space.store.open_writer(sid) as writer:
        writer.append(MessageRecord(content="q1"), "user")
        writer.append(ToolCallRecord(call_id="c1", name="bash"), "assistant")
        writer.append(MessageRecord(content="[turn interrupted]"), "user")
        writer.append(ToolCallRecord(call_id="c2", name="read_file"), "assistant")
        big = ToolResultRecord(call_id="c2", name="read_file", content="Z" * 20_000)
        result = writer.append(big, "tool")
    assert result.digest is not None
    store = space.store
    assert isinstance(store, Store)
    blob = store.paths(sid).blobs / result.digest.split(":")[1]
    blob.write_bytes(b"damaged")
    app = InfaiApp(space, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        first, second = app.query(ToolView)
        assert "interrupted" in str(first._fold.title) and not first.has_result
        assert second.has_result and "blob" in str(second._fold.title)
        second._fold.collapsed = False
        await until(pilot, lambda: "cannot load" in str(second._body.render()))
        assert app.is_running

    run_app(app, scenario, (80, 24))


def test_the_open_timeline_grows_with_each_turn_without_a_rebuild(tmp_path: Path) -> None:
    space = workspace(tmp_path, ScriptedModel(["one", "two", "three", "four"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "a")
        await until(pilot, lambda: not app.busy)
        await pilot.press("ctrl+t")
        timeline = app.query_one(Timeline)
        rebuilds: list[int] = []
        real = timeline.load

        def counted(*args: Any, **kwargs: Any) -> None:
            rebuilds.append(1)
            real(*args, **kwargs)

        timeline.load = counted  # type: ignore[method-assign]
        await pilot.press("escape")  # nothing picked: nothing changes
        app.query_one("#prompt", Input).focus()
        await send(pilot, "b")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "c")
        await until(pilot, lambda: not app.busy)
        labels = [str(n.label) for n in _walk(timeline.root) if n.data]
        assert len(labels) == 6 and rebuilds == []
        assert labels[-1].startswith("◆ #5") and not any(x.startswith("◆") for x in labels[:-1])
        first_answer = [n for n in _walk(timeline.root) if n.data][1]
        timeline.select_node(first_answer)
        await until(pilot, lambda: app.query_one(PendingBar).display)
        app.query_one("#prompt", Input).focus()
        await send(pilot, "d")  # a fork at #1: the line from #1 must move into a branch
        await until(pilot, lambda: not app.busy)
        assert rebuilds == [1]
        labels = [str(n.label) for n in _walk(timeline.root)]
        assert sum("branch at #1" in label for label in labels) == 2

    run_app(app, scenario, (80, 24))


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
        assert len([n for n in _walk(app.query_one(Timeline).root) if n.data]) == 2

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


@pytest.mark.parametrize("size", SIZES)
def test_a_large_prompt_and_reply_reopen_folded_and_unfold_in_full(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = workspace(tmp_path)
    sid = space.store.create_session(working_dir=str(space.working_dir)).id
    log = "\n".join(f"  File 'app.py', line {i}, in handler" for i in range(600))
    with space.store.open_writer(sid) as writer:
        assert writer.append(MessageRecord(content=f"why?\n{log}"), "user").digest
        assert writer.append(MessageRecord(content=BIG_REPLY), "assistant").digest
    app = InfaiApp(space, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        prompt, reply = app.query(FoldedMessage)
        assert prompt.title.startswith("you (large, unfold to read): why?")
        assert reply.title.startswith("reply (large, unfold to read): # Report")
        assert not prompt.loaded and not reply.loaded  # nothing read until asked
        reply._fold.collapsed = False
        await until(pilot, lambda: bool(reply.query(AssistantMessage)), "the reply to load")
        assert reply.query_one(AssistantMessage).text == BIG_REPLY  # Markdown, in full
        assert reply.query("Markdown") and "KiB" in reply.title
        prompt._fold.collapsed = False
        await until(pilot, lambda: prompt.loaded and bool(prompt.query(".text")))
        assert "line 599, in handler" in str(prompt.query_one(".text").render())
        assert prompt.title.startswith("you (22.2 KiB, 601 lines): why?")
        for part in ("#prompt", "StatusBar"):
            assert inside_screen(app, part), part

    run_app(app, scenario, size)


@pytest.mark.parametrize("size", SIZES)
def test_the_timeline_opens_on_head_or_the_picked_event(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = workspace(tmp_path, ScriptedModel([f"answer {i} " + "long " * 20 for i in range(4)]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        for text in ("one", "two", "three"):
            await send(pilot, text)
            await until(pilot, lambda: not app.busy)
        assert app.session is not None
        writer = app.session.writer
        bar = app.query_one(StatusBar)
        assert "HEAD #5 of 6" in str(bar.render()) and "⑂" not in str(bar.render())
        await pilot.press("ctrl+t")
        timeline = app.query_one(Timeline)
        assert timeline.has_focus and timeline.cursor_node is not None
        assert timeline.cursor_node.data == writer.head  # not #0
        assert not timeline.show_horizontal_scrollbar  # long labels are cut, no stray bar
        picked = [n for n in _walk(timeline.root) if n.data][1]
        timeline.select_node(picked)
        await until(pilot, lambda: app.query_one("#prompt", Input).has_focus, "the prompt")
        assert app.query_one(PendingBar).display
        await pilot.press("ctrl+t")  # shown but not focused: focus it, keep it
        assert timeline.has_class("shown") and timeline.has_focus
        await pilot.press("ctrl+t")
        assert not timeline.has_class("shown")
        await pilot.press("ctrl+t")  # opened again: on the picked event
        assert timeline.cursor_node is not None and timeline.cursor_node.data == picked.data
        app.query_one("#prompt", Input).focus()
        await send(pilot, "other")
        await until(pilot, lambda: not app.busy and not app.query_one(PendingBar).display)
        assert "HEAD #7 of 8 ⑂ at #1" in str(bar.render())  # the branch, from the index
        assert timeline.cursor_node is not None and timeline.cursor_node.data == writer.head

    run_app(app, scenario, size)


@pytest.mark.parametrize("size", SIZES)
def test_a_multi_line_paste_is_kept_whole(tmp_path: Path, size: tuple[int, int]) -> None:
    space = workspace(tmp_path, ScriptedModel(["I see."]))
    app = InfaiApp(space)
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad\n'

    async def scenario(pilot: Pilot[None]) -> None:
        prompt = app.query_one("#prompt", Input)
        await send(pilot, "why")
        await until(pilot, lambda: not app.busy)
        await pilot.press(*"see", "space")
        prompt.post_message(events.Paste(trace))
        await until(pilot, lambda: "[pasted 3 lines]" in prompt.value, "the paste marker")
        prompt.post_message(events.Paste("one line"))  # a single line: as it was
        await until(pilot, lambda: prompt.value.endswith("one line"))
        assert prompt.value == "see [pasted 3 lines]one line"
        await pilot.press("enter")
        await until(pilot, lambda: not app.busy and len(app.query(UserMessage)) == 2)
        assert prompt.value == "" and "ValueError: bad" in str(app.query(UserMessage)[1].render())

    run_app(app, scenario, size)
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        records = [e.record for e in reader.context().events if e.role == "user"]
    prompts = [r.content for r in records if isinstance(r, MessageRecord)]
    assert prompts[1] == f"see {trace.rstrip()}one line"


@pytest.mark.parametrize("size", SIZES)
def test_switching_the_model_keeps_the_session_and_the_picked_event(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    model = ClosingModel("an answer")
    space = workspace(tmp_path, model)
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        for text in ("one", "two"):
            await send(pilot, text)
            await until(pilot, lambda: not app.busy)
        session = app.session
        assert session is not None
        await pilot.press("ctrl+t")
        picked = [n for n in _walk(app.query_one(Timeline).root) if n.data][1]
        app.query_one(Timeline).select_node(picked)
        await until(pilot, lambda: app.query_one(PendingBar).display, "the pending bar")
        await send(pilot, "/model offline")
        await until(pilot, lambda: session.model.name == "offline", "the switch")
        assert app.session is session and model.closed == 1  # the same session, still open
        assert session.writer.pending_parent == picked.data
        assert app.query_one(PendingBar).display and "#1" in str(app.query_one(PendingBar).render())
        assert "offline" in str(app.query_one(StatusBar).render())
        await send(pilot, "three")
        await until(pilot, lambda: not app.busy and not app.query_one(PendingBar).display)
        prompt, answer = session.writer.path()[-2:]
        assert prompt.parent_id == picked.data and answer.preview.startswith("offline model")

    run_app(app, scenario, size)


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
    app = InfaiApp(workspace(tmp_path, model))

    def bar() -> str:
        return str(app.query_one(StatusBar).render())

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "one")
        await until(pilot, lambda: not app.busy)
        await send(pilot, "two")
        await until(pilot, lambda: "compacting" in bar(), "the compaction notice")
        notice = "compacting: 910 of 1000 tokens in use"
        assert bar().startswith(f" {notice}")  # first: not cut off, whatever the width
        assert bar().index("in use") + len("in use") < app.size.width
        model.release.set()
        await until(pilot, lambda: not app.busy, "the turn's end")
        assert bar().startswith(" ✓ compacted ") and "anthropic:claude-sonnet-4-5" in bar()
        chat = app.query_one(ChatView)
        notices = [str(n.render()) for n in chat.query(".notice")]
        assert any(n.startswith("compacted (910 of 1000 tokens in use before)") for n in notices)
        assert chat.query(".boundary") and len(chat.query(UserMessage)) == 1  # after the reload

    run_app(app, scenario, size)
    assert short_model("scripted:/tmp/" + "x/" * 40 + "replies.json").endswith("/replies.json")
    assert len(short_model("scripted:/tmp/" + "x/" * 40 + "replies.json")) == MODEL_CHARS


@pytest.mark.parametrize("size", SIZES)
def test_a_cancelled_call_is_marked_interrupted(tmp_path: Path, size: tuple[int, int]) -> None:
    sleep = Message(role="assistant", tool_calls=(ToolCall("b1", "bash", {"command": "sleep 9"}),))
    replies: list[Any] = [write_call("a.txt"), sleep]
    app = InfaiApp(workspace(tmp_path, ScriptedModel(replies), allow=("bash sleep*",)))

    async def scenario(pilot: Pilot[None]) -> None:
        await send(pilot, "write")
        await asked(pilot, app)
        await pilot.press("ctrl+c")  # while asked
        await until(pilot, lambda: not app.busy and not isinstance(app.screen, ApprovalScreen))
        [asking] = app.query(ToolView)
        assert "interrupted" in str(asking._fold.title) and asking.has_class("failed")
        await pilot.pause(QUIT_WINDOW)  # not a double Ctrl-C
        await send(pilot, "sleep")
        await until(pilot, lambda: len(app.query(ToolView)) == 2, "the bash call")
        await pilot.pause(0.3)  # it runs
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.busy)
        running = app.query(ToolView)[1]
        assert "interrupted" in str(running._fold.title) and "running" not in str(
            running._fold.title
        )

    run_app(app, scenario, size)


@pytest.mark.parametrize("size", SIZES)
def test_a_named_new_session_is_kept_and_a_name_can_be_cleared(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = workspace(tmp_path)
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        assert app.session is not None
        first = app.session.session_id
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, RenameScreen))
        assert "empty: no name" in str(app.screen.query_one(".keys").render())
        assert inside_screen(app, "RenameScreen > Vertical")
        await pilot.press(*"keep", "enter")
        await pilot.press("ctrl+n")  # leave it empty, but named
        await until(pilot, lambda: app.session is not None and app.session.session_id != first)
        assert space.store.info(first).name == "keep"
        second = app.session.session_id
        await send(pilot, "/rename temp")
        assert space.store.info(second).name == "temp"
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, RenameScreen))
        await pilot.press("backspace", "enter")  # the name selected, deleted: no name
        await until(pilot, lambda: not isinstance(app.screen, RenameScreen))
        assert space.store.info(second).name is None
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, RenameScreen))
        await pilot.press(*"zzz", "escape")  # Esc keeps what was there (no name)
        await until(pilot, lambda: not isinstance(app.screen, RenameScreen))
        assert space.store.info(second).name is None

    run_app(app, scenario, size)
    # the unnamed empty session went when the app ended; the named one stayed
    assert [i.name for i in space.store.list_sessions()] == ["keep"]


def test_plain_infai_takes_the_tui_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from infai.shells import agent_cli  # noqa: F401  (registers tui)
    from infai.shells.cli import main

    opened: list[InfaiApp] = []
    monkeypatch.setattr(InfaiApp, "run", lambda self: opened.append(self))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    home = str(tmp_path / "home")
    sid = Store(tmp_path / "home").create_session(working_dir=str(tmp_path / "work")).id
    runner = CliRunner()
    done = runner.invoke(main, ["--home", home, "--model", "offline", "--allow", "bash ls*"])
    assert done.exit_code == 0, done.output
    done = runner.invoke(main, ["--home", home, "--continue"])
    assert done.exit_code == 0, done.output
    first, second = opened
    assert first.workspace.model.name == "offline" and first._initial is None
    assert any(rule.pattern == "ls*" for rule in first.workspace.rules)
    assert second._initial == sid
    wrong = runner.invoke(main, ["--home", home, "--model", "offline", "session", "ls"])
    assert wrong.exit_code == 2 and "for the TUI only" in wrong.output

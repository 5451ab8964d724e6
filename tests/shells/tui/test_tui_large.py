"""Large sessions and blobs: a page at a time, large messages folded until
unfolded, a damaged blob survived.

Driven by Textual's pilot at 80x24 and at a small 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from infai.agent import Harness
from infai.shells.tui import InfaiApp
from infai.shells.tui.chat import PAGE, AssistantMessage, ChatView, FoldedMessage, ToolView
from infai.shells.tui.panels import Timeline
from infai.store import MessageRecord, Store, ToolCallRecord, ToolResultRecord
from tui_pilot import BIG_REPLY, SIZES, harness, inside_screen, run_app, until


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


@pytest.mark.slow  # over 10 s on 2 cores: in `make crash`
def test_a_20000_event_session_opens_a_page_without_reading_blobs(
    big_session: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import infai.store.file.reader as reader_module

    root, sid = big_session
    reads: list[str] = []
    real = reader_module.read_blob  # type: ignore[attr-defined]

    def counting(paths: Any, digest: str) -> bytes:
        reads.append(digest)
        return real(paths, digest)

    monkeypatch.setattr(reader_module, "read_blob", counting)
    space = Harness(Store(root / "home"), root / "work")
    app = InfaiApp(space, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        chat = app.query_one(ChatView)
        assert chat.mounted_events == PAGE
        assert len(chat.children) <= PAGE + 1  # the page and the "earlier" button
        [report] = chat.query(FoldedMessage)  # the large reply: its preview, folded
        opening = "reply (large: click or Tab+Enter to open): # Report Paragraph 0"
        assert report.title.startswith(opening)
        assert reads == []
        head = app.session.view.head if app.session else None
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


def test_results_stay_with_their_calls_and_a_damaged_blob_does_not_crash(
    tmp_path: Path,
) -> None:
    space = harness(tmp_path)
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


@pytest.mark.parametrize("size", SIZES)
def test_a_large_prompt_and_reply_reopen_folded_and_unfold_in_full(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    space = harness(tmp_path)
    sid = space.store.create_session(working_dir=str(space.working_dir)).id
    log = "\n".join(f"  File 'app.py', line {i}, in handler" for i in range(600))
    with space.store.open_writer(sid) as writer:
        assert writer.append(MessageRecord(content=f"why?\n{log}"), "user").digest
        assert writer.append(MessageRecord(content=BIG_REPLY), "assistant").digest
    app = InfaiApp(space, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        prompt, reply = app.query(FoldedMessage)
        assert prompt.title.startswith("you (large: click or Tab+Enter to open): why?")
        assert reply.title.startswith("reply (large: click or Tab+Enter to open): # Report")
        assert not prompt.loaded and not reply.loaded  # nothing read until asked
        reply._fold.collapsed = False
        await until(pilot, lambda: bool(reply.query(AssistantMessage)), "the reply to load")
        assert reply.query_one(AssistantMessage).text == BIG_REPLY  # Markdown, in full
        await until(pilot, lambda: bool(reply.query("Markdown")), "the reply's Markdown")
        assert "KiB" in reply.title
        prompt._fold.collapsed = False
        await until(pilot, lambda: prompt.loaded and bool(prompt.query(".text")))
        assert "line 599, in handler" in str(prompt.query_one(".text").render())
        assert prompt.title.startswith("you (22.2 KiB, 601 lines): why?")
        for part in ("#prompt", "StatusBar"):
            assert inside_screen(app, part), part

    run_app(app, scenario, size)

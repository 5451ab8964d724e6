"""The conversation view: one widget per event, the reply being written streaming in.

Only what is on the active path is shown, and only its last page at first:
opening a session of 20,000 events reads the path from the index (previews,
no chunk reads beyond the shown page, no blobs) and mounts a page of widgets;
older pages mount when the user scrolls to the top and asks. A streamed reply
appends to its own Markdown widget through Textual's Markdown stream, so a
token never re-renders the rest of the conversation. Tool calls are one line;
their results fold, and a result kept in a blob is read only when unfolded.

Reading is the app's to hand over (see :mod:`.store_io`): the chat gets a page
already loaded, and runs the loader of earlier pages and the blob resolver it
is given in a thread, so scrolling up or unfolding never blocks the screen.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Button, Collapsible, Static

from infai.checkpoints import diff_header
from infai.store import (
    BranchSummaryRecord,
    CompactionRecord,
    Entry,
    Event,
    MessageRecord,
    Record,
    StoreError,
    ToolCallRecord,
    ToolResultRecord,
)

from ..inert import inert, inert_markup, inert_text
from .diffs import DIFFED, current_text, diff_sides
from .panels import files_mark
from .store_io import off_loop

if TYPE_CHECKING:  # imported when first drawn: Markdown (markdown-it) and Syntax (pygments)
    from rich.syntax import Syntax  # are not needed for the first frame of a new session
    from textual.widgets.markdown import MarkdownStream

PAGE = 40
#: results longer than this many lines start folded
FOLD_LINES = 6
INTERRUPTED_TURN = "[turn interrupted]"
#: diff lines shown under a call
DIFF_LINES = 200
#: how a folded result or message is opened, said on its fold
OPEN_HINT = "click or Tab+Enter to open"
#: the events before a compaction that opening its fold shows (the newest)
EARLIER_SHOWN = 200

#: loads events by id (no blob), and resolves an event's record (reads its blob);
#: both read the store, so they are run in a thread
Loader = Callable[[list[str]], list[Event]]
Resolver = Callable[[Event], Record]


#: the stop reason of a reply the provider cut at its output limit (OpenAI's
#: ``finish_reason=length`` and Anthropic's ``max_tokens`` are both stored so)
CUT_REASON = "max_tokens"
CUT_MARK = "✂ cut at the output limit: the reply is incomplete"


def _args_line(arguments: dict[str, Any]) -> str:
    parts = []
    for key, value in arguments.items():
        text = str(value).replace("\n", "⏎")
        parts.append(f"{key}={text[:60]}{'…' if len(text) > 60 else ''}")
    return " ".join(parts)


def edit_diff(call: ToolCallRecord, current: str | None = None) -> Syntax | None:
    """A coloured diff of what an edit or a write does, or None for other tools.

    With the file's ``current`` text, the diff is the file's real change: a write
    over an existing file shows what it replaces, an edit's hunks carry the
    file's line numbers. Without it (a call from the history, the file changed
    since) the diff is drawn from the arguments alone.
    """
    path = str(call.arguments.get("path", ""))
    sides = diff_sides(call.name, call.arguments, current)
    if sides is None:
        return None
    old, new = sides
    if current is not None and old == new:  # read after the call ran (it was not asked)
        return edit_diff(call)
    names = diff_header("a/", path), diff_header("b/", path)
    lines = list(difflib.unified_diff(old, new, *names, lineterm="", n=2))
    if len(lines) > DIFF_LINES:
        more = len(lines) - DIFF_LINES
        lines = [*lines[:DIFF_LINES], f"… {more} more diff lines"]
    from rich.syntax import Syntax

    return Syntax(inert("\n".join(lines)), "diff", theme="ansi_dark", word_wrap=True)


class UserMessage(Static):
    def __init__(self, event: Event, text: str) -> None:
        interrupted = text == INTERRUPTED_TURN
        super().__init__(inert_text(text), classes="interrupted" if interrupted else "user")
        self.event_id = event.id


class Notice(Static):
    """A line that is not part of the conversation: a retry, a compaction, an error."""

    def __init__(self, text: str, *, error: bool = False) -> None:
        super().__init__(inert_text(text), classes="notice error" if error else "notice")


class AssistantMessage(Widget):
    """An assistant reply: reasoning folded, text as Markdown; may be streaming."""

    DEFAULT_CSS = """
    AssistantMessage { height: auto; margin: 0 0 1 0; }
    AssistantMessage Collapsible { padding: 0; border: none; }
    """

    def __init__(
        self, text: str = "", reasoning: str = "", event_id: str | None = None, cut: bool = False
    ) -> None:
        super().__init__(classes="assistant")
        self.event_id = event_id
        self.text = text
        self.reasoning = reasoning
        from textual.widgets import Markdown

        self._markdown = Markdown(inert(text))
        self._thoughts = Static(inert_text(reasoning), classes="reasoning")
        self._fold = Collapsible(self._thoughts, title="reasoning", collapsed=True)
        self._fold.display = bool(reasoning)
        self._stream: MarkdownStream | None = None
        #: shown under a reply the provider cut at its output limit (stop reason
        #: ``max_tokens``), when it is stored and whenever the session is opened again
        self._cut = Static(CUT_MARK, classes="notice")
        self._cut.display = cut

    def compose(self) -> ComposeResult:
        yield self._fold
        yield self._markdown
        yield self._cut

    @property
    def cut(self) -> bool:
        """Whether the reply is marked as cut at the output limit."""
        return bool(self._cut.display)

    async def append_text(self, delta: str) -> None:
        self.text += delta
        if self._stream is None:
            self._stream = self._markdown.get_stream(self._markdown)
        await self._stream.write(inert(delta))

    def append_reasoning(self, delta: str) -> None:
        self.reasoning += delta
        self._fold.display = True
        self._thoughts.update(inert_text(self.reasoning))

    async def stop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.stop()

    async def settle(self, event: Event, record: MessageRecord) -> None:
        """The reply is durable: show exactly what was stored."""
        self.event_id = event.id
        await self.stop_stream()
        if record.content != self.text:
            self.text = record.content
            await self._markdown.update(inert(record.content))
        if (record.reasoning or "") != self.reasoning:
            self.reasoning = record.reasoning or ""
            self._thoughts.update(inert_text(self.reasoning))
            self._fold.display = bool(self.reasoning)
        self._cut.display = record.stop_reason == CUT_REASON


class ToolView(Widget):
    """A tool call on one line; its result folded below, loaded when unfolded."""

    DEFAULT_CSS = """
    ToolView { height: auto; }
    ToolView Collapsible { padding: 0 0 0 2; border: none; }
    """

    def __init__(
        self,
        event: Event,
        call: ToolCallRecord | None,
        resolver: Resolver,
        current: str | None = None,
    ) -> None:
        super().__init__(classes="tool")
        self._current = current  # the changed file's text before the call, if read
        self.event_id = event.id
        self.call = call
        self.call_id = call.call_id if call else None
        self._resolver = resolver
        self._result: Event | None = None
        self._body = Static("", classes="result")
        title = f"▸ {call.name} {_args_line(call.arguments)}" if call else f"▸ {event.preview}"
        self._head = Static(inert_text(title), classes="call")
        self._fold = Collapsible(self._body, title="running…", collapsed=True)

    def compose(self) -> ComposeResult:
        yield self._head
        diff = edit_diff(self.call, self._current) if self.call else None
        if diff is not None:
            yield Static(diff, classes="diff")
        yield self._fold

    def show_result(self, event: Event) -> None:
        """Attach the result; short ones open at once, long or blob ones stay folded."""
        self._result = event
        record = event.record
        status = "error" if isinstance(record, ToolResultRecord) and record.is_error else "ok"
        preview = event.preview.split(": ", 1)[-1].replace("\n", " ")
        if isinstance(record, ToolResultRecord):
            count = len(record.content.splitlines())
            size = f" · {count} lines: {OPEN_HINT}"
        else:
            size = f" · in a blob: {OPEN_HINT}"
        mark = "✗" if status == "error" else "✓"
        self._fold.title = inert_markup(f"{mark} {preview[:70]}{size}")
        self.set_class(status == "error", "failed")
        if isinstance(record, ToolResultRecord):
            lines = record.content.splitlines()
            if len(lines) <= FOLD_LINES:  # short: shown open, the title just says how it went
                self._fold.title = "✗ failed" if status == "error" else "✓ done"
                self._body.update(inert_text(record.content))
                self._fold.collapsed = False

    @property
    def has_result(self) -> bool:
        return self._result is not None

    async def on_collapsible_expanded(self, message: Collapsible.Expanded) -> None:
        result = self._result
        if result is None:
            return
        if result.record is None:  # in a blob: read it now, once
            try:
                result.record = await off_loop(lambda: self._resolver(result))
            except StoreError as exc:  # damaged or missing: say so, keep the app alive
                self._body.update(inert_text(f"cannot load this result: {exc}", "bold red"))
                return
        record = result.record
        if isinstance(record, ToolResultRecord):
            self._body.update(inert_text(record.content))

    def interrupted(self) -> None:
        """The turn ended before this call had a result."""
        self._fold.title = "✗ interrupted: no result"
        self.set_class(True, "failed")


def _size(text: str) -> str:
    size = len(text.encode())
    amount = f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} bytes"
    lines = text.count("\n") + 1
    return f"{amount}, {lines} line{'s' if lines != 1 else ''}"


class FoldedMessage(Widget):
    """A message or summary stored in a blob: folded under its preview until
    unfolded, then read once and shown in full (a reply as Markdown)."""

    DEFAULT_CSS = """
    FoldedMessage { height: auto; margin: 1 0 0 0; }
    FoldedMessage > Collapsible { padding: 0; border: none; }
    FoldedMessage .body { height: auto; }
    """
    LABELS: ClassVar[dict[str, str]] = {
        "compaction": "── compacted: earlier messages summarised",
        "branch_summary": "── summary of a branch that was left",
    }

    def __init__(self, event: Event, resolver: Resolver) -> None:
        role = "user" if event.role == "user" else "assistant"
        boundary = event.kind in self.LABELS
        super().__init__(classes="folded boundary" if boundary else f"folded {role}")
        self.event = event
        self.event_id = event.id
        self._resolver = resolver
        self._label = self.LABELS.get(event.kind) or ("you" if role == "user" else "reply")
        preview = event.preview.replace("\n", " ")
        self._preview = preview if len(preview) <= 50 else preview[:49] + "…"
        self._body = Vertical(classes="body")
        self._fold = Collapsible(self._body, title=self._title(f"large: {OPEN_HINT}"))

    def _title(self, size: str) -> str:
        return inert_markup(f"{self._label} ({size}): {self._preview}")  # the size first

    @property
    def title(self) -> str:
        return str(self._fold.title)

    @property
    def loaded(self) -> bool:
        return self.event.record is not None

    def compose(self) -> ComposeResult:
        yield self._fold

    async def on_collapsible_expanded(self, message: Collapsible.Expanded) -> None:
        if message.collapsible is not self._fold or self._body.children:
            return
        event = self.event
        try:
            record = event.record or await off_loop(lambda: self._resolver(event))
        except StoreError as exc:  # damaged or missing: say so, keep the app alive
            await self._body.mount(Static(inert_text(f"cannot load this: {exc}", "bold red")))
            return
        self.event.record = record
        if isinstance(record, MessageRecord) and self.event.role == "assistant":
            text = record.content
            body: Widget = AssistantMessage(text, record.reasoning or "", self.event.id)
        elif isinstance(record, MessageRecord):
            text = record.content
            body = Static(inert_text(text), classes="text")
        elif isinstance(record, CompactionRecord | BranchSummaryRecord):
            text = record.summary
            body = Static(inert_text(text), classes="text")
        else:
            text = ""
            body = Static(inert_text(f"{self.event.kind}: {self.event.preview}"), classes="text")
        self._fold.title = self._title(_size(text))
        await self._body.mount(body)
        self.call_after_refresh(self.scroll_visible, top=True, animate=False)  # its start


class EarlierFold(Widget):
    """The conversation before the compaction the path starts at, folded: read
    (its last :data:`EARLIER_SHOWN` events) when opened, never sent to the model."""

    DEFAULT_CSS = """
    EarlierFold { height: auto; }
    EarlierFold > Collapsible { padding: 0; border: none; }
    EarlierFold .body { height: auto; }
    """

    def __init__(self, ids: list[str], chat: ChatView) -> None:
        super().__init__(classes="earlier")
        self.ids = ids
        self._chat = chat
        self._body = Vertical(classes="body")
        many = len(ids)
        said = f"▲ {many} event{'s' * (many != 1)} before the compaction ({OPEN_HINT})"
        self._fold = Collapsible(self._body, title=inert_markup(said))

    def compose(self) -> ComposeResult:
        yield self._fold

    async def on_collapsible_expanded(self, message: Collapsible.Expanded) -> None:
        if message.collapsible is not self._fold or self._body.children:
            return
        ids, loader = self.ids[-EARLIER_SHOWN:], self._chat._loader
        try:
            events = await off_loop(lambda: loader(ids))
        except (StoreError, LookupError) as exc:
            await self._body.mount(Static(inert_text(f"cannot load them: {exc}", "bold red")))
            return
        if len(ids) < len(self.ids):
            await self._body.mount(Notice(f"… {len(self.ids) - len(ids)} older events not shown"))
        await self._body.mount_all(self._chat.widgets_apart(events))
        await self._body.mount(Notice("── the compaction: the model is sent its summary below"))


class ChatView(VerticalScroll):
    """The active path's events, a page at a time, and the live reply."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._ids: list[str] = []
        self._earlier: list[str] = []  # the events before the compaction shown first
        self._shown_from = 0
        self._loader: Loader = _no_session
        self._resolver: Resolver = _no_session_record
        self._loading = False  # an earlier page is being read
        self._shown = 0  # how many times a whole view was shown (a page read since is stale)
        self._tools: dict[str, ToolView] = {}
        self.live: AssistantMessage | None = None
        #: where relative paths of a call being made point (the session's directory)
        self.working_dir: Path | None = None

    # -- whole views --------------------------------------------------------

    async def show_path(
        self,
        entries: list[Entry],
        page: list[Event],
        loader: Loader,
        resolver: Resolver,
        earlier: list[str] | None = None,
    ) -> None:
        """Show the path (index entries) with its last ``page`` of events, already
        read; earlier pages are read with ``loader`` when the user asks. ``earlier``:
        the events before the compaction the path starts at, shown folded above it."""
        self._loader, self._resolver = loader, resolver
        await self._show([entry.id for entry in entries], page, earlier or [])

    async def start_at(self, event: Event) -> None:
        """Show ``event`` alone: a compaction just saved, where the path now begins
        (the store is not read again; the loader and resolver stay). What was shown
        before it (up to its parent) stays above it, folded."""
        before = [*self._earlier, *self._ids]
        if event.parent_id in before:
            before = before[: before.index(event.parent_id) + 1]
        await self._show([event.id], [event], before)

    async def _show(self, ids: list[str], page: list[Event], earlier: list[str]) -> None:
        self._shown += 1
        self._ids = ids
        self._earlier = earlier
        self._tools.clear()
        if self.live is not None:
            await self.live.stop_stream()
            self.live = None
        await self.remove_children()
        if earlier:
            await self.mount(EarlierFold(earlier, self))
        self._shown_from = len(self._ids) - len(page)
        if self._shown_from:
            await self.mount(self._more_button())
        await self.mount_all([self._widget(event) for event in page])
        self.scroll_end(animate=False)
        self.anchor()  # follow what is added (a streaming reply) until the user scrolls up

    def _more_button(self) -> Button:
        return Button(f"▲ {self._shown_from} earlier events", id="more", classes="more")

    async def show_earlier(self) -> None:
        """Mount the page before the first one shown (at the top)."""
        if not self._shown_from or self._loading:
            return
        start = max(0, self._shown_from - PAGE)
        ids, loader, shown = self._ids[start : self._shown_from], self._loader, self._shown
        self._loading = True
        try:
            events = await off_loop(lambda: loader(ids))
        finally:
            self._loading = False
        if shown != self._shown:  # another session, a reload or a compaction since
            return
        page = [self._widget(event) for event in events]
        button = self.query_one("#more", Button)
        self._shown_from = start
        await self.mount_all(page, after=button)
        if start:
            button.label = f"▲ {start} earlier events"
        else:
            await button.remove()

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "more":
            event.stop()
            await self.show_earlier()

    @property
    def mounted_events(self) -> int:
        return len(self._ids) - self._shown_from

    # -- one event ----------------------------------------------------------

    def widgets_apart(self, events: list[Event]) -> list[Widget]:
        """Widgets for ``events`` that are not the path shown (the conversation before
        a compaction): their calls and results pair among themselves, and a prompt
        among them marks none of the shown calls interrupted."""
        shown, self._tools = self._tools, {}
        try:
            return [self._widget(event) for event in events]
        finally:
            self._tools = shown

    def _widget(self, event: Event, current: str | None = None) -> Widget:
        record = event.record
        if isinstance(record, ToolCallRecord) or (record is None and event.kind == "tool_call"):
            call = record if isinstance(record, ToolCallRecord) else None
            view = ToolView(event, call, self._resolver, current)
            if view.call_id:
                self._tools[view.call_id] = view
            return view
        if event.kind == "tool_result":
            call_id = record.call_id if isinstance(record, ToolResultRecord) else None
            caller = self._tools.get(call_id) if call_id else self._first_waiting()
            if caller is not None:
                caller.show_result(event)
                return Widget(classes="empty")
            orphan = ToolView(event, None, self._resolver)
            orphan.show_result(event)
            return orphan
        if event.kind == "message" and event.role != "assistant":
            self.interrupt_waiting()  # a new prompt (or an interruption): no result will come
        if record is None and event.kind in ("message", "compaction", "branch_summary"):
            return FoldedMessage(event, self._resolver)  # in a blob: read when unfolded
        if isinstance(record, MessageRecord):
            if event.role == "assistant":
                if not record.content.strip() and not record.reasoning:
                    return Widget(classes="empty")  # a reply that only called tools
                cut = record.stop_reason == CUT_REASON
                return AssistantMessage(record.content, record.reasoning or "", event.id, cut)
            return UserMessage(event, record.content)
        if isinstance(record, CompactionRecord):
            return self._folded("── compacted: earlier messages summarised ──", record.summary)
        if isinstance(record, BranchSummaryRecord):
            return self._folded("── summary of a branch that was left ──", record.summary)
        files = files_mark(event)  # a snapshot or a restore: as the timeline says it
        said = files if files is not None else f"{event.kind}: {event.preview}"
        return Static(inert_text(said), classes="notice")

    def interrupt_waiting(self) -> None:
        """Calls still without a result will get none (a new prompt, a cancelled turn)."""
        for view in self._tools.values():
            if not view.has_result:
                view.interrupted()
        self._tools.clear()

    def _first_waiting(self) -> ToolView | None:
        """The oldest call still without a result (results follow their calls in order)."""
        return next((v for v in self._tools.values() if not v.has_result), None)

    def _folded(self, title: str, body: str) -> Collapsible:
        return Collapsible(
            Static(inert_text(body)), title=inert_markup(title), collapsed=True, classes="boundary"
        )

    async def add_event(self, event: Event) -> None:
        """A settled event of the running turn."""
        record = event.record
        if event.role == "assistant" and isinstance(record, MessageRecord) and self.live:
            self._ids.append(event.id)
            await self.live.settle(event, record)
            self.live = None
            return
        self._ids.append(event.id)
        current, base = None, self.working_dir
        if isinstance(record, ToolCallRecord) and record.name in DIFFED and base is not None:
            path = str(record.arguments.get("path", ""))  # the file before the call runs
            current = await off_loop(lambda: current_text(base, path)) if path else None
        await self.mount(self._widget(event, current))
        self.scroll_end(animate=False)

    async def live_reply(self) -> AssistantMessage:
        """The widget the current reply streams into (created on first use)."""
        if self.live is None:
            self.live = AssistantMessage()
            await self.mount(self.live)
        return self.live

    async def drop_live(self) -> None:
        """The reply failed or was cancelled: it was never stored, so it goes."""
        live, self.live = self.live, None
        if live is not None:
            await live.stop_stream()
            await live.remove()

    async def notice(self, text: str, *, error: bool = False) -> None:
        await self.mount(Notice(text, error=error))
        self.scroll_end(animate=False)


def _no_session(event_ids: list[str]) -> list[Event]:
    raise LookupError("no session is shown")


def _no_session_record(event: Event) -> Record:
    raise LookupError("no session is shown")

"""The terminal UI: a thin Textual shell over one :class:`~infai.agent.AgentSession`.

The app never writes to the store itself: prompts, cancellation, compaction,
branch selection and model switches all go through the session object, the
same one the CLI and the server drive. What is shown comes from the session's
events as they are saved (a user's prompt appears once it is durable) and from
live deltas while a reply streams. "ask" permissions open a modal; the turn
waits for the answer.

Ctrl-C cancels a turn in flight (the session records the interruption and
stays valid); a second Ctrl-C within two seconds quits. Quitting cancels any
turn and waits for it to settle before the session is closed.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import suppress
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Footer, Input, Tree
from textual.worker import Worker, WorkerCancelled, WorkerFailed

from infai.agent import AgentSession, Saved, Streamed, TurnEnded
from infai.agent.compaction import CompactionFailed
from infai.llm import Notice, ReasoningDelta, TextDelta, close_model
from infai.store import Entry, MessageRecord, StoreError
from infai.tools.policy import Ask, Reply

from ..workspace import Workspace
from .chat import ChatView
from .modals import ApprovalScreen, HelpScreen, RenameScreen, SessionPicker
from .panels import PendingBar, PromptInput, Status, StatusBar, Timeline, branch_label, fork_point

QUIT_WINDOW = 2.0
#: how the agent loop's notice of an automatic compaction begins
COMPACTING = "compacting"
#: how far back from HEAD the status bar looks for its branch's fork, between reloads
FORK_WALK = 256

CSS = """
#main { height: 1fr; }
ChatView { width: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
Timeline { width: 40%; max-width: 64; border-left: vkey $panel; display: none; }
Timeline { overflow-x: hidden; }  /* a long label is cut, never a stray scrollbar */
Timeline.shown { display: block; }
PendingBar { height: auto; color: $warning; padding: 0 1; display: none; }
#prompt { height: 3; }
StatusBar { height: 1; background: $panel; color: $text; }
.user { background: $boost; padding: 0 1; margin: 1 0 0 0; text-style: bold; }
.interrupted { color: $warning; text-style: italic; }
.notice { color: $text-muted; text-style: italic; }
.notice.error { color: $error; text-style: bold; }
ToolView .call { color: $text-muted; }
ToolView.failed .call { color: $error; }
.boundary { color: $accent; }
.empty { height: 0; }
.more { width: 100%; }
"""


class InfaiApp(App[None]):
    """Chat, timeline, sessions and approvals over the workspace's sessions."""

    TITLE = "infai"
    CSS = CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "cancel / quit", priority=True),
        Binding("ctrl+t", "toggle_timeline", "timeline"),
        Binding("ctrl+o", "sessions", "sessions"),
        Binding("ctrl+n", "new_session", "new"),
        Binding("f2", "rename", "rename"),
        Binding("f1", "help", "help"),
        Binding("escape", "back_to_head", "back to HEAD", show=False),
    ]

    def __init__(self, workspace: Workspace, session_id: str | None = None) -> None:
        super().__init__()
        self.workspace = workspace
        workspace.approver = self.approve
        self.session: AgentSession | None = None
        self._initial = session_id
        self._created: set[str] = set()  # sessions this app made (removed again if left empty)
        self.state = Status()
        self.turn: Worker[None] | None = None
        self._armed = -QUIT_WINDOW
        self._fork: tuple[str | None, int | None] = (None, None)  # (HEAD, its fork point)

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield ChatView(id="chat")
            yield Timeline(id="timeline")
        yield PendingBar(id="pending")
        yield PromptInput(placeholder="Ask infai…  (/help for commands)", id="prompt")
        yield StatusBar(id="status")
        yield Footer()

    async def on_mount(self) -> None:
        await self.open_session(self._initial)
        self.query_one("#prompt", Input).focus()

    async def on_unmount(self) -> None:
        """However the app ends, a running turn settles before the session closes."""
        await self._settle_turn()
        await self._close_session()
        await close_model(self.workspace.model)  # in the loop that used its connections

    # -- sessions -------------------------------------------------------------

    @property
    def busy(self) -> bool:
        turn = self.turn  # a turn or a compaction; busy until it has fully unwound
        return turn is not None and not turn.is_finished

    async def open_session(self, session_id: str | None) -> bool:
        """Close the current session (if any) and open another (None: a new one)."""
        if self.busy:
            self.notify("a turn is running (Ctrl-C cancels it)", severity="warning")
            return False
        if session_id is not None and self.session and session_id == self.session.session_id:
            return True  # already open
        try:
            if session_id is None:
                session_id = self.workspace.new_session()
                self._created.add(session_id)
            # waiting for another process's writer lock must not freeze the screen
            opened = await asyncio.to_thread(self.workspace.open, session_id)
        except StoreError as exc:
            self.notify(f"cannot open the session: {exc}", severity="error", timeout=10)
            return False
        await self._close_session()
        self.session = opened
        await self.reload()
        for note in self.workspace.store.recovery_notes.get(session_id, []):
            await self.query_one(ChatView).notice(f"recovered: {note}")
            self.notify(f"recovered: {note}", severity="warning", timeout=10)
        return True

    async def _close_session(self) -> None:
        """Close the open session; one this app created and nobody used (no event,
        no name) goes away."""
        session, self.session = self.session, None
        if session is None:
            return
        empty = session.writer.count == 0
        session.close()
        sid = session.session_id
        if empty and sid in self._created and not self.workspace.store.info(sid).name:
            self.workspace.store.remove_session(sid)

    async def reload(self) -> None:
        """Show the session as stored: the path to the pending parent (or HEAD)."""
        session = self.session
        if session is None:
            return
        writer = session.writer
        pending = writer.pending_parent
        entries = writer.path(pending) if writer.count else []
        chat = self.query_one(ChatView)
        await chat.show_path(entries, writer.event, writer.resolve)
        self.query_one(PendingBar).show(writer.entry(pending) if pending else None)
        if pending is None:  # the path shown is HEAD's: where its branch forked, for free
            self._fork = (writer.head, fork_point(entries))
        self._refresh_timeline()
        self.state.used_tokens = self._last_input_tokens(entries)
        self._refresh_status()

    def _last_input_tokens(self, entries: list) -> int:  # type: ignore[type-arg]
        assert self.session is not None
        for entry in reversed(entries[-50:]):
            if entry.role == "assistant" and entry.kind == "message":
                record = self.session.writer.event(entry.id).record
                if isinstance(record, MessageRecord) and record.usage is not None:
                    return record.usage.input_tokens
        return 0

    def _refresh_status(self) -> None:
        session = self.session
        if session is not None:
            writer = session.writer
            self.state.model = session.model.name
            self.state.context_window = session.model.context_window
            head = writer.entry(writer.head) if writer.head else None
            fork = self._head_fork(head) if head else None
            self.state.branch = branch_label(head.seq if head else -1, writer.count, fork)
            name = self.workspace.store.info(session.session_id).name
            self.title = f"infai — {name or session.session_id[:13]}"
        self.query_one(StatusBar).show(self.state)

    def _head_fork(self, head: Entry) -> int | None:
        """Where HEAD's branch forked: known from the last look, brought up to date by
        walking back from HEAD to where it was then (index entries, a few at most)."""
        assert self.session is not None
        known, fork = self._fork
        entry = head
        for _ in range(FORK_WALK):
            if entry.id == known:
                break
            if entry.branch_from is not None or entry.parent_seq < 0:
                fork = entry.parent_seq if entry.branch_from is not None else None
                break
            entry = self.session.writer.entry_at(entry.parent_seq)
        else:
            fork = None  # too far to look (not shown rather than wrong)
        self._fork = (head.id, fork)
        return fork

    # -- prompts and turns ----------------------------------------------------

    async def on_input_submitted(self, message: Input.Submitted) -> None:
        prompt = message.input
        if not isinstance(prompt, PromptInput):
            return
        text = message.value.strip()
        if not text:
            return
        if text.startswith("/"):
            prompt.clear()
            await self.command(text)
            return
        if self.busy:  # keep what was typed: nothing is lost
            self.notify("a turn is running: send when it ends, or Ctrl-C", severity="warning")
            return
        if self.session is None:
            self.notify("no session is open (Ctrl-O)", severity="error")
            return
        text = prompt.expanded(text)  # what was pasted, in full
        prompt.clear()
        self.turn = self.run_worker(self._turn(text), group="turn", exit_on_error=False)

    async def _turn(self, text: str) -> None:
        assert self.session is not None
        chat = self.query_one(ChatView)
        self.state.notice = ""
        try:
            async for event in self.session.prompt(text):
                if isinstance(event, Streamed):
                    inner = event.event
                    if isinstance(inner, TextDelta):
                        await (await chat.live_reply()).append_text(inner.text)
                        self._durability("streaming, not saved yet")
                    elif isinstance(inner, ReasoningDelta):
                        (await chat.live_reply()).append_reasoning(inner.text)
                    elif isinstance(inner, Notice):
                        await chat.notice(inner.message)
                        self.state.notice = inner.message  # "compacting: …" until it is done
                        self.notify(inner.message, timeout=4)
                        self._refresh_status()
                elif isinstance(event, Saved):
                    await self._saved(event)
                elif isinstance(event, TurnEnded) and event.outcome == "error":
                    await chat.drop_live()
                    await chat.notice(f"error: {event.error}", error=True)
        except asyncio.CancelledError:
            await chat.drop_live()
            chat.interrupt_waiting()  # a call being asked about or running gets no result
            await chat.notice("[turn interrupted] — the session is saved; go on when ready")
            if self.state.notice.startswith(COMPACTING):
                self.state.notice = "compaction cancelled"
            self._durability("saved")
            self._refresh_status()
            raise
        except StoreError as exc:  # a full disk, a lost database, another writer first
            await chat.drop_live()
            await chat.notice(f"the session could not be saved: {exc}", error=True)
            self.notify(f"not saved: {exc}", severity="error", timeout=10)
            self._durability("NOT saved")
        finally:
            self._refresh_timeline()

    def _refresh_timeline(self, rebuild: bool = False) -> None:
        """Bring the timeline (if shown) up to date: new events added, else rebuilt."""
        timeline = self.query_one(Timeline)
        if self.session is None or not timeline.has_class("shown"):
            return
        writer, sid = self.session.writer, self.session.session_id
        head, pending = writer.head, writer.pending_parent
        if not rebuild and timeline.session_id == sid and timeline.loaded <= writer.count:
            new = [writer.entry_at(seq) for seq in range(timeline.loaded, writer.count)]
            if timeline.extend(new, head, pending):
                return
        timeline.load(list(writer.entries()), head, pending, sid)

    async def _saved(self, event: Saved) -> None:
        chat = self.query_one(ChatView)
        stored = event.event
        if stored.kind == "compaction":  # automatic: the chat now starts at the summary
            detail = self.state.notice.removeprefix(COMPACTING).strip(" :…")
            await self.reload()
            await self._compacted(f" ({detail} before)" if detail else "")
            return
        await chat.add_event(stored)
        record = stored.record
        if isinstance(record, MessageRecord) and record.usage is not None:
            self.state.used_tokens = record.usage.input_tokens
        if stored.role == "user":
            self.query_one(PendingBar).show(None)
        self._durability("saved")

    def _durability(self, state: str) -> None:
        if self.state.durability != state:
            self.state.durability = state
            self._refresh_status()
        elif state == "saved":
            self._refresh_status()

    async def _compacted(self, detail: str = "") -> None:
        """Say that a compaction is done, in the chat (after the reload) and the bar."""
        self.state.notice = "✓ compacted"
        await self.query_one(ChatView).notice(
            f"compacted{detail}: the context now starts from the summary above"
        )
        self._refresh_status()

    async def approve(self, ask: Ask) -> Reply:
        """The policy's approver: a modal, answered by the user (the turn waits)."""
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        screen = ApprovalScreen(ask)

        def answered(answer: Reply | None) -> None:
            if not future.done():
                future.set_result(answer or "deny")

        self.push_screen(screen, callback=answered)
        try:
            return await future
        finally:
            if screen.is_active:  # the turn was cancelled while asking
                screen.dismiss("deny")

    # -- commands ---------------------------------------------------------------

    async def command(self, text: str) -> None:
        name, _, argument = text[1:].partition(" ")
        argument = argument.strip()
        if name == "compact":
            if self.busy or self.session is None:
                self.notify("wait for the turn to end", severity="warning")
            else:
                self.turn = self.run_worker(self._compact(), group="turn", exit_on_error=False)
        elif name == "model":
            await self.switch_model(argument)
        elif name == "rename":
            self.rename(argument or None)
        elif name == "new":
            await self.action_new_session()
        elif name == "sessions":
            self.action_sessions()
        elif name == "help":
            self.action_help()
        elif name in ("quit", "exit"):
            await self.action_quit()
        else:
            self.notify(f"unknown command /{name} (see /help)", severity="error")

    async def _compact(self) -> None:
        """A manual compaction: a turn of its own (Ctrl-C cancels it; nothing changes)."""
        assert self.session is not None
        self.notify("compacting…")
        self.state.notice = f"{COMPACTING}…"
        self._refresh_status()
        try:
            await self.session.compact()
        except (CompactionFailed, StoreError) as exc:
            self.state.notice = "compaction failed"
            self._refresh_status()
            self.notify(f"compaction failed, nothing changed: {exc}", severity="error")
            return
        except asyncio.CancelledError:
            self.state.notice = "compaction cancelled"
            self._refresh_status()
            raise
        await self.reload()
        await self._compacted()
        self.notify("compacted: the context now starts from the summary")

    async def switch_model(self, name: str) -> None:
        if not name:
            self.notify(f"model: {self.workspace.model.name} (/model NAME to switch)")
            return
        if self.busy:
            self.notify("wait for the turn to end", severity="warning")
            return
        space = self.workspace
        try:
            if self.session is None:
                model = space.build_model(name)
                old, space.model_name, space.model = space.model, name, model
            else:  # the session stays open: its writer, its picked event, its rules
                old = space.use_model(self.session, name)
        except (ValueError, StoreError) as exc:  # an unknown model, a key missing
            self.notify(str(exc), severity="error", timeout=10)
            return
        await close_model(old)
        self._refresh_status()
        self.notify(f"model: {space.model.name}")

    def rename(self, name: str | None) -> None:
        """Name the session ("": no name); None asks for the name in a dialog."""
        if self.session is None:
            return
        sid = self.session.session_id
        if name is not None:
            try:
                self.workspace.store.update_info(sid, name=name or None)
            except StoreError as exc:
                self.notify(f"cannot rename: {exc}", severity="error", timeout=10)
            self._refresh_status()
            return

        def done(new: str | None) -> None:  # None: Esc, the name is kept
            if new is not None and self.session is not None:
                self.rename(new)

        self.push_screen(RenameScreen(self.workspace.store.info(sid).name), callback=done)

    # -- actions ----------------------------------------------------------------

    async def action_interrupt(self) -> None:
        now = time.monotonic()
        if self.busy and self.turn is not None and not self.turn.is_cancelled:
            self.turn.cancel()
            self._armed = now
            self.notify("cancelled; Ctrl-C again to quit", timeout=QUIT_WINDOW)
            return
        if now - self._armed < QUIT_WINDOW:
            await self.action_quit()
            return
        self._armed = now
        self.notify("press Ctrl-C again to quit", timeout=QUIT_WINDOW)

    async def action_quit(self) -> None:
        await self._settle_turn()
        await self._close_session()
        await close_model(self.workspace.model)
        self.exit()

    async def _settle_turn(self) -> None:
        """Cancel a running turn and wait until it has recorded its interruption."""
        turn = self.turn
        if turn is not None and not turn.is_finished:
            turn.cancel()
            with suppress(WorkerCancelled, WorkerFailed):
                await turn.wait()

    def action_toggle_timeline(self) -> None:
        timeline = self.query_one(Timeline)
        if timeline.has_class("shown") and not timeline.has_focus:
            timeline.focus()  # shown but elsewhere: go to it
            return
        if timeline.has_class("shown"):
            timeline.remove_class("shown")
            self.query_one("#prompt", Input).focus()
            return
        timeline.add_class("shown")
        self._refresh_timeline(rebuild=True)
        timeline.focus()

    async def on_tree_node_selected(self, message: Tree.NodeSelected[str]) -> None:
        event_id = message.node.data
        if not event_id or self.session is None:
            return
        if self.busy:
            self.notify("wait for the turn to end", severity="warning")
            return
        writer = self.session.writer
        self.session.select(None if event_id == writer.head else event_id)
        await self.reload()
        self.query_one("#prompt", Input).focus()

    async def action_back_to_head(self) -> None:
        if self.session is not None and self.session.writer.pending_parent and not self.busy:
            self.session.select(None)
            await self.reload()

    def action_sessions(self) -> None:
        current = self.session.session_id if self.session else None

        async def picked(choice: str | None) -> None:
            if choice == SessionPicker.NEW:
                await self.open_session(None)
            elif choice and choice != current:
                await self.open_session(choice)

        self.push_screen(SessionPicker(self.workspace.sessions(), current), callback=picked)

    async def action_new_session(self) -> None:
        await self.open_session(None)

    def action_rename(self) -> None:
        self.rename(None)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

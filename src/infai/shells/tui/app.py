"""The terminal UI: a thin Textual shell over one :class:`~infai.agent.AgentSession`.

The app never appends to a session itself: prompts, cancellation, compaction,
branch selection and model switches all go through the session object, the
same one the CLI and the server drive (it only names, creates and removes
sessions, besides reading them). What is shown comes from the session's
events as they are saved (a user's prompt appears once it is durable) and from
live deltas while a reply streams. "ask" permissions open a modal; the turn
waits for the answer.

Ctrl-C cancels a turn in flight (the session records the interruption and
stays valid), else clears a draft into the prompt history; a second Ctrl-C
within two seconds quits. Quitting cancels any
turn and waits for it to settle before the session is closed.

Three things each happen in one place: a turn starts in
:meth:`InfaiApp._start_turn`, through the session's own turn slot
(:meth:`~infai.agent.AgentSession.start`; Ctrl-C is its
:meth:`~infai.agent.AgentSession.cancel`), watched by one Textual worker of
group "turn" that reads the session's event hub until the turn has ended; the
agent's events are handled by :meth:`InfaiApp._on_event`, which sees every
append the session makes (the interruption marker and a compaction included),
so nothing is read back from the store to show them; and every store call the
app makes itself is a function of :mod:`.store_io`, run in a thread so the
screen never waits on the disk or the database, reading the session through
its read-only view (opening, closing and listing sessions go through the
app's :class:`~.backend.Backend`: a local store, or a server's sessions with
``infai --remote URL``, :mod:`.remote_io`). The harness
(:class:`~infai.agent.Harness`) builds and switches the models and closes them
when the app ends, once.

Three base classes carry the rest: :mod:`.files` (a continue's restore, asked
about; whether the disk is HEAD's; an event's diff), :mod:`.prompting` (what
Enter hands over, the queue, the history, other processes' appends) and
:mod:`.commands` (/compact, /model, /rename); between them :mod:`.attached`
(questions; a server's session followed), :mod:`.elsewhere` (the session let go
between turns), :mod:`.rewind` (Esc, Esc Esc), :mod:`.scrollback`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from contextlib import suppress
from typing import Any, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Footer, Tree
from textual.worker import Worker, WorkerCancelled, WorkerFailed

from infai.agent import (
    AgentEvent,
    AgentSession,
    Lagged,
    Saved,
    SlotConflict,
    Streamed,
    Turn,
    TurnEnded,
    event_tokens,
)
from infai.errors import InfaiError
from infai.llm import Notice, ReasoningDelta, TextDelta
from infai.store import (
    CorruptionError,
    EventNotFound,
    MessageRecord,
    SearchHit,
    SessionNotFound,
    StoreError,
)

from ..inert import inert
from . import store_io
from .backend import LOCAL, Backend
from .chat import PAGE, ChatView
from .commands import COMPACTING
from .files import Files
from .held import ask_held
from .keys import Keyboard, where_keys_are
from .modals import HelpScreen, SessionPicker
from .panels import PendingBar, QueueBar, Status, StatusBar, Timeline, home_short
from .prompt import Arrivals, PromptInput
from .seam import TuiHarness
from .search import SearchScreen
from .store_io import Head, SessionHeld, off_loop
from .usercontext import QUIT_WINDOW as QUIT_WINDOW

#: store errors of reading, not writing: a damaged or missing blob or line, an id not there
READ_FAILURES = (CorruptionError, EventNotFound, SessionNotFound)


class InfaiApp(Keyboard, Files):
    """Chat, timeline, sessions and approvals over the harness's sessions."""

    TITLE = "infai"
    #: Textual's palette lists Textual's commands, not infai's: F1 lists infai's
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "cancel / quit", priority=True),
        Binding("ctrl+t", "toggle_timeline", "timeline"),
        Binding("ctrl+o", "sessions", "sessions"),
        Binding("ctrl+f", "search", "search"),
        Binding("ctrl+n", "new_session", "new"),
        Binding("f2", "rename", "rename"),
        Binding("f1", "help", "help"),
        Binding("escape", "escape", "close the panel / back to HEAD", show=False),
    ]

    def __init__(
        self, harness: TuiHarness, session_id: str | None = None, *, backend: Backend = LOCAL
    ) -> None:
        super().__init__()
        self.harness = harness
        self.backend = backend  # a local store's sessions, or a server's (:mod:`.remote_io`)
        harness.approver = self.approve
        self.session: AgentSession | None = None
        self._initial = session_id
        self._created: set[str] = set()  # sessions this app made (removed again if left empty)
        self.state = Status()
        #: the worker of the turn (or compaction) running: the app is busy until it ends
        self.turn: Worker[None] | None = None
        self._cancelled = False  # Ctrl-C was pressed for the running turn
        self._shut = False  # the app has closed its session and the harness
        self._ending = False  # the app is ending: nothing more is started
        #: the session open when the app ended, if it is kept (not an empty new one)
        self.left_session: str | None = None
        self.taken = 0  # prompts and commands taken from the prompt box (tests wait on it)
        self._armed = -QUIT_WINDOW
        self.head = Head()  # the status bar's name, HEAD and fork, kept between reloads
        self._timeline_lock = asyncio.Lock()  # one timeline update at a time
        #: one reload at a time: a look that began before a pick must not show its
        #: older answer after the pick's (the pending bar hidden, the path wrong)
        self._reload_lock = asyncio.Lock()
        self.arrivals = Arrivals()  # when keys were received: a paste that came as keys
        #: prompts typed during a turn, sent one by one when it ends
        self.queued: list[str] = []
        self._stale = False  # another process appended during a turn: reload after it
        self._watching = threading.Event()  # set: the store's change feed stops
        self._outcome = "done"  # how the last turn ended: "done", "error", "cancelled"

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield ChatView(id="chat")
            yield Timeline(id="timeline")
        yield PendingBar(id="pending")
        yield QueueBar(id="queue")
        yield PromptInput(placeholder="Ask infai…  (/help for commands)", id="prompt")
        yield StatusBar(id="status")
        yield Footer()

    def post_message(self, message: Message) -> bool:
        """Every message the app receives; a key's stamp is noted (see :mod:`.prompt`)."""
        if isinstance(message, events.Key):
            self.arrivals.add(message.time)
        return super().post_message(message)

    async def on_mount(self) -> None:
        self.prompt.arrivals = self.arrivals
        self.prompt.focus()
        self.watch(self.screen, "focused", self._focus_moved)
        self._watch_files()
        self.state.model = self.harness.model.name
        self.open_first(self._initial)  # after the first frame: the screen is never blank
        if self.harness.store.shared_writers:  # others may append to the open session
            self.run_worker(self._watch, thread=True, group="watch", exit_on_error=False)

    async def on_unmount(self) -> None:
        """However the app ends, a running turn settles before the session closes."""
        await self._shut_down()

    async def _shut_down(self) -> None:
        """Settle the turn, close the session, then the harness and its models (in
        the loop that used their connections); once, however often the app ends."""
        self._ending = True
        self._watching.set()
        self._detach()  # a server's turn goes on there
        self.keep_drafts()  # the box's and the queue's: not sent, kept in the history
        self.queued.clear()
        await self.stop_opening()
        await self._settle_turn()
        session, self.session = self.session, None
        if session is not None and (session.session_id not in self._created or self.head.count):
            self.left_session = session.session_id  # kept: the shell says how to come back
        await self._close_session(session)
        if not self._shut:
            self._shut = True
            await self.harness.aclose()

    # -- sessions -------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A turn or a compaction is running (until its worker has fully unwound),
        or the session's slot is taken."""
        turn = self.turn
        if turn is not None and not turn.is_finished:
            return True
        return self.session is not None and self.session.busy is not None

    async def open_session(self, session_id: str | None, *, first: bool = False) -> bool:
        """Close the current session (if any) and open another (None: a new one)."""
        if self._opening and not first:  # the first one: it comes before any other
            self.notify("the session is still opening", severity="warning")
            return False
        if self.busy:
            self.notify("a turn is running (Ctrl-C cancels it)", severity="warning")
            return False
        if session_id is not None and self.session and session_id == self.session.session_id:
            return True  # already open
        try:
            # waiting for another process's writer lock must not freeze the screen
            opened, created = await self.backend.open(self.harness, session_id)
        except SessionHeld as held:  # said at once, with what to do instead
            ask_held(self, held)
            return False
        except InfaiError as exc:  # a store's, or a server's that cannot be reached
            self.notify(f"cannot open the session: {exc}", severity="error", timeout=10)
            return False
        if created:
            self._created.add(opened.session_id)
        # the new session is the app's before the old one closes: if that fails,
        # the new one is still open (and closed with the app), never orphaned
        previous, self.session = self.session, opened
        await self._close_session(previous)
        await self.reload()
        for note in self.harness.store.recovery_notes.get(opened.session_id, []):
            await self.query_one(ChatView).notice(f"recovered: {note}")
            self.notify(f"recovered: {note}", severity="warning", timeout=10)
        # it runs under its own directory's configuration: what that file left out
        for notice in self.harness.take_notices():
            await self.query_one(ChatView).notice(f"config: {notice}")
            self.notify(notice, severity="warning", timeout=10)
        await self._files_opened(opened)
        self._follow_session(opened)  # a server's: what happens there without this app
        return True

    async def _close_session(self, session: AgentSession | None) -> None:
        """Close ``session``; one this app created and nobody used (no event, no
        name) goes away. A failure is shown; the session's lock is released anyway."""
        if session is None:
            return
        await self._files_settled()  # a look at its files ends before it closes
        created_here = session.session_id in self._created
        store = self.harness.store
        try:
            await self.backend.close(session, store, created_here)
        except InfaiError as exc:
            self.notify(f"closing the session failed: {exc}", severity="error", timeout=10)

    async def reload(self) -> None:
        """Show the session as stored: the path to the pending parent (or HEAD).
        Reloads run one after another, each reading the store once the one
        before has shown what it read, so the last one asked for shows last."""
        async with self._reload_lock:
            await self._reload()

    async def _reload(self) -> None:
        session = self.session
        if session is None:
            return
        store = self.harness.store
        shown = await off_loop(lambda: store_io.load_path(session, store, PAGE))
        if session is not self.session:
            return  # another session was opened meanwhile: it shows itself
        chat = self.query_one(ChatView)
        loader, resolver = store_io.event_loader(session), store_io.record_resolver(session)
        chat.working_dir = session.working_dir
        await chat.show_path(shown.entries, shown.page, loader, resolver, shown.earlier)
        self.query_one(PendingBar).show(shown.pending)
        self.head = shown.head
        self.state.used_tokens = shown.used_tokens
        await self._refresh_timeline()
        self._refresh_status()

    def _refresh_status(self) -> None:
        """The status bar, from what the app knows: no store call."""
        session = self.session
        if session is not None:
            self.state.model = session.model.name
            self.state.context_window = session.model.context_window
            self.state.branch = self.head.label
            self.state.working_dir = home_short(session.working_dir)
            self.title = inert(f"infai — {self.head.name or session.session_id[:13]}")
        self.query_one(StatusBar).show(self.state)

    # -- prompts and turns ----------------------------------------------------

    def _start_turn(self, text: str) -> None:
        """The one place a prompt's turn starts: in the session's turn slot, watched
        by a worker the app is :attr:`busy` with until it has fully unwound. The
        prompt goes into the history as it is sent (a queued one taken back does not)."""
        self._remember(text)
        self._run_busy(self._turn(text))

    def _run_busy(self, work: Coroutine[Any, Any, None]) -> None:
        """Run a turn's watcher or a compaction as the app's one busy worker."""
        self._cancelled = False
        self._outcome = "cancelled"  # until the turn says how it ended
        self.turn = self.run_worker(work, group="turn", exit_on_error=False)

    async def on_worker_state_changed(self, message: Worker.StateChanged) -> None:
        if message.worker is self.turn and message.worker.is_finished and not self._ending:
            self.check_files()
            await self._after_turn(self._outcome)

    async def _turn(self, text: str) -> None:
        """Start the turn and show its events from the session's hub until it ends
        (a worker of group "turn")."""
        session = self.session
        assert session is not None
        self.state.notice = ""
        if not await self._before_send(session, text):  # @files read, a pick's files back
            return
        events = session.hub.subscribe()  # before the turn starts: nothing is missed
        turn: Turn | None = None
        try:
            turn = await session.start(text)
            async for event in events:
                await self._on_event(event, turn)
                if isinstance(event, TurnEnded):
                    break
            await turn.wait()  # its slot is free: a queued prompt can start right after
        except asyncio.CancelledError:  # the worker itself (the app is going): the turn too
            if turn is not None and session.turn is turn:
                with suppress(SlotConflict):  # it ended meanwhile
                    await session.cancel(turn.id)
            raise
        except Lagged:  # fell too far behind the stream: show the session as stored
            if turn is not None:
                await turn.wait()
            await self.reload()
        except (SlotConflict, StoreError) as exc:  # the slot or another process's lease
            chat = self.query_one(ChatView)
            await chat.notice(f"the turn did not start: {exc}", error=True)
            self.notify(f"the turn did not start: {exc}", severity="error", timeout=10)
            self.give_back([text])  # not sent: back in the box, not lost
        finally:
            events.close()
            await self._refresh_timeline()

    async def _on_event(self, event: AgentEvent, turn: Turn | None = None) -> None:
        """The one place the agent's events are shown: deltas, notices, saved
        events (the interruption marker and a compaction too) and a turn's end."""
        if self._snapshot_progress(event):  # the status bar's alone
            return
        chat = self.query_one(ChatView)
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
        elif isinstance(event, TurnEnded):
            await self._ended(event, turn)

    async def _ended(self, ended: TurnEnded, turn: Turn | None) -> None:
        """A turn is over: a reply cut short goes; a cancel or a failure is said."""
        chat = self.query_one(ChatView)
        self._outcome = ended.outcome
        if not self.state.notice.startswith("✓"):  # a retry's, a failed compaction's: over
            self.state.notice = ""
            self._refresh_status()
        if ended.outcome == "cancelled":
            await chat.drop_live()
            chat.interrupt_waiting()  # a call being asked about or running gets no result
            await chat.notice("turn interrupted — the session is saved; go on when ready")
            if self.state.notice.startswith(COMPACTING):
                self.state.notice = "compaction cancelled"
            self._durability("saved")
            self._refresh_status()
        elif ended.outcome == "error":
            if turn is not None:
                await turn.wait()  # what ended it is known once it has ended
            failure = turn.failure if turn is not None else None
            await chat.drop_live()
            if isinstance(failure, READ_FAILURES):  # what is shown as saved is saved
                said = f"the session could not be read: {failure}"
                await chat.notice(f"{said} (what is shown as saved is saved)", error=True)
                self.notify(said, severity="error", timeout=10)
                self._durability("saved; read failed")
            elif isinstance(failure, StoreError):  # a full disk, a lost database
                await chat.notice(f"the session could not be saved: {failure}", error=True)
                self.notify(f"not saved: {failure}", severity="error", timeout=10)
                self._durability("NOT saved")
            else:
                await chat.notice(f"error: {ended.error}", error=True)

    async def _refresh_timeline(self, rebuild: bool = False) -> None:
        """Bring the timeline (if shown) up to date: new events added, else rebuilt.
        The index entries are read in a thread; one update runs at a time."""
        timeline = self.query_one(Timeline)
        async with self._timeline_lock:
            session = self.session
            if session is None or not timeline.has_class("shown"):
                return
            sid = session.session_id
            since = None if rebuild or timeline.session_id != sid else timeline.loaded
            rows = await off_loop(lambda: store_io.timeline_rows(session, since))
            if session is not self.session:
                return
            if rows.since is not None and timeline.extend(rows.entries, rows.head, rows.pending):
                return
            if rows.since is not None:  # a fork the tree cannot grow into: rebuild
                rows = await off_loop(lambda: store_io.timeline_rows(session, None))
            timeline.load(rows.entries, rows.head, rows.pending, sid)

    async def _saved(self, event: Saved) -> None:
        chat = self.query_one(ChatView)
        stored = event.event
        self._heard(stored)  # built on another process's append: shown after the turn
        self.head.saved(stored)
        if stored.kind == "compaction":  # the chat (the path) now starts at the summary
            detail = self.state.notice.removeprefix(COMPACTING).strip(" :…")
            await chat.start_at(stored)
            self.query_one(PendingBar).show(None)  # the summary followed the pick
            self.state.used_tokens = event_tokens(stored)  # the context is the summary
            await self._compacted(f" ({detail} before)" if detail else "")
            return
        await chat.add_event(stored)
        self._files_recorded(stored.kind)  # a snapshot: the disk is HEAD's now
        record = stored.record
        if isinstance(record, MessageRecord) and record.usage is not None:
            self.state.used_tokens = record.usage.input_tokens + record.usage.output_tokens
        else:  # estimated until the next reply reports the count (as the agent does)
            self.state.used_tokens += event_tokens(stored)
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
        """Say that a compaction is done, in the chat (below the summary) and the bar."""
        self.state.notice = "✓ compacted"
        await self.query_one(ChatView).notice(
            f"compacted{detail}: the context now starts from the summary above"
        )
        self._refresh_status()

    # -- commands ---------------------------------------------------------------

    async def command(self, text: str) -> None:
        name, _, argument = text[1:].partition(" ")
        argument = argument.strip()
        if name == "compact":
            if self.busy or self.session is None:
                self.notify("wait for the turn to end", severity="warning")
            else:
                self._run_busy(self._compact())
        elif name == "model":
            await self.switch_model(argument)
        elif name == "rename":
            await self.rename(argument or None)
        elif name == "new":
            await self.action_new_session()
        elif name == "sessions":
            await self.action_sessions()
        elif name == "search":
            self.action_search(argument)
        elif name == "help":
            self.action_help()
        elif name in ("quit", "exit"):
            await self.action_quit()
        else:  # not sent, never lost: back in the box to edit
            self.give_back([text])
            self.notify(
                f"unknown command /{name}: not sent, it is back in the prompt (see /help)",
                severity="error",
            )

    # -- actions ----------------------------------------------------------------

    def _cancel_turn(self) -> None:
        """Cancel what runs: a turn in the session's slot (its watcher shows the
        interruption as the session records it), else the worker (a compaction)."""
        session, worker = self.session, self.turn
        if session is not None and session.turn is not None:
            # not awaited here: the turn's own unwinding (a dialog closing) needs the app
            self.run_worker(session.cancel(session.turn.id), group="cancel", exit_on_error=False)
        elif worker is not None and not worker.is_finished:
            worker.cancel()

    async def action_quit(self) -> None:
        await self._shut_down()
        self.exit()

    async def _settle_turn(self) -> None:
        """Cancel a running turn and wait until it has recorded its interruption."""
        session, worker = self.session, self.turn
        if session is not None and session.turn is not None:
            with suppress(SlotConflict):  # it ended meanwhile
                await session.cancel()
        elif worker is not None and not worker.is_finished:
            worker.cancel()
        if worker is not None and not worker.is_finished:
            with suppress(WorkerCancelled, WorkerFailed):
                await worker.wait()

    async def action_toggle_timeline(self) -> None:
        """Ctrl-T opens the timeline (focused) and closes it (the prompt focused)."""
        timeline = self.query_one(Timeline)
        if timeline.has_class("shown"):
            self.on_timeline_closed()
            return
        timeline.add_class("shown")
        timeline.focus()
        await self._refresh_timeline(rebuild=True)

    def on_timeline_closed(self, message: Timeline.Closed | None = None) -> None:
        """Esc on the timeline, or Ctrl-T: it goes, the prompt has the focus."""
        self.query_one(Timeline).remove_class("shown")
        self.prompt.focus()

    def _focus_moved(self, focused: Widget | None) -> None:
        """Where the keys are is always drawn: the prompt's border names the panel
        that has them (and that typing comes back to the prompt)."""
        self.prompt.border_title = where_keys_are(focused)

    async def on_tree_node_selected(self, message: Tree.NodeSelected[str]) -> None:
        if message.node.data:
            await self.pick(message.node.data)

    async def pick(self, event_id: str) -> None:
        """The next prompt continues from ``event_id`` (HEAD: the pick is forgotten);
        the chat shows the path to it. The timeline's choice, and a search hit's."""
        session = self.session
        if session is None:
            return
        if self.busy:
            self.notify("wait for the turn to end", severity="warning")
            return
        pick = None if event_id == self.head.id else event_id
        await off_loop(lambda: store_io.select(session, pick))
        await self.reload()
        self.prompt.focus()

    def action_search(self, query: str = "") -> None:
        self.push_screen(SearchScreen(self.harness.store, query), callback=self.open_hit)

    async def open_hit(self, hit: SearchHit | None) -> None:
        """Open a search hit's session (if another) at the hit's event."""
        if hit is not None and await self.open_session(hit.session_id):
            await self.pick(hit.event_id)

    async def action_sessions(self) -> None:
        current = self.session.session_id if self.session else None

        async def picked(choice: str | None) -> None:
            if choice == SessionPicker.NEW:
                await self.open_session(None)
            elif choice and choice != current:
                await self.open_session(choice)

        try:
            listed = await self.backend.sessions(self.harness)
        except InfaiError as exc:
            self.notify(f"cannot list the sessions: {exc}", severity="error", timeout=10)
            return
        here = str(self.harness.working_dir)
        self.push_screen(SessionPicker(listed, current, here), callback=picked)

    async def action_new_session(self) -> None:
        await self.open_session(None)

    async def action_rename(self) -> None:
        await self.rename(None)

    def action_help(self) -> None:
        here = self.session.working_dir if self.session is not None else None
        hub = self.harness.mcp(here)
        self.push_screen(HelpScreen(hub.status() if hub is not None else ()))

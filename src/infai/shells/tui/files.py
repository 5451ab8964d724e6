"""The app's side of the files on the timeline: a continue's restore, asked about;
whether the disk is HEAD's; the diff of an event's files; what opening said.

A base class of :class:`~.app.InfaiApp`, kept apart so each module stays
readable. Sending a prompt after picking an older event first restores that
event's files, before the turn starts, through the SDK's own
:meth:`~infai.agent.AgentSession.continue_from` (the TUI is its first client):
a refusal (files changed outside the agent, another session in the directory)
opens :class:`~.filescreens.RestoreScreen`, and the answer is the restore's
:class:`~infai.agent.OnRestore`, or no prompt at all (cancel: it goes back to
the box, nothing changed). The turn does not restore again: its prompt
follows the restore.

The status bar says when the files on disk are not HEAD's
(:meth:`~infai.agent.AgentSession.files_state`, in a thread, one check at a
time): after a session opens, after each turn, when the terminal regains the
focus and every :data:`FILES_EVERY` seconds while no turn runs (less often where
a look takes long); a snapshot or restore saved during a turn clears it at once. A long
snapshot's progress (said every second while a first snapshot hashes) is in the
status bar alone, each in place of the last, until the snapshot is over.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from contextlib import suppress
from typing import Any

from textual import events
from textual.worker import Worker

from infai.agent import (
    AgentEvent,
    AgentSession,
    FilesState,
    OnRestore,
    Restored,
    RestoreRefused,
    Streamed,
)
from infai.errors import InfaiError
from infai.llm import Notice
from infai.store import CHECKPOINT_KINDS

from .attached import Attached
from .chat import ChatView
from .elsewhere import LOOK_EVERY
from .filescreens import DiffScreen, EventDiff, RestoreScreen, restore_choice
from .panels import Timeline
from .store_io import event_diff as event_diff
from .store_io import off_loop

#: seconds between two looks at the files while the app sits idle, at least (the
#: terminal's focus and each turn's end look at once; a snapshot recorded clears it)
FILES_EVERY = 1.0
#: a look that took long waits this many times its own duration before the next
#: (a large tree is not hashed over and over)
FILES_SLOWER = 5.0
#: how a long snapshot's progress notice begins (:func:`infai.checkpoints.progress_text`)
SNAPSHOTTING = "files: snapshot of "


def files_label(state: FilesState | None) -> str:
    """What the status bar says of the files: nothing when they are HEAD's (or
    checkpoints are off, or nothing was recorded yet)."""
    if state is None or state.head_tree is None or not state.differs:
        return ""
    return f"files ≠ HEAD ({state.changed} changed)"


class Files(Attached):
    """Restores asked about, the files' state in the status bar, an event's diff."""

    _ending: bool
    _files_check: asyncio.Task[None] | None = None
    _files_again = False
    _files_due = 0.0  # the monotonic time before which the idle look waits
    _restore_screen: RestoreScreen | None = None  # the restore question open

    # -- a continue's restore ----------------------------------------------------

    async def _files_first(self, session: AgentSession, text: str) -> bool:
        """Restore the picked event's files before ``text`` is sent, through the
        session's own :meth:`~infai.agent.AgentSession.continue_from`, whose
        conflicts are asked about in :class:`~.filescreens.RestoreScreen`; False:
        not sent (cancelled or failed; it is back in the box). The turn then does
        not restore again (``continue_from`` says so to the session)."""
        picked = session.pending_parent
        if picked is None:
            return True
        work = asyncio.ensure_future(session.continue_from(picked, ask=self._restore_answer))
        try:  # a restore is not left half-watched: what it did is known
            done = await asyncio.shield(work)
        except asyncio.CancelledError:  # Ctrl-C, the app ending: the prompt is not sent
            self._restore_screen_closed()  # an open question gives up: the work ends
            await asyncio.wait([work])
            if not work.cancelled():
                work.exception()  # retrieved: the caller's cancel is what is raised
            if not self._ending:
                self.give_back([text])
                self._stale = True  # a restore that finished meanwhile is shown after
            raise
        except RestoreRefused:  # the question was cancelled
            self.notify("not sent, nothing changed: the prompt is back in the box")
            self.give_back([text])
            return False
        except InfaiError as exc:  # a store or disk failure: nothing was sent
            said = f"the files could not be restored, the prompt was not sent: {exc}"
            await self.query_one(ChatView).notice(said, error=True)
            self.notify(said, severity="error", timeout=10)
            self.give_back([text])
            return False
        await self._restored(done)
        return True

    async def _restore_answer(self, refused: RestoreRefused) -> OnRestore | None:
        """The user's answer to a refused restore, as the restore's choice (None: cancel)."""
        answer = await self._ask_restore(refused)
        if answer is None:
            return None
        return restore_choice(answer, refused.conflicts, refused.others)

    def _restore_screen_closed(self) -> None:
        screen = self._restore_screen
        if screen is not None and screen.is_active:
            screen.dismiss(None)

    async def _ask_restore(self, refused: RestoreRefused) -> str | None:
        """The question, answered by the user (None: cancel); closed if the worker
        is cancelled meanwhile."""
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        screen = self._restore_screen = RestoreScreen(refused.conflicts, refused.others)

        def answered(answer: str | None) -> None:
            if not future.done():
                future.set_result(answer)

        self.push_screen(screen, callback=answered)
        try:
            return await future
        finally:
            self._restore_screen = None
            if screen.is_active:
                screen.dismiss(None)

    async def _restored(self, done: Restored | None) -> None:
        """Show the session after a restore: its path (the prompt follows the
        restore, else still the picked event) and what the restore said."""
        if done is None:
            return
        await self.reload()
        chat = self.query_one(ChatView)
        for notice in done.notices:
            await chat.notice(f"files: {notice}")
        said = next((n for n in done.notices if n.startswith("restored ")), "")
        if done.touched and said:
            self.notify(said, timeout=10)

    def _snapshot_progress(self, event: AgentEvent) -> bool:
        """A long snapshot's progress goes to the status bar only, in place of the
        last (one a second would be as many chat lines and toasts); True: ``event``
        was one. Any other event of the turn means the snapshot is over: its
        progress leaves the bar (else it stayed there, first, hiding HEAD)."""
        inner = event.event if isinstance(event, Streamed) else None
        if isinstance(inner, Notice) and inner.message.startswith(SNAPSHOTTING):
            self.state.notice = inner.message
            self._refresh_status()
            return True
        if self.state.notice.startswith(SNAPSHOTTING):
            self.state.notice = ""
            self._refresh_status()
        return False

    # -- opening, and the status bar -------------------------------------------------

    async def _files_opened(self, session: AgentSession) -> None:
        """What opening the session had to say (an interrupted restore finished or
        rolled back), then a look at the files."""
        self.state.files = ""  # the last session's
        chat = self.query_one(ChatView)
        for notice in session.notices:
            await chat.notice(notice)
            self.notify(notice, severity="warning", timeout=10)
        self.check_files()

    def _watch_files(self) -> None:
        """Look at the files every :data:`FILES_EVERY` seconds while idle, and at
        what other processes appended (:mod:`.elsewhere`)."""
        self.set_interval(FILES_EVERY, self._files_tick)
        self.set_interval(LOOK_EVERY, self._look_elsewhere)

    def _files_tick(self) -> None:
        if not self.busy and time.monotonic() >= self._files_due:
            self.check_files()

    def _files_recorded(self, kind: str) -> None:
        """An event of ``kind`` was saved: a snapshot or a restore means the files on
        disk are HEAD's now (a label from before, during the turn that recorded
        them, would be stale)."""
        if kind in CHECKPOINT_KINDS and self.state.files.startswith("files ≠"):
            self.state.files = ""
            self._refresh_status()

    def on_app_focus(self, event: events.AppFocus) -> None:
        """Back in the terminal: the user may have edited files meanwhile."""
        self.check_files()

    def check_files(self) -> None:
        """Look whether the files on disk are HEAD's (one look at a time; one asked
        for meanwhile runs after it)."""
        if self._ending or self.session is None:
            return
        running = self._files_check
        if running is not None and not running.done():
            self._files_again = True
            return
        self._files_check = asyncio.get_running_loop().create_task(self._check_files())

    async def _check_files(self) -> None:
        again = True
        while again and not self._ending:
            self._files_again = False
            session = self.session
            if session is None:
                return
            started = time.monotonic()
            try:
                said = files_label(await session.files_state())
            except Exception as exc:  # a snapshot failed: said in the bar, the session goes on
                # a working directory that is gone (a removed worktree, a session
                # made elsewhere) is said as such, in the few words the bar has
                gone = not await off_loop(session.working_dir.is_dir)
                said = (
                    "files: directory missing"
                    if gone
                    else f"files: not checked ({type(exc).__name__})"
                )
            ended = time.monotonic()
            self._files_due = ended + FILES_SLOWER * (ended - started)
            if session is self.session:
                self.state.files = said
                self._refresh_status()
            again = self._files_again

    async def _files_settled(self) -> None:
        """Wait for a look at the files to end (before its session closes)."""
        running = self._files_check
        if running is not None:
            with suppress(Exception):
                await asyncio.wait([running])

    # -- the diff key --------------------------------------------------------------

    def on_timeline_diff_wanted(self, message: Timeline.DiffWanted) -> None:
        if message.event_id is None:
            self.notify("move to an event to see the diff of its files", severity="warning")
            return
        self._run_quiet(self._show_diff(message.event_id))

    def _run_quiet(self, work: Coroutine[Any, Any, None]) -> Worker[None]:
        return self.run_worker(work, group="diff", exclusive=True, exit_on_error=False)

    async def _show_diff(self, event_id: str) -> None:
        session, store = self.session, self.harness.store
        if session is None:
            return
        try:
            shown = await self.backend.event_diff(session, store, event_id)
        except InfaiError as exc:
            self.notify(f"no diff: {exc}", severity="error", timeout=10)
            return
        if session is self.session:
            self.push_screen(DiffScreen(shown))


__all__ = ["FILES_EVERY", "EventDiff", "Files", "event_diff", "files_label"]

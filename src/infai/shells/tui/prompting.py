"""The prompt box's side of the app: what Enter hands over, the queue of prompts
typed during a turn, the history file, and other processes' appends.

A base class of :class:`~.app.InfaiApp`, kept apart so each module stays
readable. A prompt is taken from the box (:class:`~.prompt.PromptInput.Sent`):
a command runs at once; a prompt starts a turn, or, while one runs, waits in
:attr:`Prompting.queued` (shown by the :class:`~.panels.QueueBar`) and is sent
when the turn ends well; a cancelled or failed turn gives the queue back to the
box. The first session opens after the first frame (:meth:`Prompting.open_first`):
what is sent meanwhile waits in the queue too, and goes, in order, once it is
open (or back to the box if it could not open). The store's change feed
(:meth:`~infai.store.SessionStore.watch`, a thread) reloads the screen when
another process appends to the open session.
"""

from __future__ import annotations

import threading
from contextlib import suppress
from pathlib import Path

from textual.worker import Worker, WorkerCancelled, WorkerFailed

from infai.agent import Harness

from . import history
from .panels import QueueBar
from .popup import is_path
from .prompt import PromptInput
from .store_io import off_loop
from .usercontext import UserContext

#: the sequence number told when the feed reconnected (appends may have been missed)
UNHEARD = 1 << 62
#: the status bar's notice while the first session opens (MCP servers start)
OPENING = "opening session…"
#: commands that run at once while the first session opens (the rest wait for it)
AT_ONCE = frozenset({"/help", "/quit", "/exit"})


class Prompting(UserContext):
    """Prompts taken from the box, queued, remembered; appends made elsewhere."""

    queued: list[str]
    taken: int
    _stale: bool
    _watching: threading.Event
    _ending: bool
    #: the first session is opening (after the first frame): prompts wait for it
    _opening: bool = False
    _opener: Worker[None] | None = None

    @property
    def prompt(self) -> PromptInput:
        return self.query_one("#prompt", PromptInput)

    async def command(self, text: str) -> None:
        raise NotImplementedError

    def _start_turn(self, text: str) -> None:
        raise NotImplementedError

    async def reload(self) -> None:
        raise NotImplementedError

    async def open_session(self, session_id: str | None, *, first: bool = False) -> bool:
        raise NotImplementedError

    @property
    def opening(self) -> bool:
        """The first session is still opening (the app shows its prompt box already)."""
        return self._opening

    def open_first(self, session_id: str | None) -> None:
        """Open the app's first session after the first frame is drawn, not before:
        opening may import the MCP SDK and start its servers (seconds), and the
        screen would stay blank meanwhile. The prompt box takes keys at once; what
        is sent before the session is open waits in the queue (its bar shows it)."""
        self._opening = True
        self.state.notice = OPENING
        self._refresh_status()
        self.call_after_refresh(self._begin_opening, session_id)

    def _begin_opening(self, session_id: str | None) -> None:
        if not self._ending:
            work = self._open_first(session_id)
            self._opener = self.run_worker(work, group="open", exit_on_error=False)

    async def _open_first(self, session_id: str | None) -> None:
        home, here = Path(self.harness.store.home), self.harness.working_dir
        with suppress(OSError):  # history is a convenience: without it, none is shown
            self.prompt.past = await off_loop(lambda: history.load(home, here))
        opened = False
        try:
            opened = await self.open_session(session_id, first=True)
        finally:
            self._opening = False
            if self.state.notice == OPENING:
                self.state.notice = ""
            self._refresh_status()
        if self._ending:
            return
        self._warm_model()
        await self._after_turn("done" if opened else "error")  # what was sent meanwhile

    def _warm_model(self) -> None:
        """Import the session's model's SDK in a thread now that the screen is up
        (:meth:`~infai.llm.providers.SdkModel.prepare`): the first prompt would
        otherwise wait for it. A model without ``prepare`` needs nothing."""
        session = self.session
        prepare = getattr(session.model, "prepare", None) if session is not None else None
        if callable(prepare):
            self.run_worker(prepare, thread=True, group="prepare", exit_on_error=False)

    async def stop_opening(self) -> None:
        """The app ends: a first session still opening stops (its worker cancelled)."""
        opener = self._opener
        if opener is not None and not opener.is_finished:
            opener.cancel()
            with suppress(WorkerCancelled, WorkerFailed):
                await opener.wait()

    async def on_prompt_input_sent(self, message: PromptInput.Sent) -> None:
        """Enter in the prompt (already emptied): a command runs now; a prompt (or a
        ``!cmd``) starts at once, or waits in the queue for the running one to end."""
        try:
            await self._take(message.text, message.prompt)
        finally:
            self.taken += 1

    async def _take(self, text: str, prompt: PromptInput) -> None:
        command = text.startswith("/") and not is_path(text)
        if self._opening and not (command and text.split()[0] in AT_ONCE):
            self.queued.append(text)  # sent, in order, once the session is open
            self._show_queue()
            return
        if command:
            await self.command(text)
            return
        bang = text.startswith("!") and bool(text[1:].strip())
        if bang and (self.session is None or not (self.busy or self.queued)):
            self.bang(text)  # now, or kept in the history saying why not
            return
        if self.session is None:
            prompt.show(text)  # kept: nothing is lost
            self.notify("no session is open (Ctrl-O)", severity="error")
            return
        if self.busy or self.queued:
            self.queued.append(text)
            self._show_queue()
            return
        self._start_turn(text)

    def _remember(self, text: str) -> None:
        """Into the prompt's history, and its file in the store's home (in a thread)."""
        self.prompt.remember(text)
        home, here = Path(self.harness.store.home), self.harness.working_dir

        def write() -> None:
            with suppress(OSError):  # a read-only home: history is a convenience
                history.append(home, here, text)

        self.run_worker(write, thread=True, group="history", exit_on_error=False)

    def _show_queue(self) -> None:
        self.query_one(QueueBar).show(self.queued)
        self.prompt.queued = bool(self.queued)

    def on_prompt_input_take_back(self, message: PromptInput.TakeBack) -> None:
        """Up on an empty prompt: the last queued prompt comes back to be edited."""
        if self.queued:
            self.prompt.show(self.queued.pop())
            self._show_queue()

    def give_back(self, prompts: list[str]) -> None:
        """Prompts that were not sent go back into the box, before what is typed there."""
        typed = self.prompt.prompt_text()
        self.prompt.show("\n\n".join([*prompts, typed] if typed else prompts))

    async def _after_turn(self, outcome: str) -> None:
        """A turn's worker is over: what another process appended meanwhile is shown;
        the next queued prompt is sent if the turn was done, else the queue goes
        back to the prompt box (a cancel or a failure: the user decides again)."""
        if self._stale:
            self._stale = False
            await self.reload()
        if not self.queued:
            return
        if outcome != "done":
            waiting, self.queued = self.queued, []
            self._show_queue()
            self.give_back(waiting)
            self.notify("the queued prompts were not sent: they are back in the prompt")
            return
        while self.queued:
            text = self.queued.pop(0)
            self._show_queue()
            if text.startswith("/") and not is_path(text):
                await self.command(text)  # typed while the session opened, in its turn
                if self.busy:
                    return  # a /compact: the rest waits for it
            elif text.startswith("!") and text[1:].strip():
                self.bang(text)  # a command typed during the turn, in its turn
                return
            else:
                self._start_turn(text)
                return

    def _watch(self) -> None:
        """The store's feed of other processes' appends (a thread until the app ends)."""

        def appended(session_id: str | None, seq: int) -> None:
            session = self.session
            if session is not None and session_id is None:  # reconnected: appends unheard
                self.call_from_thread(self._note_append, UNHEARD)
            elif session is not None and session_id == session.session_id:
                self.call_from_thread(self._note_append, seq)

        harness = self.harness  # only a local store has other writers (never a server)
        assert isinstance(harness, Harness), "watching a store is a local harness's"
        harness.store.watch(appended, self._watching)

    def _note_append(self, seq: int) -> None:
        self.run_worker(self._appended_elsewhere(seq), group="appended", exit_on_error=False)

    async def _appended_elsewhere(self, seq: int) -> bool:
        """Another process appended to the open session: show it (after the turn, if
        one runs: the turn's own events are being shown)."""
        if seq < self.head.count:
            return False  # shown already
        if self.busy:
            self._stale = True
        else:
            await self.reload()
        return True

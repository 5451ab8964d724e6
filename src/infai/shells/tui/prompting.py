"""The prompt box's side of the app: what Enter hands over, the queue of prompts
typed during a turn, the history file, and other processes' appends.

A base class of :class:`~.app.InfaiApp`, kept apart so each module stays
readable. A prompt is taken from the box (:class:`~.prompt.PromptInput.Sent`):
a command runs at once; a prompt starts a turn, or, while one runs, waits in
:attr:`Prompting.queued` (shown by the :class:`~.panels.QueueBar`) and is sent
when the turn ends well; a cancelled or failed turn gives the queue back to the
box. The store's change feed (:meth:`~infai.store.SessionStore.watch`, a
thread) reloads the screen when another process appends to the open session.
"""

from __future__ import annotations

import threading
from contextlib import suppress
from pathlib import Path

from infai.agent import Harness

from . import history
from .panels import QueueBar
from .popup import is_path
from .prompt import PromptInput
from .usercontext import UserContext

#: the sequence number told when the feed reconnected (appends may have been missed)
UNHEARD = 1 << 62


class Prompting(UserContext):
    """Prompts taken from the box, queued, remembered; appends made elsewhere."""

    queued: list[str]
    taken: int
    _stale: bool
    _watching: threading.Event

    @property
    def prompt(self) -> PromptInput:
        return self.query_one("#prompt", PromptInput)

    async def command(self, text: str) -> None:
        raise NotImplementedError

    def _start_turn(self, text: str) -> None:
        raise NotImplementedError

    async def reload(self) -> None:
        raise NotImplementedError

    async def on_prompt_input_sent(self, message: PromptInput.Sent) -> None:
        """Enter in the prompt (already emptied): a command runs now; a prompt (or a
        ``!cmd``) starts at once, or waits in the queue for the running one to end."""
        try:
            await self._take(message.text, message.prompt)
        finally:
            self.taken += 1

    async def _take(self, text: str, prompt: PromptInput) -> None:
        if text.startswith("/") and not is_path(text):
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
        text = self.queued.pop(0)
        self._show_queue()
        if text.startswith("!") and text[1:].strip():
            self.bang(text)  # a command typed during the turn, in its turn
        else:
            self._start_turn(text)

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

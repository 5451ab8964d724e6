"""What the composer adds besides prompts: ``!cmd``, ``@file`` and kept drafts.

A base class of :class:`~.app.InfaiApp` (under :mod:`.prompting`), kept apart
so each module stays readable.

* ``!cmd`` runs ``cmd`` as the model's ``bash`` call would run
  (:func:`~infai.agent.user_context.run_as_user`: the session's policy decides,
  an ask opens the approval dialog, the sandbox confines it) and records the
  command with its output in the session (a ``user`` message the next request
  holds, kept on resume). It runs as the app's busy work: Ctrl-C cancels it,
  prompts typed meanwhile are queued. A refused command records nothing.
* ``@path`` in a prompt, naming a file of the working directory, attaches the
  file as the ``read_file`` tool reads it, under the same read policy, recorded
  just before the prompt. A file the policy refuses (or that cannot be read)
  stops the prompt: it is back in the box and a message says why.
* Both fire the PreToolUse/PostToolUse hooks a model's call fires. What that
  publishes on the session's hub between turns (the hook runs as they are
  recorded, a hook's failure) is shown as a turn's events are
  (:meth:`UserContext._showing`): in the chat, the timeline, the HEAD the app
  knows (else its look for other processes' appends would take them for one
  and reload, wiping what the chat said).
* A draft is never lost: the first Ctrl-C clears it into the prompt history
  (Up brings it back) and whatever is in the box or queued when the app ends
  is written to the history file.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Coroutine
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

from textual.css.query import NoMatches

from infai.agent import (
    AgentEvent,
    AgentSession,
    Streamed,
    Turn,
    add_context,
    file_note,
    run_as_user,
    shell_note,
)
from infai.llm import Notice
from infai.store import MessageRecord, StoreError

from . import history
from .backend import Backend
from .chat import ChatView
from .commands import Commands
from .prompt import PromptInput
from .store_io import off_loop

#: seconds within which a second Ctrl-C quits
QUIT_WINDOW = 2.0
#: what ``!cmd`` says on a server's session (``infai --remote``)
NO_BANG = "!cmd runs on this machine and the session is on the server: not with --remote"
#: what a prompt naming ``@file`` says on a server's session
NO_MENTION = "@file is not attached with --remote (the file is on this machine): sent as typed"
#: a mention: ``@`` at the start of a word, then a path (no spaces)
MENTIONED = re.compile(r"(?:^|(?<=\s))@(\S+)")

T = TypeVar("T")


def mentions(text: str, working_dir: Path) -> list[str]:
    """The ``@paths`` in ``text`` that name a file of ``working_dir``, once each
    (a trailing ``.``, ``,``, ``:`` or ``;`` is punctuation, not the name's)."""
    found: list[str] = []
    for match in MENTIONED.finditer(text):
        path = match.group(1)
        if not (working_dir / path).is_file():
            path = path.rstrip(".,:;")
        if path not in found and (working_dir / path).is_file():
            found.append(path)
    return found


class UserContext(Commands):
    """``!cmd``, ``@file`` attachments and drafts kept, over what the app provides."""

    queued: list[str]
    _armed: float  # when Ctrl-C last armed the quit
    _cancelled: bool  # Ctrl-C was pressed for the running turn
    _drafts_kept = False  # the app ended and its drafts were written
    backend: Backend

    @property
    def prompt(self) -> PromptInput:
        raise NotImplementedError

    def _remember(self, text: str) -> None:
        raise NotImplementedError

    def give_back(self, prompts: list[str]) -> None:
        raise NotImplementedError

    async def _files_first(self, session: AgentSession, text: str) -> bool:
        raise NotImplementedError

    async def _on_event(self, event: AgentEvent, turn: Turn | None = None) -> None:
        raise NotImplementedError

    def _run_busy(self, work: Coroutine[Any, Any, None]) -> None:
        raise NotImplementedError

    def _cancel_turn(self) -> None:
        raise NotImplementedError

    async def _refresh_timeline(self, rebuild: bool = False) -> None:
        raise NotImplementedError

    async def action_quit(self) -> None:
        raise NotImplementedError

    # -- !cmd -------------------------------------------------------------------

    def bang(self, text: str) -> None:
        """``!cmd`` from the prompt box: run it now, or say why not.

        A refused command goes into the prompt's history (Up brings it back), and
        the box is left as Enter left it, empty: words typed right after Enter,
        before the refusal was seen, are a draft of their own (put back into the
        box, the command got them glued to its end: ``!lsmore``)."""
        why = ""
        if self.backend.remote:  # said in one line; the command is kept in the history
            self._remember(text)
            self.run_worker(self.query_one(ChatView).notice(NO_BANG, error=True))
            return
        if self.session is None:
            why = "no session is open (Ctrl-O)"
        elif self.busy:
            why = "a turn is running"
        elif self.session.pending_parent is not None:  # its files are not back yet
            why = "an older event is picked: send a prompt from it first, or Esc"
        if why or self.session is None:
            self._remember(text)  # kept: nothing is lost
            self.notify(f"{why}: {text} was not run (Up brings it back)", severity="warning")
            return
        self._remember(text)
        self._run_busy(self._bang(self.session, text[1:].strip()))

    async def _bang(self, session: AgentSession, command: str) -> None:
        chat = self.query_one(ChatView)
        await chat.notice(f"running !{command}")
        output, ran = await self._showing(
            session, run_as_user(session, "bash", {"command": command})
        )
        if not ran:
            await chat.notice(f"!{command} was not run: {output.content}", error=True)
        else:
            await self._record(session, shell_note(command, output))
        self._outcome = "done"

    async def _record(self, session: AgentSession, note: MessageRecord) -> bool:
        """Append ``note`` and show it; False if the store refused it (said)."""
        try:  # shown from the hub, with the hook runs recorded before it
            await self._showing(session, add_context(session, note))
        except StoreError as exc:
            await self.query_one(ChatView).notice(f"not recorded: {exc}", error=True)
            return False
        return True

    async def _showing(self, session: AgentSession, work: Awaitable[T]) -> T:
        """Await ``work`` (a user's call, a note appended) showing, as it comes, what
        it publishes on the session's hub: the events saved (hook runs, the note)
        and the hooks' notices (a failure: said as an error, not as the status)."""
        events = session.hub.subscribe()
        chat = self.query_one(ChatView)

        async def show() -> None:
            async for event in events:
                inner = event.event if isinstance(event, Streamed) else None
                if isinstance(inner, Notice):
                    await chat.notice(inner.message, error=True)
                    self.notify(inner.message, severity="warning", timeout=6)
                else:
                    await self._on_event(event)

        shower = asyncio.create_task(show())
        try:
            return await work
        finally:
            events.close()  # it ends after what it holds
            await shower
            await self._refresh_timeline()

    # -- @file ------------------------------------------------------------------

    async def _before_send(self, session: AgentSession, text: str) -> bool:
        """Before ``text`` is sent: the files it mentions are read (a refusal stops
        it, back in the box), the picked event's files restored, then the files
        recorded. False: not sent."""
        if self.backend.remote:  # the files named are this machine's, the session the server's
            mine = self.harness.working_dir
            if await off_loop(lambda: mentions(text, mine)):
                await self.query_one(ChatView).notice(NO_MENTION)
            return await self._files_first(session, text)
        here = session.working_dir
        notes = []
        for path in await off_loop(lambda: mentions(text, here)):
            call = run_as_user(session, "read_file", {"path": path})
            output, ran = await self._showing(session, call)
            if not ran or output.is_error:
                said = f"@{path} was not attached, the prompt was not sent: {output.content}"
                await self.query_one(ChatView).notice(said, error=True)
                self.notify(said, severity="error", timeout=10)
                self.give_back([text])
                return False
            notes.append(file_note(path, output))
        if not await self._files_first(session, text):
            return False
        for note in notes:
            if not await self._record(session, note):
                self.give_back([text])
                return False
        return True

    # -- Ctrl-C and drafts -------------------------------------------------------

    async def action_interrupt(self) -> None:
        """Ctrl-C: cancel the turn in flight, else clear the draft; twice: quit."""
        now = time.monotonic()
        if self.busy and not self._cancelled:
            self._cancelled = True
            self._cancel_turn()
            self._armed = now
            self.notify("cancelled; Ctrl-C again to quit", timeout=QUIT_WINDOW)
            return
        if now - self._armed < QUIT_WINDOW:
            await self.action_quit()
            return
        self._armed = now
        cleared = "draft cleared (Up brings it back); " if self.clear_draft() else ""
        self.notify(f"{cleared}press Ctrl-C again to quit", timeout=QUIT_WINDOW)

    def clear_draft(self) -> bool:
        """Ctrl-C on a draft: into the history (Up brings it back), the box emptied."""
        draft = self.prompt.prompt_text()
        if not draft:
            return False
        self._remember(draft)
        self.prompt.clear()
        return True

    def keep_drafts(self) -> None:
        """The app ends: what is queued or in the box goes to the history file (now,
        on this thread: no worker runs any more)."""
        if self._drafts_kept:
            return
        self._drafts_kept = True
        kept = list(self.queued)
        with suppress(NoMatches):  # the screen is still there
            kept.append(self.prompt.prompt_text())
        home, here = Path(self.harness.store.home), self.harness.working_dir
        for text in filter(None, kept):
            with suppress(OSError):  # a read-only home: history is a convenience
                history.append(home, here, text)

"""Rewind (Esc Esc): the user's own prompts, one of them taken back to edit.

Why beside the timeline: the timeline shows every event of every branch (tool
calls, results, snapshots), which is the place to look around but a slow way to
say "go back to what I asked three prompts ago and ask it differently". As in
Claude Code, Esc pressed twice lists only the prompts the user typed on the
path to HEAD (the interruption markers, replies and tools left out, the
prompts before a compaction included), newest at the bottom. Choosing one:

- the next prompt continues from *before* it (its parent is picked, as the
  timeline's Enter picks an event: HEAD does not move until something is sent);
- its text is put back in the prompt box, to edit;
- sending then restores the files as they were before that prompt, as any
  continue from an older event does (:mod:`.files`: files changed by hand are
  asked about first), and the new prompt starts a branch there. Esc (back to
  HEAD) forgets it, as it forgets any pick.

Only the index is read to list them; the chosen prompt's record (a blob, if it
is long) is read once chosen, in a thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from infai.agent import AgentSession
from infai.store import Entry, MessageRecord, StoreError

from ..inert import inert, inert_text
from . import store_io
from .elsewhere import Elsewhere
from .modals import MODAL_CSS
from .panels import PendingBar, Timeline
from .store_io import off_loop

#: seconds within which a second Esc opens the rewind list
TWICE = 0.8
#: how an interruption marker's preview begins (it is no prompt of the user's)
MARKER = "[turn interrupted"


@dataclass
class Prompted:
    """A prompt the user sent: its event, and the event it continued from."""

    entry: Entry
    before: str


def user_prompts(session: AgentSession) -> list[Prompted]:
    """The prompts on the path to HEAD, oldest first, that something came before
    (a session's very first event has nothing to continue from). Index only;
    blocks on the store: run it in a thread."""
    view = session.view
    view.refresh()
    path = view.path(to_boundary=False) if view.count else []
    return [
        Prompted(entry, entry.parent_id)
        for entry in path
        if entry.kind == "message"
        and entry.role == "user"
        and entry.parent_seq >= 0
        and not entry.preview.startswith(MARKER)
    ]


def prompt_text(session: AgentSession, entry: Entry) -> str:
    """The prompt's whole text (its preview may be cut; a long one is a blob)."""
    record = session.view.event(entry.id, resolve=True).record
    return record.content if isinstance(record, MessageRecord) else entry.preview


def one_line(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class RewindScreen(ModalScreen[Prompted | None]):
    """The user's prompts, newest highlighted; Enter takes one back, Esc closes."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="RewindScreen")
        + """
    RewindScreen OptionList { height: auto; max-height: 14; text-wrap: nowrap; }
    """
    )
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "close")]
    #: text typed over it closes it, nothing picked, and goes to the prompt (:mod:`.keys`)
    TYPING_CLOSES = True

    def __init__(self, prompts: list[Prompted]) -> None:
        super().__init__()
        self.prompts = prompts

    def compose(self) -> ComposeResult:
        width = max(30, self.app.size.width - 12)
        with Vertical():
            yield Static("Rewind: your prompts on this branch, newest last", classes="title")
            yield OptionList(
                *(
                    Option(inert_text(one_line(f"#{p.entry.seq} {p.entry.preview}", width)))
                    for p in self.prompts
                )
            )
            yield Static(
                inert(
                    "Enter: edit it and send again from before it (the files as they were "
                    "then) · Esc: close"
                ),
                classes="keys",
            )

    def on_mount(self) -> None:
        listed = self.query_one(OptionList)
        listed.highlighted = len(self.prompts) - 1
        listed.focus()

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        message.stop()
        self.dismiss(self.prompts[message.option_index])


class Rewind(Elsewhere):
    """Esc: close the timeline, else forget the pick; Esc Esc: the rewind list, and
    the chosen prompt back in the box."""

    _last_escape = 0.0

    async def action_escape(self) -> None:
        """Esc closes the top panel (the timeline), wherever the focus is; with none
        open it forgets the pick (back to HEAD); with neither, twice: the rewind list."""
        timeline = self.query_one(Timeline)
        if timeline.has_class("shown"):  # as its own Esc does (the app's on_timeline_closed)
            timeline.remove_class("shown")
            self.prompt.focus()
        elif self.query_one(PendingBar).display:
            await self.action_back_to_head()
        elif self.escaped_twice():
            await self.action_rewind()

    async def action_back_to_head(self) -> None:
        """Forget the event picked to continue from: the next prompt follows HEAD."""
        session = self.session
        if session is not None and self.query_one(PendingBar).display and not self.busy:
            await off_loop(lambda: store_io.select(session, None))
            await self.reload()

    def escaped_twice(self) -> bool:
        """Whether this Esc follows another within :data:`TWICE` seconds (then
        the pair is used up: a third Esc starts over)."""
        now = time.monotonic()
        twice = now - self._last_escape < TWICE
        self._last_escape = 0.0 if twice else now
        return twice

    async def pick(self, event_id: str) -> None:
        raise NotImplementedError

    async def action_rewind(self) -> None:
        """Open the list of the user's prompts (nothing while a turn runs)."""
        session = self.session
        if session is None:
            return
        if self.busy:
            self.notify("wait for the turn to end (Ctrl-C cancels it)", severity="warning")
            return
        try:
            prompts = await off_loop(lambda: user_prompts(session))
        except StoreError as exc:
            self.notify(f"cannot list the prompts: {exc}", severity="error", timeout=10)
            return
        if not prompts:
            self.notify("no prompt to go back to yet")
            return
        self.push_screen(RewindScreen(prompts), callback=self._rewound)

    async def _rewound(self, chosen: Prompted | None) -> None:
        """Continue from before the chosen prompt, its text in the box to edit."""
        session = self.session
        if chosen is None or session is None:
            return
        try:
            text = await off_loop(lambda: prompt_text(session, chosen.entry))
        except StoreError as exc:
            self.notify(f"cannot read that prompt: {exc}", severity="error", timeout=10)
            return
        await self.pick(chosen.before)
        if session is self.session:
            draft = self.prompt.prompt_text()
            if draft and draft != text.strip():  # replaced, never lost: Up brings it back
                self._remember(draft)
                self.notify("your draft is in the history (Up brings it back)")
            self.prompt.show(text)
            self.prompt.focus()

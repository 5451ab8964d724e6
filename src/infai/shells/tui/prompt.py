"""The prompt box: one line on screen, any text underneath.

The box is Textual's one-line :class:`~textual.widgets.Input`; what it holds
stands for a longer text in two ways. A newline typed with Ctrl-J (or
Shift-Enter, where the terminal reports it) shows as :data:`NEWLINE`; a paste
of several lines shows as a compact ``[pasted N lines]`` marker. Both are
turned back into the text meant when the prompt is sent (:meth:`PromptInput.text`).

Enter sends, and sending happens in the box itself, in the same step as the
key: the box is emptied before the next key is handled, so keys typed right
after Enter start the next prompt instead of joining (or being wiped with) the
one sent. The app is told with :class:`PromptInput.Sent`.

A terminal without bracketed paste delivers a pasted text as keys, its line
breaks as Enter. Such a paste arrives in one read of the terminal, so its keys
reach the app together; a person typing ahead is never that fast. So an Enter
that the app has already received more keys behind, stamped within
:data:`PASTE_GAP` of it, is a line break inside a paste, not a send (the app
counts the keys it receives: :meth:`Arrivals.after`). The decision uses only
keys already received when the Enter is handled, never a wait.

Up and Down walk the prompts sent before in this working directory
(:mod:`.history`); a prompt queued during a turn is taken back into the box
with Up (it was not sent).
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input

from ..inert import UNSAFE

#: how a newline in the prompt is drawn in the one-line box
NEWLINE = "↵"
#: keys stamped this close behind an Enter came in the same read of the terminal
PASTE_GAP = 0.005


class Arrivals:
    """When the app received its last keys (the keys' own stamps, taken as the
    terminal was read): what an Enter asks to tell a paste from typing."""

    def __init__(self, size: int = 512) -> None:
        self._times: deque[float] = deque(maxlen=size)

    def add(self, stamp: float) -> None:
        self._times.append(stamp)

    def after(self, stamp: float, gap: float = PASTE_GAP) -> bool:
        """Whether a key stamped within ``gap`` after ``stamp`` was received."""
        return any(stamp < other <= stamp + gap for other in reversed(self._times))


class PromptInput(Input):
    """The prompt: Enter sends; pastes and newlines are kept whole; history on Up/Down."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+j,shift+enter", "newline", "newline", show=False),
        Binding("up", "older", "previous prompt", show=False),
        Binding("down", "newer", "next prompt", show=False),
    ]

    class Sent(Message):
        """Enter was pressed: ``text`` is what to send (newlines and pastes expanded)."""

        def __init__(self, prompt: PromptInput, text: str) -> None:
            super().__init__()
            self.prompt = prompt
            self.text = text

    class TakeBack(Message):
        """Up was pressed on an empty box while prompts are queued."""

    def __init__(self, **kwargs: object) -> None:
        # focus coming back (Esc on the timeline, a key typed there) must not select
        # the draft, or the next key would replace it
        super().__init__(select_on_focus=False, **kwargs)  # type: ignore[arg-type]
        self.pastes: dict[str, str] = {}
        #: prompts sent before in this directory, oldest first
        self.history: list[str] = []
        self._browsing: int | None = None  # index into history while walking it
        self._draft = ""  # what was in the box when the walk began
        #: keys received by the app (set by the app; None: every Enter sends)
        self.arrivals: Arrivals | None = None
        #: whether prompts are queued (Up on an empty box takes the last back)
        self.queued = False

    # -- keys -------------------------------------------------------------------

    async def _on_key(self, event: events.Key) -> None:
        if event.key != "enter":
            await super()._on_key(event)
            return
        event.stop()
        event.prevent_default()  # not Input's own submit, which leaves the text in place
        await asyncio.sleep(0)  # the rest of a read of the terminal is received meanwhile
        if self.arrivals is not None and self.arrivals.after(event.time):
            self.action_newline()  # a line break inside a paste that came as keys
            return
        self.send()

    def send(self) -> None:
        """Empty the box now and tell the app what was in it (nothing if blank)."""
        value = self.value
        if not value.strip():
            return
        text = self.text(value)
        self.clear()
        self.post_message(self.Sent(self, text))

    def action_newline(self) -> None:
        self.insert_text_at_cursor(NEWLINE)

    def _on_paste(self, event: events.Paste) -> None:
        event.stop()
        event.prevent_default()  # not Input's own handler, which keeps the first line
        text = event.text.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")
        if "\n" in text or UNSAFE.search(text):  # control characters are not drawn either
            lines = len(text.splitlines())
            size = f"{lines} line{'s' if lines != 1 else ''}"
            marker = f"[pasted {size}]"
            number = 1
            while marker in self.pastes:  # two pastes of the same size: tell them apart
                number += 1
                marker = f"[pasted {size} #{number}]"
            self.pastes[marker] = text
            text = marker
        if self.selection.is_empty:
            self.insert_text_at_cursor(text)
        else:
            self.replace(text, *self.selection)

    # -- what the box stands for ------------------------------------------------

    def expanded(self, value: str) -> str:
        """``value`` with each paste marker still in it replaced by what was pasted."""
        if not self.pastes:
            return value
        pattern = "|".join(re.escape(marker) for marker in self.pastes)
        return re.sub(pattern, lambda match: self.pastes[match.group(0)], value)

    def text(self, value: str) -> str:
        """The prompt ``value`` stands for: newlines restored, then pastes expanded
        (a pasted text keeps any ``↵`` it had)."""
        return self.expanded(value.replace(NEWLINE, "\n")).strip()

    def show(self, text: str) -> None:
        """Put ``text`` (a prompt from history or the queue) in the box, editable."""
        self.clear()
        if UNSAFE.search(text.replace("\n", "")):  # never drawn: kept whole behind a marker
            self.pastes["[recalled prompt]"] = text
            self.value = "[recalled prompt]"
        else:
            self.value = text.replace("\n", NEWLINE)
        self.cursor_position = len(self.value)

    def clear(self) -> None:
        super().clear()
        self.pastes.clear()
        self._browsing = None

    # -- history ----------------------------------------------------------------

    def action_older(self) -> None:
        if self.queued and not self.value:
            self.post_message(self.TakeBack())
            return
        if not self.history:
            return
        if self._browsing is None:
            self._draft, index = self.value, len(self.history)
        else:
            index = self._browsing
        index = max(0, index - 1)
        self._walk_to(index)

    def action_newer(self) -> None:
        if self._browsing is None:
            return
        index = self._browsing + 1
        if index >= len(self.history):
            draft = self._draft
            self.clear()
            self.value = draft
            self.cursor_position = len(draft)
            return
        self._walk_to(index)

    def _walk_to(self, index: int) -> None:
        text = self.history[index]
        self.show(text)
        self._browsing = index

    def remember(self, text: str) -> None:
        """``text`` was sent: the newest entry (an immediate repeat is kept once)."""
        if not self.history or self.history[-1] != text:
            self.history.append(text)

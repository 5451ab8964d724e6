"""The prompt box (the composer): a multi-line text box that grows with its text.

The box is Textual's :class:`~textual.widgets.TextArea`, one line high when
empty, growing with its text up to a third of the screen, then scrolling.
Enter sends; Shift-Enter, Ctrl-J and Alt-Enter insert a new line (Alt-Enter
arrives as ESC CR from a terminal without the kitty keyboard protocol, which
Textual would read as a plain Enter: :data:`ALT_ENTER` registers it). A paste
of several lines is kept whole behind a compact ``[pasted N lines]`` marker,
turned back into the text meant when the prompt is sent (:meth:`PromptInput.text`).

Enter sends, and sending happens in the box itself, in the same step as the
key: the box is emptied before the next key is handled, so keys typed right
after Enter start the next prompt instead of joining (or being wiped with) the
one sent. The app is told with :class:`PromptInput.Sent`.

A terminal without bracketed paste delivers a pasted text as keys, its line
breaks as Enter. Such a paste arrives in one read of the terminal, so its keys
reach the app together: the driver (Textual's input thread) reads up to 4 KiB
at a time and stamps each key as it parses it, so the keys of one read are
stamped microseconds apart, and the stamp is all the timing the terminal
gives (there is no read number, and the keys carry no time of their own). A
person's keys are tens of milliseconds apart, but a loaded machine may not
read the terminal for longer than that: a typed Enter and the keys typed after
it can then come in one read too. What tells them apart: a paste's line break
has the paste's text in the same read before it as well as after it, while a
person's Enter after a pause has nothing just before it. So an Enter is a line
break inside a paste only when the app has received keys stamped within
:data:`PASTE_GAP` on both sides of it (:meth:`Arrivals.around`); else it sends.
The decision uses only keys already received when the Enter is handled, never a
wait. What stays ambiguous: keys typed without a pause through an Enter, all
read at once (text, Enter, more text), are taken for a paste; and a paste that
begins with a line break sends what the box held before it (its first Enter
has nothing of the paste before it, as a typed one).

Up on the first line and Down on the last walk the prompts sent before in this
working directory (:mod:`.history`); a prompt queued during a turn is taken
back into the box with Up (it was not sent). Ctrl-D on an empty box quits.
``/`` and ``@`` open the completion popup (:mod:`.popup`).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar, cast

from textual import events
from textual._ansi_sequences import ANSI_SEQUENCES_KEYS
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget
from textual.widgets import TextArea
from textual.widgets.text_area import Edit, EditResult

from infai.agent import working_files

from ..inert import UNSAFE
from .popup import MENTION, Choice, Completions, fuzzy, is_command, slash_choices

#: keys stamped this close to an Enter came in the same read of the terminal
PASTE_GAP = 0.005
#: ESC CR, what Alt-Enter sends without the kitty keyboard protocol: "alt+enter"
ALT_ENTER = "\x1b\r"
_KEYS = cast(dict[str, object], ANSI_SEQUENCES_KEYS)
_KEYS.setdefault(ALT_ENTER, (SimpleNamespace(value="alt+enter"),))
#: seconds the list of files offered after ``@`` is kept before it is read again
FILES_FRESH = 10.0


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

    def before(self, stamp: float, gap: float = PASTE_GAP) -> bool:
        """Whether a key stamped within ``gap`` before ``stamp`` was received."""
        return any(stamp - gap <= other < stamp for other in reversed(self._times))

    def around(self, stamp: float, gap: float = PASTE_GAP) -> bool:
        """Whether keys stamped within ``gap`` before and after ``stamp`` were
        received: an Enter inside a paste's read (see the module)."""
        return self.before(stamp, gap) and self.after(stamp, gap)


class PromptInput(TextArea):
    """The prompt: Enter sends; pastes and newlines are kept whole; history on Up/Down."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+j,shift+enter,alt+enter", "newline", "newline", show=False),
        Binding("up", "older", "previous prompt", show=False),
        Binding("down", "newer", "next prompt", show=False),
        Binding("ctrl+d", "eof", "quit on an empty prompt", show=False),
    ]

    class Sent(Message):
        """Enter was pressed: ``text`` is what to send (pastes expanded)."""

        def __init__(self, prompt: PromptInput, text: str) -> None:
            super().__init__()
            self.prompt = prompt
            self.text = text

    class TakeBack(Message):
        """Up was pressed on an empty box while prompts are queued."""

    def __init__(self, placeholder: str = "", id: str | None = None) -> None:
        super().__init__(
            placeholder=placeholder,
            id=id,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            highlight_cursor_line=False,
        )
        self.pastes: dict[str, str] = {}
        #: prompts sent before in this directory, oldest first (``history`` is
        #: TextArea's undo)
        self.past: list[str] = []
        self._browsing: int | None = None  # index into history while walking it
        self._draft = ""  # what was in the box when the walk began
        #: keys received by the app (set by the app; None: every Enter sends)
        self.arrivals: Arrivals | None = None
        #: whether prompts are queued (Up on an empty box takes the last back)
        self.queued = False
        self.popup = Completions()
        self._files: tuple[str, float, list[str]] | None = None  # (dir, when, paths)
        self._listing = False  # a list of files is being read

    def on_mount(self) -> None:
        if isinstance(self.parent, Widget) and not self.popup.is_attached:
            self.parent.mount(self.popup, before=self)

    # -- what the box holds -----------------------------------------------------

    @property
    def value(self) -> str:
        """The box's text as shown (paste markers not expanded)."""
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    def expanded(self, value: str) -> str:
        """``value`` with each paste marker still in it replaced by what was pasted."""
        if not self.pastes:
            return value
        pattern = "|".join(re.escape(marker) for marker in self.pastes)
        return re.sub(pattern, lambda match: self.pastes[match.group(0)], value)

    def prompt_text(self, value: str | None = None) -> str:
        """The prompt ``value`` (the box's text by default) stands for: pastes expanded."""
        return self.expanded(self.text if value is None else value).strip()

    def show(self, text: str) -> None:
        """Put ``text`` (a prompt from history or the queue) in the box, editable."""
        self.clear()
        if UNSAFE.search(text.replace("\n", "")):  # never drawn: kept whole behind a marker
            self.pastes["[recalled prompt]"] = text
            self.value = "[recalled prompt]"
        else:
            self.value = text

    def clear(self) -> None:  # type: ignore[override]
        self.load_text("")
        self.pastes.clear()
        self._browsing = None
        self.popup.offer([])

    # -- keys -------------------------------------------------------------------

    async def _on_key(self, event: events.Key) -> None:
        if self.popup.display and self.popup_key(event.key):
            event.stop()
            event.prevent_default()
            return
        if event.key != "enter":
            await super()._on_key(event)
            return
        event.stop()
        event.prevent_default()  # not TextArea's own new line
        await asyncio.sleep(0)  # the rest of a read of the terminal is received meanwhile
        if self.arrivals is not None and self.arrivals.around(event.time):
            self.action_newline()  # a line break inside a paste that came as keys
            return
        self.send()

    def send(self) -> None:
        """Empty the box now and tell the app what was in it (nothing if blank)."""
        if not self.text.strip():
            return
        text = self.prompt_text()
        self.clear()
        self.post_message(self.Sent(self, text))

    def action_newline(self) -> None:
        self.insert("\n")
        self.popup.offer([])

    async def action_eof(self) -> None:
        """Ctrl-D: quit on an empty box (as a shell does), else delete to the right."""
        if self.text:
            self.action_delete_right()
            return
        await self.run_action("app.quit")

    async def _on_paste(self, event: events.Paste) -> None:
        event.stop()
        event.prevent_default()  # not TextArea's own handler
        self.paste(event.text)

    def paste(self, pasted: str) -> None:
        """``pasted`` at the cursor: several lines (or control characters) kept whole
        behind a ``[pasted N lines]`` marker. Also a paste over a dialog (:mod:`.keys`)."""
        text = pasted.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")
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
        self.replace(text, *self.selection)

    # -- the completion popup -----------------------------------------------------

    def edit(self, edit: Edit) -> EditResult:
        """Every change of the text (typed, deleted, pasted, undone) goes through
        here: what the popup offers follows it in the same step."""
        result = super().edit(edit)
        self.complete()
        return result

    def popup_key(self, key: str) -> bool:
        """A key while the popup is shown: whether the popup took it."""
        if key in ("up", "down"):
            self.popup.move(-1 if key == "up" else 1)
        elif key == "escape":
            self.popup.offer([])
        elif key in ("tab", "enter"):
            chosen = self.popup.chosen
            if chosen is None or (key == "enter" and self._typed_whole(chosen)):
                self.popup.offer([])
                return False  # a whole command or file: Enter sends it
            self.accept(chosen)
        else:
            return False
        return True

    def _typed_whole(self, chosen: Choice) -> bool:
        """Whether the box holds a whole command, or the ``@`` token at the cursor is
        ``chosen`` already (completing it would change nothing: Enter sends)."""
        if is_command(self.text):
            return True
        row, column = self.cursor_location
        line = self.document[row][:column]
        return "@" in line and line[line.rindex("@") :] == chosen.insert.strip()

    def accept(self, chosen: Choice) -> None:
        """Put ``chosen`` in place of the token the popup was completing."""
        row, column = self.cursor_location
        line = self.document[row][:column]
        start = 0 if self.text.startswith("/") and row == 0 else line.rindex("@")
        self.replace(chosen.insert, (row, start), (row, column))
        self.popup.offer([])

    def complete(self) -> None:
        """Offer what the token at the cursor may become (or hide the popup)."""
        row, column = self.cursor_location
        line = self.document[row][:column]
        text = self.text
        if row == 0 and text.startswith("/") and not re.search(r"\s", text):
            self.popup.offer(slash_choices(text))
            return
        mention = MENTION.search(line)
        if mention is None:
            self.popup.offer([])
            return
        paths = self._paths()
        found = fuzzy(mention.group(1), paths)
        self.popup.offer([Choice(f"@{path} ", f"@{path}") for path in found])

    def _paths(self) -> list[str]:
        """The files ``@`` offers (read in a thread; the popup fills in once read)."""
        session = getattr(self.app, "session", None)
        where = str(getattr(session, "working_dir", None) or Path.cwd())
        files = self._files
        if files is not None and files[0] == where and time.monotonic() - files[1] < FILES_FRESH:
            return files[2]
        if not self._listing:
            self._listing = True
            self.run_worker(self._list(where), group="files", exit_on_error=False)
        return files[2] if files is not None and files[0] == where else []

    async def _list(self, where: str) -> None:
        try:
            paths = await asyncio.to_thread(working_files, where)
        finally:
            self._listing = False
        self._files = (where, time.monotonic(), paths)
        self.complete()

    # -- history ----------------------------------------------------------------

    def _on_top(self) -> bool:
        return self.wrapped_document.location_to_offset(self.cursor_location).y == 0

    def _on_bottom(self) -> bool:
        last = self.wrapped_document.location_to_offset(self.document.end).y
        return self.wrapped_document.location_to_offset(self.cursor_location).y == last

    def action_older(self) -> None:
        if not self._on_top():
            self.action_cursor_up()
            return
        if self.queued and not self.text:
            self.post_message(self.TakeBack())
            return
        if not self.past:
            return
        if self._browsing is None:
            self._draft, index = self.text, len(self.past)
        else:
            index = self._browsing
        self._walk_to(max(0, index - 1))
        self.move_cursor((0, 0))  # the next Up goes on back, not up its lines

    def action_newer(self) -> None:
        if not self._on_bottom():
            self.action_cursor_down()
            return
        if self._browsing is None:
            return
        index = self._browsing + 1
        if index >= len(self.past):
            draft = self._draft
            self.clear()
            self.value = draft
            return
        self._walk_to(index)

    def _walk_to(self, index: int) -> None:
        self.show(self.past[index])
        self._browsing = index

    def remember(self, text: str) -> None:
        """``text`` was sent (or kept as a draft): the newest entry (an immediate
        repeat is kept once)."""
        if not self.past or self.past[-1] != text:
            self.past.append(text)

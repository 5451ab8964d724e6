"""The keyboard: every key is applied in the order it arrived, and the prompt box
(the composer) owns it.

Why keys came out of order: Textual hands a key to the focused widget through
that widget's message queue, but runs the focused widget's *bindings* (Input's
Backspace, Ctrl-U, Enter; the prompt's Ctrl-J) only once the key has bubbled up
through every ancestor's queue to the app. The printable keys behind it are
inserted as soon as the widget takes them from its own queue, so in a burst
(``abc`` Ctrl-U ``hello``) the later letters land before the earlier binding
runs (an empty box), and a key that moves the focus (Enter in a dialog's field,
a letter typed on the timeline) takes effect after the keys behind it were
already given to the old widget.

The fix is one queue: the app takes the keys (and pastes) the terminal sends,
in order, and gives the next one out only when the one before it has been
handled all the way: a :class:`KeyDone` marker is posted to the widget right
behind the key and follows the same path up the DOM; when it reaches the app,
the key and what it posted to that widget have been handled, and a second
round catches what those posted in turn (a field's ``Submitted`` closing its
dialog). The next key then goes to whatever has the focus by now.

The composer owns the keyboard: on the main screen, a printable key, a paste,
or a key the focused widget has no use for but the prompt has (Enter on the
chat, Backspace on the timeline) goes to the prompt, and the focus with it.
Panels keep only the keys they bind that are not text (the timeline's arrows,
Enter, Ctrl-D), and only when the user moved into them (Ctrl-T, Tab), which
is drawn. A click in the chat (opening a folded result) leaves the keyboard
with the prompt. Dialogs (modal screens) have the keys to themselves, but for
text typed over one with nothing to type into (F1's key map, the rewind list,
a files diff):
that closes it, and the text goes to the prompt; a paste over a dialog with no
field open (a question answered by a letter) goes to the prompt, the dialog staying.
"""

from __future__ import annotations

import textwrap
from collections import deque

from rich.markup import escape
from textual import events
from textual.message import Message
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Input, TextArea

from .style import Styled

#: rounds a key's marker makes (see the module's docstring)
ROUNDS = 2
#: seconds between looks at whether the widget a key went to is still there
WATCH = 0.2
#: keys the prompt handles itself rather than by a binding (Enter sends): a panel
#: that has no use for one passes it to the prompt as it does the prompt's bindings
COMPOSER_KEYS = frozenset({"enter"})


class KeyDone(Message):
    """Follows key number ``number`` up the DOM from the widget it was given to."""

    def __init__(self, number: int, rounds: int) -> None:
        super().__init__()
        self.number = number
        self.rounds = rounds


class Keyboard(Styled):
    """The app's key queue and the composer's claim on the keyboard."""

    #: the id of the prompt box, which owns the keyboard on the main screen
    COMPOSER = "#prompt"

    def __init__(self) -> None:
        super().__init__()
        self._keys: deque[events.Key | events.Paste] = deque()
        self._given = 0  # the number of the last key given out
        self._waiting: Widget | None = None  # where the key in flight went (None: no key)
        self._key_watch: Timer | None = None  # looks whether that widget is still there

    async def on_event(self, event: events.Event) -> None:
        """Keys and pastes from the terminal join the queue; everything else as Textual does."""
        if isinstance(event, (events.Key, events.Paste)) and not event.is_forwarded:
            self._keys.append(event)
            await self._give_next()
            return
        clicked = isinstance(event, events.MouseUp) and not event.is_forwarded
        await super().on_event(event)
        if clicked:
            self.call_later(self._clicked)

    async def _give_next(self) -> None:
        """Give out queued keys while none is in flight."""
        while self._keys and self._waiting is None:
            event = self._keys.popleft()
            self._claim(event)
            if self._pasted_past(event):
                continue
            target = self.focused or self.screen
            await super().on_event(event)  # priority bindings, else to the focused widget
            if event.is_forwarded:  # on its way up: the next waits for its marker
                self._given += 1
                self._waiting = target
                target.post_message(KeyDone(self._given, ROUNDS))
                if self._key_watch is None:
                    self._key_watch = self.set_interval(WATCH, self._look)

    def on_key_done(self, message: KeyDone) -> None:
        """A key's marker came back: another round, or the next key."""
        message.stop()
        if message.number != self._given or self._waiting is None:
            return
        if message.rounds > 1 and self._waiting.is_attached:
            self._waiting.post_message(KeyDone(message.number, message.rounds - 1))
            return
        self._waiting = None
        self.call_later(self._give_next)  # after what the key queued here (a focus change)

    def _look(self) -> None:
        """A key given to a widget that went away meanwhile (its dialog closed) never
        sends its marker back: the queue goes on without it (every :data:`WATCH` s)."""
        waiting = self._waiting
        if waiting is None or (waiting.is_attached and not waiting._closing):
            return
        self._waiting = None
        self.call_later(self._give_next)

    # -- the composer's claim ------------------------------------------------------

    @property
    def composer(self) -> Widget | None:
        """The prompt box, when the main screen is the one shown."""
        if len(self.screen_stack) > 1:
            return None
        found = self.screen.query(self.COMPOSER)
        return found.first(Widget) if found else None

    def _claim(self, event: events.Key | events.Paste) -> None:
        """On the main screen, a key meant for the prompt moves the focus there first;
        text typed over a dialog with nothing to type into closes it first."""
        self._typed_over(event)
        composer = self.composer
        focused = self.focused
        if composer is None or focused is composer:
            return
        if focused is None or isinstance(event, events.Paste) or self._for_composer(event, focused):
            self.screen.set_focus(composer)

    def _typed_over(self, event: events.Key | events.Paste) -> None:
        """Text (a printable key, a paste) over a dialog that marks itself
        :attr:`TYPING_CLOSES` (a list to read or pick from, nothing to type into),
        right over the main screen: the dialog closes, choosing nothing, and the
        text goes on to the prompt (it was dropped)."""
        if len(self.screen_stack) != 2 or not getattr(self.screen, "TYPING_CLOSES", False):
            return
        if isinstance(event, events.Paste) or (event.is_printable and event.character):
            self.pop_screen()

    def _pasted_past(self, event: events.Key | events.Paste) -> bool:
        """A paste over a dialog whose focus takes no text (the approval's question,
        the restore's) is not an answer: it goes to the prompt box underneath, the
        dialog staying (it was dropped). Whether it went there."""
        if not isinstance(event, events.Paste) or len(self.screen_stack) < 2:
            return False
        if isinstance(self.focused, (Input, TextArea)):  # a field of the dialog's
            return False
        found = self.screen_stack[0].query(self.COMPOSER)
        paste = getattr(found.first(Widget), "paste", None) if found else None
        if paste is None:
            return False
        paste(event.text)
        return True

    def _for_composer(self, key: events.Key, focused: Widget) -> bool:
        """Text, or a key the focused widget does not bind and the prompt does."""
        if key.is_printable and key.character:
            return True
        if any(key.key in node._bindings.key_to_bindings for node in self._chain(focused)):
            return False
        composer = self.composer
        return composer is not None and (
            key.key in composer._bindings.key_to_bindings or key.key in COMPOSER_KEYS
        )

    def _chain(self, widget: Widget) -> list[Widget]:
        """``widget`` and its ancestors below the screen: whose bindings it has."""
        chain: list[Widget] = []
        node: Widget | None = widget
        while node is not None and node is not self.screen:
            chain.append(node)
            parent = node.parent
            node = parent if isinstance(parent, Widget) else None
        return chain

    def _clicked(self) -> None:
        """A click in the chat (a folded result opened) leaves the keys with the prompt."""
        composer, focused = self.composer, self.focused
        if composer is None or focused is composer:
            return
        if focused is None or focused.id != "timeline":
            self.screen.set_focus(composer)


# -- the key map: written once, shown by F1 and listed in the README ---------------

#: (where, key, what it does), in the order F1 and the README show them
KEYMAP: tuple[tuple[str, str, str], ...] = (
    ("prompt", "Enter", "send; during a turn it is queued and sent when the turn ends"),
    (
        "prompt",
        "Ctrl-J",
        "new line (also Shift-Enter and Alt-Enter); the box grows to a third of the "
        "screen, then scrolls",
    ),
    (
        "prompt",
        "Up / Down",
        "on the first / last line: earlier prompts of this directory; Up on an empty "
        "prompt takes a queued prompt back to edit",
    ),
    ("prompt", "Ctrl-U / Ctrl-K", "delete to the start / the end of the line"),
    ("prompt", "paste", "several lines are kept whole, shown as [pasted N lines]"),
    ("prompt", "Ctrl-D", "quit when the prompt is empty"),
    ("prompt", "/", "at the start: the commands, with their help (Tab or Enter completes)"),
    ("prompt", "@", "a file of this directory, fuzzy (Tab or Enter); sent, its content goes too"),
    ("prompt", "!cmd", "run cmd as the agent's bash would (asked, sandboxed); output kept"),
    ("popup", "↑ ↓ Tab Enter Esc", "choose, complete, close"),
    (
        "anywhere",
        "typing",
        "always goes to the prompt, in the order typed, whatever has the keys (a paste "
        "too); typed over F1, the rewind list or a files diff, it closes them",
    ),
    (
        "anywhere",
        "Tab",
        "move the keys to the chat, a folded result or the timeline; the "
        "prompt's border says where they are",
    ),
    (
        "anywhere",
        "Esc",
        "close the timeline if it is open, else back to HEAD (forget the pick)",
    ),
    (
        "anywhere",
        "Esc Esc",
        "rewind: your prompts on this branch; Enter puts one back in the prompt to "
        "edit, sent from before it (its files restored)",
    ),
    ("anywhere", "Ctrl-T", "the timeline: open it (it takes the keys) / close it"),
    (
        "anywhere",
        "Ctrl-C",
        "copy the text selected with the mouse (drag over the chat); else cancel the "
        "turn in flight, else clear the draft (Up brings it back); twice to quit",
    ),
    ("anywhere", "PgUp / PgDn", "scroll the chat a page (the keys stay where they are)"),
    ("anywhere", "Ctrl-O", "sessions (type to filter)"),
    ("anywhere", "Ctrl-F", "search every session"),
    ("anywhere", "Ctrl-N / F2", "new session / rename it"),
    ("anywhere", "F1", "this key map, the commands and the MCP servers"),
    ("timeline", "↑ ↓ PgUp PgDn", "move to an event"),
    (
        "timeline",
        "Enter",
        "continue from the event (the next prompt branches there; from a tool call: "
        "after its result)",
    ),
    ("timeline", "Ctrl-D", "what changed in the event's files"),
    ("folded result", "Enter", "open it (a click opens it and leaves the keys with the prompt)"),
)


def keymap_text(width: int = 46) -> str:
    """The key map as F1 shows it: a heading per place, each key with what it does
    wrapped to ``width`` columns beside it (Rich markup: the only markup is ours)."""
    lines: list[str] = []
    place = ""
    for where, key, what in KEYMAP:
        if where != place:
            lines.append(f"{'' if not lines else chr(10)}[b]{where.capitalize()}[/b]")
            place = where
        column = max(len(k) for _, k, _ in KEYMAP) + 3
        wrapped = textwrap.wrap(what, max(20, width - column))
        lines.append(escape(f"  {key:<{column - 2}}{wrapped[0]}"))
        lines.extend(escape(" " * column + more) for more in wrapped[1:])
    return "\n".join(lines)


def keymap_markdown() -> str:
    """The key map as the README's table lists it (``tests/test_readme.py`` checks)."""
    rows = ["| Where | Key | |", "|---|---|---|"]
    rows += [f"| {where} | {key} | {what} |" for where, key, what in KEYMAP]
    return "\n".join(rows)


def where_keys_are(widget: Widget | None) -> str:
    """The prompt box's title while ``widget`` has the focus ("" for the prompt)."""
    if widget is None:
        return "keys: nowhere · typing comes here"
    if widget.id == "prompt":
        return ""
    if widget.id == "timeline":
        what = "timeline: ↑↓ Enter pick · Ctrl-D diff · Esc"
    elif widget.id == "more":
        what = "earlier events: Enter shows them"
    elif widget.id == "chat":  # the ChatView
        what = "chat: ↑↓ scroll"
    else:
        what = "folded result: Enter opens it"
    return f"keys: {what} · typing comes here"

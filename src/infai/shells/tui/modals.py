"""Dialogs: approve a tool call, pick a session, rename one, and help.

Each is a modal screen with a fixed-width box that shrinks with the terminal,
so it fits at 60x20 as well as at 80x24 and never pushes the layout behind it.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from infai.store import SessionInfo
from infai.tools import AllowAlways, Answer, Ask, Reply

from ..inert import inert, inert_text

#: seconds of no typing before a question's keys count as answers
GRACE = 0.6

MODAL_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 76; max-width: 95%; height: auto; max-height: 90%;
    border: round $accent; background: $surface; padding: 0 1;
}}
{name} .title {{ text-style: bold; }}
{name} .keys {{ color: $text-muted; }}
"""


class ApprovalScreen(ModalScreen[Reply]):
    """Allow once (y), allow always what the patterns shown match (a; e to edit
    them first), or deny (n, Esc).

    A question can open while the user is typing: until they pause for
    :data:`GRACE` seconds, keys are not answers but go on to the input they were
    typing in, so a stray ``a`` never allows anything.
    """

    DEFAULT_CSS = (
        MODAL_CSS.format(name="ApprovalScreen")
        + """
    ApprovalScreen #subject { max-height: 8; overflow-y: auto; }
    ApprovalScreen #arguments { max-height: 6; overflow-y: auto; }
    ApprovalScreen .reason { color: $text-muted; }
    """
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer('allow')", "allow once"),
        Binding("a", "answer('allow-always')", "allow always"),
        Binding("e", "edit", "edit the pattern"),
        Binding("n", "answer('deny')", "deny"),
        Binding("escape", "escape", "deny", show=False),
    ]

    def __init__(self, ask: Ask) -> None:
        super().__init__()
        self.ask = ask
        self.patterns = [rule.pattern for rule in ask.always]
        self._quiet_from = time.monotonic() + GRACE

    def on_mount(self) -> None:
        """The pause counts from when the question is on the screen, not from when
        it was asked (on a loaded machine, drawing it can take a while)."""
        self._quiet_from = time.monotonic() + GRACE

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(inert_text(f"Allow {self.ask.tool}?"), classes="title")
            yield Static(inert_text(self.ask.reason), classes="reason")
            yield Static(inert_text(self.ask.subject or "(no arguments)"), id="subject")
            if self.ask.caller:  # a subagent's call: its transcript is not on the screen
                shown = json.dumps(dict(self.ask.arguments), ensure_ascii=False, default=str)
                yield Static(inert_text(shown[:2000]), id="arguments")
            keys = Text.from_markup("[b]y[/b] allow once   [b]n[/b]/Esc deny")
            if self.patterns:
                keys.append_text(Text.from_markup("\n[b]a[/b] allow always: "))
                keys.append(inert("  ".join(self.patterns)), style="bold")
                keys.append_text(Text.from_markup("   [b]e[/b] edit"))
            yield Static(keys, classes="keys", id="keys")
            if self.ask.note:  # why "allow always" is exact only, or not offered
                yield Static(inert_text(self.ask.note), classes="reason", id="note")

    @property
    def editing(self) -> bool:
        return bool(self.query("#pattern"))

    def on_key(self, event: events.Key) -> None:
        """Keys typed before the user paused go on to what they were typing in."""
        if self.editing or time.monotonic() >= self._quiet_from:
            return
        event.stop()
        event.prevent_default()
        self._quiet_from = time.monotonic() + GRACE
        below = self.app.screen_stack[-2].focused if len(self.app.screen_stack) > 1 else None
        if isinstance(below, Input):
            if event.is_printable and event.character:
                below.insert_text_at_cursor(event.character)
            elif event.key == "backspace":
                below.action_delete_left()

    def action_answer(self, answer: Answer) -> None:
        if answer == "allow-always" and not self.patterns:
            return  # not offered (an escalation, no sandbox): a stray "a" allows nothing
        if not self.editing:
            self.dismiss(answer)

    async def action_edit(self) -> None:
        if not self.editing and self.patterns:
            field = Input(
                inert(self.patterns[-1]), id="pattern", placeholder="a pattern (* any text)"
            )
            await self.query_one(Vertical).mount(field)
            field.focus()

    async def action_escape(self) -> None:
        if self.editing:  # back to the question
            await self.query_one("#pattern").remove()
        else:
            self.dismiss("deny")

    def on_input_submitted(self, message: Input.Submitted) -> None:
        message.stop()
        if message.value.strip():
            self.dismiss(AllowAlways((message.value.strip(),)))


def _ago(stamp: str, now: datetime | None = None) -> str:
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return "just now"


def session_label(info: SessionInfo) -> Text:
    name = inert(info.name or "(unnamed)").replace("\n", " ")
    name = name if len(name) <= 28 else name[:27] + "…"
    text = inert_text(f"{name:<28} ", "bold")
    text.append(f"{inert(_ago(info.updated_at)):>8}  ")
    text.append(inert(info.working_dir or "-"), style="dim")
    return text


class SessionPicker(ModalScreen[str | None]):
    """Recent sessions, newest first; Enter opens one, n starts a new one."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="SessionPicker")
        + """
    SessionPicker OptionList { height: auto; max-height: 14; }
    """
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "close"),
        Binding("n", "new", "new session"),
    ]
    NEW = "__new__"

    def __init__(self, sessions: list[SessionInfo], current: str | None) -> None:
        super().__init__()
        self.sessions = sessions
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Sessions (newest first)", classes="title")
            options = [Option(session_label(i), id=i.id) for i in self.sessions]
            picker = OptionList(*options)
            yield picker
            yield Static(
                "[b]Enter[/b] open   [b]n[/b] new session   [b]Esc[/b] close", classes="keys"
            )

    def on_mount(self) -> None:
        picker = self.query_one(OptionList)
        ids = [i.id for i in self.sessions]
        if self.current in ids:
            picker.highlighted = ids.index(self.current)
        picker.focus()

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        self.dismiss(message.option.id)

    def action_new(self) -> None:
        self.dismiss(self.NEW)


class RenameScreen(ModalScreen[str | None]):
    """A new name for the session: Enter saves it (an empty field: no name, and
    an unnamed new session is removed when left empty); Esc keeps the old one."""

    DEFAULT_CSS = MODAL_CSS.format(name="RenameScreen")
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, current: str | None) -> None:
        super().__init__()
        self.current = current or ""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Rename session", classes="title")
            yield Input(inert(self.current), placeholder="a name to show in listings")
            yield Static(
                "[b]Enter[/b] save (empty: no name)   [b]Esc[/b] keep the name", classes="keys"
            )

    def on_input_submitted(self, message: Input.Submitted) -> None:
        message.stop()
        self.dismiss(message.value.strip())


HELP = """\
[b]Keys[/b]
  Enter    send the prompt
  Ctrl-C   cancel a turn; twice to quit
  Ctrl-T   timeline: continue from an older event
  Esc      back to HEAD (forget the picked event)
  Ctrl-O   sessions: resume one, or start one
  Ctrl-F   search every session; Enter opens a hit
  Ctrl-N   new session      F2  rename
  F1       this help

[b]Commands[/b]
  /compact       summarise the context now
  /model NAME    switch model: offline,
                 provider:model or a configured name
  /rename NAME   rename this session
  /search WORDS  search every session
  /new  /sessions  /help  /quit
"""


class HelpScreen(ModalScreen[None]):
    """Keys and commands; scrolls when the terminal is too short for all of it."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="HelpScreen")
        + """
    HelpScreen VerticalScroll { height: auto; max-height: 100%; }
    """
    )
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f1,q", "dismiss(None)", "close")]

    def compose(self) -> ComposeResult:
        with Vertical(), VerticalScroll():
            yield Static(HELP)

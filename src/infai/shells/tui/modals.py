"""Dialogs: approve a tool call, pick a session, rename one, and help.

Each is a modal screen with a fixed-width box that shrinks with the terminal,
so it fits at 60x20 as well as at 80x24 and never pushes the layout behind it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.markup import escape
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from infai.store import SessionInfo
from infai.tools import AllowAlways, Answer, Ask, DenyWith, Reply

from ..inert import inert, inert_text
from ..listing import shown_dir
from ..render import printable
from .diffs import DIFFED, numbered_diff
from .keys import keymap_text
from .popup import commands_text

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


#: keys typed into a dialog's grace that are a line break in the prompt box (Enter
#: too: an unbracketed paste's, and a send would not be what the user saw coming)
NEWLINES = frozenset({"enter", "ctrl+j", "shift+enter", "alt+enter"})
#: the prompt box's editing keys that a dialog's grace passes on (not Ctrl-D, which
#: quits on an empty box, nor Up and Down, which walk the history)
EDITING = frozenset({"backspace", "delete", "ctrl+u", "ctrl+k", "ctrl+w", "left", "right"})


async def typed_ahead(dialog: Screen[Any], event: events.Key) -> None:
    """``event``, typed in ``dialog``'s grace (before the user paused), is not an
    answer: it goes on to what has the keys under the dialog. In the prompt box
    (a TextArea): text, a line break (:data:`NEWLINES`) and the editing keys of
    :data:`EDITING`; in a field: text and Backspace. Never a key that sends or quits."""
    event.stop()
    event.prevent_default()
    stack = dialog.app.screen_stack
    below = stack[-2].focused if len(stack) > 1 and stack[-1] is dialog else None
    text = event.character if event.is_printable and event.character else None
    if isinstance(below, TextArea):
        if event.key in NEWLINES:
            below.insert("\n")
        elif text:
            below.insert(text)
        elif event.key in EDITING:
            for binding in below._bindings.key_to_bindings.get(event.key, []):
                await below.run_action(binding.action)
                break
    elif isinstance(below, Input):
        if text:
            below.insert_text_at_cursor(text)
        elif event.key == "backspace":
            below.action_delete_left()


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
    ApprovalScreen > Vertical { max-height: 100%; }
    ApprovalScreen #subject { max-height: 4; overflow-y: auto; }
    ApprovalScreen #arguments { max-height: 6; overflow-y: auto; }
    ApprovalScreen .reason { color: $text-muted; max-height: 3; }
    ApprovalScreen #diff {
        height: auto; max-height: 40vh; border-top: solid $accent; scrollbar-size-vertical: 1;
    }
    """
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer('allow')", "allow once"),
        Binding("a", "answer('allow-always')", "allow always"),
        Binding("e", "edit", "edit the pattern"),
        Binding("n", "answer('deny')", "deny"),
        Binding("r", "reason", "deny, saying why"),
        Binding("escape", "escape", "deny", show=False),
    ]

    def __init__(self, ask: Ask, current: str | None = None) -> None:
        super().__init__()
        self.ask = ask
        #: the text of the file an edit or a write changes, as it is now: the dialog
        #: holds the change, numbered and scrolling, as it covers the chat's diff
        self.current = current
        self.patterns = [rule.pattern for rule in ask.always]
        self._quiet_from = time.monotonic() + GRACE

    def on_mount(self) -> None:
        """The pause counts from when the question is on the screen, not from when
        it was asked (on a loaded machine, drawing it can take a while)."""
        self._quiet_from = time.monotonic() + GRACE

    def compose(self) -> ComposeResult:
        """The question, what it is about, the choices, then the change itself
        (scrolling), so a small terminal shows the choices and the diff's start."""
        ask = self.ask
        arguments = json.dumps(dict(ask.arguments), ensure_ascii=False, default=str)
        with Vertical():
            yield Static(inert_text(f"Allow {ask.tool}?"), classes="title")
            # an MCP tool's call has no subject (the rule names the tool): its arguments
            subject = ask.subject or (arguments if ask.arguments else "(no arguments)")
            yield Static(inert_text(subject[:2000]), id="subject")
            yield Static(inert_text(ask.reason), classes="reason")
            if ask.caller and ask.subject:  # a subagent's call: its transcript is not shown
                yield Static(inert_text(arguments[:2000]), id="arguments")
            keys = Text.from_markup(
                "[b]y[/b] allow once   [b]n[/b]/Esc deny   [b]r[/b] deny, saying why"
            )
            if ask.always:  # the rules exactly as they are stored: "tool pattern"
                keys.append_text(Text.from_markup("\n[b]a[/b] allow always: "))
                rules = "  ".join(f"{rule.tool} {rule.pattern}" for rule in ask.always)
                keys.append(inert(rules), style="bold")
                keys.append_text(Text.from_markup("   [b]e[/b] edit"))
            yield Static(keys, classes="keys", id="keys")
            if ask.note:  # why "allow always" is exact only, or not offered
                yield Static(inert_text(ask.note), classes="reason", id="note")
            if ask.tool in DIFFED:
                with VerticalScroll(id="diff"):
                    yield Static(numbered_diff(ask.tool, ask.arguments, self.current))

    @property
    def editing(self) -> bool:
        return bool(self.query("#pattern"))

    async def on_key(self, event: events.Key) -> None:
        """Keys typed before the user paused go on to what they were typing in: text,
        line breaks (in the prompt box: Ctrl-J, or Enter, as an unbracketed paste's)
        and the editing keys of :data:`EDITING`, never a key that sends or quits."""
        if self.editing or time.monotonic() >= self._quiet_from:
            return
        self._quiet_from = time.monotonic() + GRACE
        await typed_ahead(self, event)

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
            await self._mount_field(field)
            field.focus()

    async def action_reason(self) -> None:
        """Deny with words for the model: why not, or what to do instead."""
        if not self.editing:
            field = Input(id="pattern", placeholder="why not (sent to the model); Enter denies")
            field.add_class("deny-reason")
            await self._mount_field(field)
            field.focus()

    async def _mount_field(self, field: Input) -> None:
        """A field to type in goes under the choices, above the diff (kept in view)."""
        box = self.query_one(Vertical)
        diff = self.query("#diff")
        await box.mount(field, before=diff.first() if diff else None)

    async def action_escape(self) -> None:
        if self.editing:  # back to the question
            await self.query_one("#pattern").remove()
        else:
            self.dismiss("deny")

    def on_input_submitted(self, message: Input.Submitted) -> None:
        message.stop()
        text = message.value.strip()
        if message.input.has_class("deny-reason"):
            self.dismiss(DenyWith(text) if text else "deny")
        elif text:
            self.dismiss(AllowAlways((text,)))


def _ago(stamp: str, now: datetime | None = None) -> str:
    """When, in words a person reads at a glance: "3 min ago" for today's, a local
    date and time for older ones."""
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    if seconds < 60:
        return "just now"
    for size, unit in ((86400 * 7, None), (86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            if unit is None:  # a week or more: the date, in local time
                return then.astimezone().strftime("%b %d %H:%M")
            return f"{seconds // size} {unit} ago"
    return "just now"


@dataclass(frozen=True)
class Listed:
    """A session as the picker lists it: its title (the name, else the first prompt)
    and how many events it holds, read from its index."""

    info: SessionInfo
    title: str
    count: int


def session_label(row: Listed, nested: bool = False) -> Text:
    """One line: title, when, how many events, the directory (cut at the end); a
    subagent's or a fork's session (``nested``) under its parent, marked ``└``."""
    title = ("└ " if nested else "") + inert(row.title or "(empty)").replace("\n", " ")
    title = title if len(title) <= 22 else title[:21] + "…"
    text = inert_text(f"{title:<22} ", "bold")
    text.append(f"{inert(_ago(row.info.updated_at)):>11} ")
    text.append(inert(f"{row.count:>4} ev "), style="dim")
    # one line: an imported session's directory is its file's word (a newline too)
    text.append(printable(shown_dir(row.info) or "-"), style="dim")
    return text


def grouped(rows: list[Listed], here: str) -> list[Listed]:
    """By directory: this one's first, then each other directory in order of its
    most recent session; newest first within each. A session whose parent is
    listed (an imported subagent's or sidechain's, a fork's) follows its parent,
    not listed as one of its own."""
    order: dict[str, int] = {here: -1}
    for index, row in enumerate(rows):
        order.setdefault(shown_dir(row.info), index)
    ranked = sorted(rows, key=lambda r: order[shown_dir(r.info)])  # stable: newest first
    listed = {row.info.id for row in rows}
    children: dict[str, list[Listed]] = {}
    for row in ranked:
        parent = row.info.parent_session
        if parent is not None and parent in listed and parent != row.info.id:
            children.setdefault(parent, []).append(row)
    nested = {row.info.id for kids in children.values() for row in kids}
    out: list[Listed] = []
    work = [row for row in reversed(ranked) if row.info.id not in nested]
    seen: set[str] = set()
    while work:  # each top-level row, then its children (theirs too), depth first
        row = work.pop()
        if row.info.id in seen:
            continue
        seen.add(row.info.id)
        out.append(row)
        work.extend(reversed(children.get(row.info.id, [])))
    out += [row for row in ranked if row.info.id not in seen]  # a cycle of parents
    return out


class SessionPicker(ModalScreen[str | None]):
    """Sessions grouped by directory (this one first), newest first in each; typing
    filters them (title, directory, id); Enter opens one, Ctrl-N starts a new one."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="SessionPicker")
        + """
    SessionPicker OptionList {
        height: auto; max-height: 12; text-wrap: nowrap; text-overflow: ellipsis;
    }
    SessionPicker #filter { border: none; height: 1; padding: 0; }
    """
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "close"),
        Binding("ctrl+n", "new", "new session"),
        Binding("down", "move(1)", "next", show=False),
        Binding("up", "move(-1)", "previous", show=False),
    ]
    NEW = "__new__"

    def __init__(self, rows: list[Listed], current: str | None, here: str = "") -> None:
        super().__init__()
        self.rows = grouped(rows, here)
        self.current = current
        self.shown = self.rows

    @property
    def sessions(self) -> list[SessionInfo]:
        """The sessions listed now, in the list's order."""
        return [row.info for row in self.shown]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Sessions (this directory first, newest first)", classes="title")
            yield Input(placeholder="type to filter…", id="filter")
            yield OptionList()
            yield Static(
                "[b]Enter[/b] open   [b]Ctrl-N[/b] new session   [b]Esc[/b] close",
                classes="keys",
            )

    def _fill(self) -> None:
        picker = self.query_one(OptionList)
        picker.clear_options()
        options: list[Option | None] = []
        last: str | None = None
        listed_ids = {row.info.id for row in self.shown}
        for row in self.shown:
            if last is not None and shown_dir(row.info) != last:
                options.append(None)  # a rule between directories
            last = shown_dir(row.info)
            nested = row.info.parent_session in listed_ids
            options.append(Option(session_label(row, nested), id=row.info.id))
        picker.add_options(options)
        ids = [i.id for i in self.sessions]
        if self.current in ids:
            picker.highlighted = ids.index(self.current)
        elif ids:
            picker.highlighted = 0

    def on_mount(self) -> None:
        self._fill()
        self.query_one("#filter", Input).focus()

    def on_input_changed(self, message: Input.Changed) -> None:
        words = message.value.lower().split()

        def text(row: Listed) -> str:
            info = row.info
            return f"{row.title} {info.name or ''} {shown_dir(info)} {info.id}".lower()

        self.shown = [row for row in self.rows if all(w in text(row) for w in words)]
        self._fill()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        message.stop()
        picker = self.query_one(OptionList)
        if picker.highlighted is not None and self.shown:
            self.dismiss(self.sessions[picker.highlighted].id)

    def action_move(self, step: int) -> None:
        picker = self.query_one(OptionList)
        if step > 0:
            picker.action_cursor_down()
        else:
            picker.action_cursor_up()

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


#: F1: the key map (written once, in :mod:`.keys`), then files and commands
HELP = (
    keymap_text()
    + """

[b]Files[/b]
  Sending from an older event first puts
  its files back; if you changed files
  since, it asks: k keep mine, t take the
  snapshot's, f don't touch files, c cancel
  The status bar says "files ≠ HEAD" when
  the disk is not HEAD's

[b]Commands[/b]
"""
    + escape(commands_text())
)


class HelpScreen(ModalScreen[None]):
    """Keys and commands; scrolls when the terminal is too short for all of it."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="HelpScreen")
        + """
    HelpScreen VerticalScroll { height: auto; max-height: 100%; }
    """
    )
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f1", "dismiss(None)", "close")]
    #: text typed over it closes it and goes to the prompt (:mod:`.keys`)
    TYPING_CLOSES = True

    def __init__(self, servers: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__()
        #: the MCP servers of this directory, as ``infai mcp ls --json`` lists them
        self.servers = list(servers)

    def compose(self) -> ComposeResult:
        with Vertical(), VerticalScroll():
            yield Static(HELP)
            if self.servers:
                yield Static(mcp_listing(self.servers), id="mcp")


def mcp_listing(servers: Sequence[Mapping[str, Any]]) -> Text:
    """The MCP servers and their tools, as ``infai mcp ls`` shows them (the names and
    reasons come from the servers: shown inert)."""
    text = Text.from_markup("[b]MCP servers[/b] (infai mcp ls)\n")
    for row in servers:
        tools = row.get("tools") or []
        state = "not started yet" if row.get("state") == "stopped" else str(row.get("state"))
        line = f"  {row.get('name')}  {state}"
        line += f", {len(tools)} tools" if tools else ""
        text.append(inert(line))
        text.append("\n")
        if row.get("problem") and row.get("state") not in ("ready", "stopped"):
            text.append(inert(f"    {row['problem']}"), style="red")
            text.append("\n")
        for tool in tools:
            text.append(inert(f"    {tool.get('name')}"))
            text.append("\n")
        for gone in row.get("unavailable") or []:
            text.append(inert(f"    {gone.get('remote')}: {gone.get('why')}"), style="red")
            text.append("\n")
    return text

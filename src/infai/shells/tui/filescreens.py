"""Dialogs of the files on the timeline: the restore question, and a diff.

A continue from an older event restores that event's files first; when files
it would replace or remove were last changed outside the agent (since its last
snapshot, or recorded between turns rather than after a tool), or another open
session works in the directory, the restore is refused with nothing changed and
:class:`RestoreScreen` asks what to do: keep mine, take the snapshot's, leave
the files alone and continue the conversation only, or cancel (the prompt goes
back to the box). :class:`DiffScreen` shows what changed in an event's files,
a unified diff per text file and a list of binary changes, scrolling.

Every path and every diff line is someone else's text (a file name may hold an
escape sequence): all of it is drawn inert.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from infai.agent import OnRestore

from ..inert import inert, inert_text
from .modals import GRACE, MODAL_CSS, typed_ahead

#: the conflicting paths listed in the question (the rest are counted)
LISTED_PATHS = 40
#: the lines of a diff drawn (the rest are counted): a huge diff never stalls the screen
DIFF_LINES = 4000
KEEP, TAKE, FILES_ALONE = "keep", "take", "alone"


def restore_choice(answer: str, conflicts: Sequence[str], others: Sequence[str]) -> OnRestore:
    """What an answer to the question asks of the restore: keep mine leaves the
    conflicting paths as they are (and goes on past other sessions, which the
    user was told of); take the snapshot's forces; files alone skips the restore."""
    if answer == KEEP:
        return OnRestore(force=bool(others), keep=tuple(conflicts))
    if answer == TAKE:
        return OnRestore(force=True)
    return OnRestore(keep_files=True)


def restore_question(conflicts: Sequence[str], others: Sequence[str]) -> Text:
    """The paths changed outside the agent and the other sessions, inert."""
    text = Text()
    if conflicts:
        text.append(inert(f"{len(conflicts)} file(s) changed outside the agent (by you, not"))
        text.append(" by a tool); restoring would replace or remove them:\n")
        for path in conflicts[:LISTED_PATHS]:
            text.append(inert(f"  {path}\n"), style="bold")
        if len(conflicts) > LISTED_PATHS:
            text.append(inert(f"  … and {len(conflicts) - LISTED_PATHS} more\n"))
    if others:
        text.append("Other open sessions may be writing in this directory:\n")
        for other in others:
            text.append(inert(f"  {other}\n"), style="bold")
    return text


class RestoreScreen(ModalScreen[str | None]):
    """Keep mine (k), take the snapshot's (t), don't touch the files (f), or
    cancel (c, Esc): the prompt goes back to the box and nothing changed.

    As with a tool call's question, keys typed before the user pauses for
    :data:`~.modals.GRACE` seconds go on to the prompt, so typing ahead after
    Enter never overwrites a file.
    """

    DEFAULT_CSS = (
        MODAL_CSS.format(name="RestoreScreen")
        + """
    RestoreScreen #conflicts { max-height: 10; overflow-y: auto; }
    RestoreScreen .reason { color: $text-muted; }
    """
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("k", "answer('keep')", "keep mine"),
        Binding("t", "answer('take')", "take the snapshot's"),
        Binding("f", "answer('alone')", "don't touch files"),
        Binding("c,escape", "cancel", "cancel"),
    ]

    def __init__(self, conflicts: Sequence[str], others: Sequence[str], where: str = "") -> None:
        super().__init__()
        self.conflicts = list(conflicts)
        self.others = list(others)
        self.where = where
        self._quiet_from = time.monotonic() + GRACE

    def on_mount(self) -> None:
        self._quiet_from = time.monotonic() + GRACE

    def compose(self) -> ComposeResult:
        with Vertical():
            title = f"Restore the files of {self.where}?" if self.where else "Restore the files?"
            yield Static(inert_text(title), classes="title")
            yield Static(restore_question(self.conflicts, self.others), id="conflicts")
            yield Static(
                "Whatever you choose, the files as they are now are recorded first.",
                classes="reason",
            )
            keys = Text.from_markup(
                "[b]k[/b] keep mine   [b]t[/b] take the snapshot's\n"
                "[b]f[/b] don't touch files (conversation only)   [b]c[/b]/Esc cancel"
            )
            yield Static(keys, classes="keys")

    async def on_key(self, event: events.Key) -> None:
        """Keys typed before the user paused go on to the prompt below (they were
        dropped: the prompt box is no Input)."""
        if time.monotonic() >= self._quiet_from:
            return
        self._quiet_from = time.monotonic() + GRACE
        await typed_ahead(self, event)

    def action_answer(self, answer: str) -> None:
        self.dismiss(answer)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _change_line(change: Mapping[str, Any]) -> str:
    return f"  {change.get('kind', '?'):<9} {change.get('path', '?')}\n"


def diff_text(report: Mapping[str, Any], title: str) -> Text:
    """A diff report (:func:`infai.agent.diff_at`) for people: the changes, each
    text file's unified diff (coloured by line) and the binary changes, inert."""
    text = Text()
    text.append(inert(title), style="bold")
    text.append("\n")
    changes: list[Mapping[str, Any]] = list(report.get("changes") or [])
    if not changes:
        text.append("no file changed\n")
        return text
    text.append(inert(f"{len(changes)} path(s) changed:\n"))
    for change in changes:
        text.append(inert(_change_line(change)))
    budget = DIFF_LINES
    for item in report.get("text") or []:
        lines = str(item.get("diff", "")).splitlines()
        text.append("\n")
        for line in lines[:budget]:
            style = _line_style(line)
            text.append(inert(line.replace("\t", "    ")), style=style)
            text.append("\n")
        if len(lines) > budget:
            text.append(inert(f"… {len(lines) - budget} more line(s) not shown\n"), style="dim")
        budget = max(0, budget - len(lines))
    binary = list(report.get("binary") or [])
    if binary:
        text.append("\nbinary or too large to show:\n")
        for path in binary:
            text.append(inert(f"  {path}\n"), style="bold")
    return text


@dataclass
class EventDiff:
    """What the diff key shows for an event: the diff from the snapshot before
    (``report``, as :func:`infai.agent.diff_at` gives it), or the files first
    recorded on its path (``listed``)."""

    title: str
    report: Mapping[str, Any] | None = None
    listed: list[str] | None = None


def event_diff_text(shown: EventDiff) -> Text:
    """An event's diff, or its first files, for people (inert)."""
    if shown.report is not None:
        return diff_text(shown.report, shown.title)
    text = Text()
    text.append(inert(shown.title), style="bold")
    text.append("\n")
    for path in shown.listed or []:
        text.append(inert(f"  {path}\n"))
    return text


def _line_style(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    return "cyan" if line.startswith("@@") else ""


class DiffScreen(ModalScreen[None]):
    """What changed in an event's files; scrolls (arrows, PgUp/PgDn); Esc or Ctrl-D
    (the key that opened it) closes it, and so does text typed over it, which goes
    on to the prompt (:mod:`.keys`)."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="DiffScreen")
        + """
    DiffScreen > Vertical { height: 90%; }
    DiffScreen VerticalScroll { height: 1fr; }
    """
    )
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,ctrl+d", "dismiss(None)", "close")]
    TYPING_CLOSES = True

    def __init__(self, shown: EventDiff) -> None:
        super().__init__()
        self.shown = shown

    def compose(self) -> ComposeResult:
        with Vertical(), VerticalScroll(id="diff-scroll"):
            yield Static(event_diff_text(self.shown), id="diff")

    def on_mount(self) -> None:
        self.query_one("#diff-scroll").focus()


__all__ = [
    "DiffScreen",
    "EventDiff",
    "RestoreScreen",
    "diff_text",
    "event_diff_text",
    "restore_choice",
    "restore_question",
]

"""The composer's completion popup: ``/`` commands and ``@`` files.

The popup is a line list above the prompt box that never takes the focus: the
composer keeps the keys, and while the popup is shown it reads Tab, Enter, Up,
Down and Esc as the popup's (:meth:`~.prompt.PromptInput.popup_key`). What it
offers is worked out from the composer's text and cursor after every key, in
the same step as the key (never from a later message), so a burst of keys
typed faster than the screen is drawn completes exactly as slow typing does.

* ``/`` at the start of the box (no space typed yet): the app's slash commands
  (:data:`COMMANDS`, the one list F1 and the README show too) whose name
  starts with what was typed, each with its one line of help.
* ``@`` at the start of a word: the working directory's files as a snapshot
  sees them (ignore rules included, :func:`~infai.agent.working_files`),
  matched fuzzily (:func:`fuzzy`: the letters in order, a match at a word's
  start and a shorter path first).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from ..inert import inert

#: the slash commands: (name, its argument, one line of help), as offered
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("compact", "", "summarise the context now"),
    ("model", "NAME", "switch model: offline, provider:model or a configured name"),
    ("rename", "NAME", "rename this session"),
    ("search", "WORDS", "search every session"),
    ("new", "", "a new session"),
    ("sessions", "", "the sessions (type to filter)"),
    ("help", "", "the key map, the commands and the MCP servers"),
    ("quit", "", "leave infai (also /exit)"),
)
#: lines the popup shows at most
SHOWN = 8
#: a token the popup completes: ``@`` and a path typed so far, at the cursor
MENTION = re.compile(r"(?:^|(?<=\s))@(\S*)$")


@dataclass(frozen=True)
class Choice:
    """One line of the popup: what replaces the token, and what is shown."""

    insert: str
    label: str
    help: str = ""


def commands_text(width: int = 46) -> str:
    """The commands as F1 lists them: each with its help wrapped beside it."""
    column = max(len(f"/{name} {argument}") for name, argument, _ in COMMANDS) + 4
    lines = []
    for name, argument, about in COMMANDS:
        wrapped = textwrap.wrap(about, max(16, width - column))
        lines.append(f"  {f'/{name} {argument}'.rstrip():<{column - 2}}{wrapped[0]}")
        lines.extend(" " * column + more for more in wrapped[1:])
    return "\n".join(lines)


def slash_choices(text: str) -> list[Choice]:
    """The commands ``text`` (the whole box: ``/`` and a name begun) may become."""
    typed = text[1:]
    return [
        Choice(f"/{name}{' ' if argument else ''}", f"/{name} {argument}".rstrip(), about)
        for name, argument, about in COMMANDS
        if name.startswith(typed)
    ]


def is_path(text: str) -> bool:
    """Whether ``text`` starts with a path (``/etc/hosts …``) rather than a command:
    no command has a ``/`` in its name, so such a text is a prompt."""
    return re.match(r"/[^\s/]*/", text) is not None


def is_command(text: str) -> bool:
    """Whether ``text`` is a whole command name already (Enter sends it as typed)."""
    return text[1:] in {name for name, _, _ in COMMANDS} | {"exit"}


def _score(query: str, path: str) -> tuple[int, int, str] | None:
    """How well ``path`` matches ``query`` (lower is better), None: no match.
    The letters of ``query`` in order (any case); gaps cost, a letter at the start
    of a name part (after ``/``, ``.``, ``_``, ``-``) costs nothing."""
    low = path.lower()
    at, cost = 0, 0
    for letter in query.lower():
        found = low.find(letter, at)
        if found < 0:
            return None
        if found > at and low[found - 1] not in "/._- ":
            cost += found - at
        at = found + 1
    name = low.rsplit("/", 1)[-1]
    bonus = 0 if query.lower() in name else 1
    return (bonus, cost + len(path) // 8, path)


def fuzzy(query: str, paths: list[str], limit: int = SHOWN) -> list[str]:
    """The ``limit`` best paths for ``query`` (all paths, nearest first, if empty)."""
    if not query:
        return paths[:limit]
    scored = [s for s in (_score(query, path) for path in paths) if s is not None]
    scored.sort()
    return [path for _, _, path in scored[:limit]]


class Completions(Static):
    """The popup's lines; the composer says what they are and which is chosen."""

    DEFAULT_CSS = """
    Completions {
        height: auto; max-height: 8; display: none; padding: 0 1;
        background: $panel; color: $text; text-wrap: nowrap; text-overflow: ellipsis;
    }
    """
    can_focus = False

    def __init__(self) -> None:
        super().__init__(id="completions", markup=False)
        self.choices: list[Choice] = []
        self.index = 0

    def offer(self, choices: list[Choice], index: int = 0) -> None:
        """Show ``choices`` (an empty list hides the popup) with ``index`` chosen."""
        self.choices = choices[:SHOWN]
        self.index = max(0, min(index, len(self.choices) - 1))
        self.display = bool(self.choices)
        if not self.choices:
            return
        text = Text(no_wrap=True, overflow="ellipsis")  # a line each: the chosen one shows
        width = max(len(choice.label) for choice in self.choices)
        for number, choice in enumerate(self.choices):
            style = "reverse" if number == self.index else ""
            text.append(inert(choice.label.ljust(width)), style=style)
            if choice.help:
                text.append(inert(f"  {choice.help}"), style="dim")
            if number < len(self.choices) - 1:
                text.append("\n")
        self.update(text)

    def move(self, step: int) -> None:
        if self.choices:
            self.offer(self.choices, (self.index + step) % len(self.choices))

    @property
    def chosen(self) -> Choice | None:
        return self.choices[self.index] if self.display and self.choices else None

"""What an edit or a write would change, as the approval dialog shows it.

The dialog holds the change it asks about (the chat behind it is covered): the
diff's lines carry the file's own line numbers (the new file's for a kept or
added line, the old file's for a removed one), hunks apart by a ``⋯`` line,
so the question can be answered without the chat. The code keeps its syntax
colours (by the file's extension), added and removed lines tinted behind them.
"""

from __future__ import annotations

import difflib
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.text import Text

from infai.tools import Ask

from ..inert import inert

#: a file larger than this is not read to diff a write or an edit
DIFF_BYTES = 1 << 20
#: lines of context around each change
CONTEXT = 2
#: diff lines the dialog shows at most (the rest is counted)
SHOWN = 400


def current_text(base: Path, path: str) -> str | None:
    """The text of the file a call is about to change, as it is now (None: no such
    regular file, or too large to diff); relative paths are the session's.

    Only a regular file is read (never a FIFO or a device, which could block or
    never end), and only up to :data:`DIFF_BYTES`.
    """
    target = Path(path).expanduser()
    target = target if target.is_absolute() else base / target
    try:
        st = target.stat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > DIFF_BYTES:
            return None
        return target.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


#: the tools whose questions show the change they make
DIFFED = ("edit_file", "write_file")


def asked_text(ask: Ask, base: Path) -> str | None:
    """The text of the file a question about an edit or a write is about, read now
    (relative paths are ``base``'s); None for other tools or no such file. Reads
    the disk: run it in a thread."""
    path = str(ask.arguments.get("path", ""))
    return current_text(base, path) if ask.tool in DIFFED and path else None


def diff_sides(
    tool: str, arguments: Mapping[str, Any], current: str | None
) -> tuple[list[str], list[str]] | None:
    """The file's lines before and after the call (None: not an edit or a write).

    With the file's ``current`` text the sides are the whole file (an edit's
    line numbers are then the file's); without it, the arguments alone."""
    old_text, new_text = str(arguments.get("old_text", "")), str(arguments.get("new_text", ""))
    if tool == "edit_file" and current is not None and old_text and old_text in current:
        return current.splitlines(), current.replace(old_text, new_text, 1).splitlines()
    if tool == "edit_file":
        return old_text.splitlines(), new_text.splitlines()
    if tool == "write_file":
        old = current.splitlines() if current is not None else []
        return old, str(arguments.get("content", "")).splitlines()
    return None


#: the background of an added and a removed line (the code keeps its own colours)
TINTS = {"+": "on #12301a", "-": "on #3a1616"}


def highlighted(lines: list[str], path: str) -> list[Text]:
    """``lines`` (inert) with the syntax colours of the language ``path`` names (by
    its extension or first line); plain for a file of no known language. The
    side is highlighted whole, so a string or comment over lines is coloured."""
    code = inert("\n".join(lines))  # line breaks kept, every other control escaped
    from rich.syntax import Syntax  # pygments: loaded with the first diff, not at start

    lexer = Syntax.guess_lexer(path, code)
    if lexer in ("default", "text"):
        return [Text(inert(line)) for line in code.split("\n")][: len(lines)]
    shown = Syntax(inert(code), lexer, theme="ansi_dark").highlight(code)
    return list(shown.split("\n", allow_blank=True))[: len(lines)]


def numbered_diff(tool: str, arguments: Mapping[str, Any], current: str | None) -> Text:
    """The change as numbered lines (``  12 + text``), inert and syntax-highlighted
    (added and removed lines tinted); empty for another tool."""
    sides = diff_sides(tool, arguments, current)
    if sides is None:
        return Text()
    path = str(arguments.get("path", ""))
    old, new = highlighted(sides[0], path), highlighted(sides[1], path)
    rows: list[tuple[int, str, Text]] = []  # (line number, sign, text)
    groups = difflib.SequenceMatcher(None, *sides, autojunk=False).get_grouped_opcodes(CONTEXT)
    for index, group in enumerate(groups):
        if index:
            rows.append((0, "⋯", Text()))
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                rows += [(j1 + k + 1, " ", new[j1 + k]) for k in range(j2 - j1)]
                continue
            rows += [(i1 + k + 1, "-", old[i1 + k]) for k in range(i2 - i1)]
            rows += [(j1 + k + 1, "+", new[j1 + k]) for k in range(j2 - j1)]
    if not rows:
        return Text("(no change to the file's text)", style="dim")
    width = len(str(max(number for number, _, _ in rows)))
    text = Text(no_wrap=True, overflow="ellipsis")
    for number, sign, line in rows[:SHOWN]:
        style = {"+": "bold green", "-": "bold red", "⋯": "dim"}.get(sign, "")
        text.append(inert(f"{number or '':>{width}} "), style="dim")
        text.append(inert(f"{sign} "), style=f"{style} {TINTS.get(sign, '')}".strip())
        if sign in TINTS:
            line = line.copy()
            line.stylize(TINTS[sign])
        text.append_text(line)
        text.append("\n")
    if len(rows) > SHOWN:
        text.append(inert(f"… {len(rows) - SHOWN} more lines"), style="dim")
    text.rstrip()
    return text

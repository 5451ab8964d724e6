"""Everything shown to a person is inert: the one sanitizer every shell prints through.

A model's reply, a tool's output, a file's contents and a session's name are
text that someone else chose. Printed raw, a few characters in it are not text
but commands to the terminal: ``ESC ] 0 ; … BEL`` sets the window title,
``ESC ] 52 ; c ; …`` writes the clipboard, ``ESC [ 2K`` erases the line (to
hide what was printed before), a carriage return writes over a line, and the
bidi overrides (U+202E and its kin) make text read in another order than it is
stored, so ``rm -rf ~/ #…`` can look harmless. The shells therefore never
write such a character as it is; they write a visible escape for it.

What is escaped (:data:`UNSAFE`): the C0 controls except newline and tab, DEL,
the C1 controls U+0080 to U+009F (U+009B is a one-byte CSI to many terminals),
and the bidi controls: the embeddings and overrides U+202A to U+202E, the
isolates U+2066 to U+2069 and the marks U+200E, U+200F and U+061C. A CRLF line
end is an ordinary newline and becomes one; a lone CR is escaped.

The visible form is the character's Python escape: ``\\x1b`` for a code point
up to U+00FF, ``\\u202e`` above (so ``ESC ] 0 ; pwned BEL`` shows as
``\\x1b]0;pwned\\x07``). It is one line, takes no terminal cell it does not
show, and says exactly which character was there. (A text that itself
contains a backslash and ``x1b`` reads the same; both are harmless.)

- :func:`inert`: a string safe to print.
- :func:`inert_text`: a :class:`rich.text.Text` of it, for rich and textual.
  A ``Text`` is never parsed as console markup, so a reply containing
  ``[bold red]`` or ``[link=…]`` shows those characters as they are: never
  hand a model's or a tool's string to a widget as a markup string.
- :func:`inert_markup`: a string for the few textual places that read markup
  (a collapsible's title): inert, with its square brackets escaped.
- :func:`inert_json`: ``json.dumps`` (non-ASCII text kept readable) with
  every unsafe character written as a JSON ``\\uXXXX`` escape: the same
  value to a JSON parser, inert to a terminal that shows it.
- :func:`inert_json_line`: the same for a line of JSON already encoded (an
  export's lines, written to a terminal or a file alike).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.text import Text

#: the characters no shell writes as they are (see the module's docstring)
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def inert(text: str) -> str:
    """``text`` with every unsafe character replaced by its visible escape (newlines
    and tabs kept; a CRLF becomes a newline)."""
    if UNSAFE.search(text) is None:
        return text  # the common case costs one scan
    return UNSAFE.sub(_escape, text.replace("\r\n", "\n"))


def inert_text(text: str, style: str = "") -> Text:
    """A rich ``Text`` of :func:`inert` ``(text)``: never read as markup."""
    from rich.text import Text

    return Text(inert(text), style=style)


def inert_markup(text: str) -> str:
    """:func:`inert` ``(text)`` escaped for textual's markup: shown as it is where
    a widget parses its string (``[bold]`` stays ``[bold]``).

    Every ``[`` is escaped, not only those that look like a whole tag (as
    ``textual.markup.escape`` does): a preview cut short at ``[/bo`` is an
    unclosed tag to textual's parser, which raises instead of drawing it."""
    return inert(text).replace("[", "\\[")


def inert_json_line(line: bytes) -> bytes:
    """A UTF-8 line of JSON (an export's) with every unsafe character escaped as
    ``\\uXXXX``: the same values to a JSON parser. Such characters can only sit
    inside JSON strings, where the escape means the same character."""
    if line.isascii() and b"\x7f" not in line:
        return line  # JSON has escaped every C0 control: nothing else to do
    return UNSAFE.sub(_json_escape, line.decode("utf-8")).encode("utf-8")


def inert_json(value: Any, **dumps: Any) -> str:
    """``value`` as JSON (``dumps`` as for :func:`json.dumps`; non-ASCII kept),
    every unsafe character escaped as ``\\uXXXX`` (JSON escapes C0 itself)."""
    encoded = json.dumps(value, ensure_ascii=False, **dumps)
    return UNSAFE.sub(_json_escape, encoded)


__all__ = ["UNSAFE", "inert", "inert_json", "inert_json_line", "inert_markup", "inert_text"]

"""The scanner under :mod:`.commands`: a shell string read as bash reads it.

It splits a string into simple commands (words with their quoting undone,
output redirections) and hands each one, and each command string nested in it
(``$(...)``, backquotes, ``<(...)``), to a :class:`Sink`. It follows bash 5's
reading, which is the shell the ``bash`` tool runs (:mod:`.bash_path`):

- a ``#`` at the start of a word begins a comment to the end of the line, at
  any depth (``$(: #)`` does not end at that ``)``); inside a word it is a letter;
- ``${...}`` ends at its own ``}``: quotes, ``$'...'``, backslashes, nested
  ``{...}``, ``${...}``, ``$(...)`` and backquotes inside it are skipped whole.
  Shells (and bash versions) disagree there, so a quote, a backslash or a
  ``{`` inside ``${...}`` also makes the string *unseen* (rules cannot trust any
  reading of it), and so does bash 5.3's ``${ cmd; }``;
- a heredoc's body is read after the line that opens it, to its delimiter line;
  its ``$(...)`` and backquotes run unless the delimiter is quoted (a body
  where bash would join lines first, or that would start inside ``(...)``, and
  a heredoc inside ``$(...)``, after which bash 5.2 drops a ``;``, are unseen);
- ``$'...'`` is decoded as bash does (``\\xHH``, ``\\nnn``, ``\\cX``, ``\\u``; an
  unknown escape keeps its backslash; a NUL ends the string). In a string run
  by ``sh -c`` (dash on Debian, where ``$'`` is not special) it is unseen.

What it cannot follow it reports: :meth:`Sink.unsure` (the reading may be
incomplete) or :meth:`Sink.unseen` (some command it runs cannot be named).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

#: characters that end an unquoted word
WORD_END = " \t\n;&|()<>"
HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


@dataclass
class Simple:
    """One simple command as scanned: its words, which are not literal, output targets."""

    words: list[str] = field(default_factory=list)
    dynamic: list[bool] = field(default_factory=list)
    #: each word as written (a reserved word counts only unquoted: ``raw == word``)
    raw: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    #: after a ``|``: not a pipeline's start, where ``time`` is no keyword
    piped: bool = False


class Sink(Protocol):
    """Where the scanner reports what it finds (:class:`~.commands._Found`)."""

    writes: list[str]

    def unsure(self, why: str) -> None:
        """The reading may be incomplete (the first reason is kept)."""

    def unseen(self, why: str) -> None:
        """Some command the string runs cannot be named."""

    def record(self, simple: Simple, depth: int) -> None:
        """A simple command the shell starts at nesting ``depth``."""

    def script(self, text: str, depth: int, posix: bool) -> None:
        """A command string run by the shell (backquotes): scan it as a whole."""


class Scanner:
    """Words, quotes, operators, substitutions (recursively), comments.

    ``posix``: the text is run by ``sh``, not bash (``$'...'`` is unseen there)."""

    def __init__(self, text: str, sink: Sink, depth: int, posix: bool = False) -> None:
        self.text, self.sink, self.depth, self.posix, self.pos = text, sink, depth, posix, 0
        #: expansions open inside one another in this scanner (``${a-${b-...}}``)
        self.levels = 0
        #: inside $(...) or <(...), where bash 5.2 reads what follows a heredoc oddly
        self.substitution = False
        #: heredocs whose bodies start after the next newline: (delimiter, <<-, quoted)
        self.heredocs: list[tuple[str, bool, bool]] = []

    def peek(self, ahead: int = 0) -> str:
        """The character ``ahead`` of the position ("\\0" past the end, which no test matches)."""
        at = self.pos + ahead
        return self.text[at] if at < len(self.text) else "\0"

    def commands(self, closer: str) -> list[Simple]:
        """Simple commands until ``closer`` (consumed) or the end of the text."""
        done: list[Simple] = []
        current = Simple()
        while self.pos < len(self.text):
            char = self.peek()
            if char == closer:
                self.pos += 1
                break
            if char in " \t":
                self.pos += 1
            elif char == "\\" and self.peek(1) == "\n":
                self.pos += 2
            elif char == "#":  # between words: a comment, to the end of the line
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            elif char in ";&|\n":
                done.append(current)
                current = self._separator(char)
            elif char == "(" and not current.words:
                if self.peek(1) == "(":  # ((...)): arithmetic, see expansion()
                    self.sink.unseen("arithmetic ((...)) is not followed")
                self.pos += 1
                self.nested(")")
            elif char == "(" or char == ")":
                if char == "(" and self.peek(1) == ")":  # a function definition: name ()
                    self.pos += 2
                    done.append(current)
                    current = Simple()
                    continue
                self.sink.unsure(f"an unexpected {char!r} at offset {self.pos}")
                self.pos += 1
            elif char in "<>" and self.peek(1) == "(":
                self.pos += 2
                self.nested(")", substitution=True)
                current.words.append("<(...)")
                current.dynamic.append(True)
                current.raw.append("<(...)")
            elif char in "<>":
                self._redirect(current)
            else:
                self.word(current)
        else:
            if closer:
                self.sink.unsure(f"a {closer!r} is missing at the end")
        if self.heredocs and closer:
            self.sink.unseen("a heredoc whose body would start inside (...)")
        done.append(current)
        return [simple for simple in done if simple.words]

    def _separator(self, char: str) -> Simple:
        """Past ``;``, ``&``, ``|``, ``||``, ``|&`` or a newline (and the bodies of the
        heredocs its line opened): the next simple command, empty."""
        piped = char == "|" and self.peek(1) != "|"
        self.pos += 2 if char == "|" and self.peek(1) in "|&" else 1
        if char == "\n" and self.heredocs:
            self._heredoc_bodies()
        return Simple(piped=piped)

    def nested(self, closer: str, substitution: bool = False) -> None:
        """The commands of ``(...)``, ``$(...)`` or ``<(...)`` (past its opener)."""
        if self.heredocs:  # a newline in it: where does the heredoc's body start?
            self.sink.unseen("a heredoc and a (...) on one line are not followed")
        if self.depth + self.levels >= MAX_SCAN_DEPTH:  # the rest is not followed
            self.sink.unseen(f"nested more than {MAX_SCAN_DEPTH} levels deep")
            self.pos = len(self.text)
            return
        inner = Scanner(self.text, self.sink, self.depth + 1, self.posix)
        inner.pos, inner.levels = self.pos, self.levels
        inner.substitution = self.substitution or substitution
        for simple in inner.commands(closer):
            self.sink.record(simple, self.depth + 1)
        self.pos = inner.pos

    def _redirect(self, current: Simple) -> None:
        start = self.pos
        while self.peek() in "<>&|":
            self.pos += 1
        operator = self.text[start : self.pos]
        heredoc = operator == "<<"
        if heredoc and self.peek() == "-":
            operator += "-"
            self.pos += 1
        while self.peek() in " \t":
            self.pos += 1
        if self.peek() == "#" or self.peek() in WORD_END or self.pos >= len(self.text):
            self.sink.unsure(f"a redirection without a target at offset {start}")
            return
        target = Simple()
        self.word(target)
        name = target.words[0] if target.words else ""
        if heredoc and target.raw:
            if self.substitution:  # $(cat <<X ... X; a;b): bash 5.2 runs "a b"
                self.sink.unseen(
                    "a heredoc inside $(...) (bash versions read what follows it differently)"
                )
            quoted = any(c in target.raw[0] for c in "'\"\\")
            self.heredocs.append((name, operator == "<<-", quoted))
            return
        if operator.startswith("<<") and operator != "<<<":
            self.sink.unseen("a heredoc not followed")  # <<& and the like
        duplicated = operator.endswith("&") and name.isdigit()  # 2>&1: no file
        writes = ">" in operator and not (duplicated or name == "-")
        if writes and name not in HARMLESS_TARGETS:
            current.writes.append(name or "?")
            self.sink.writes.append(name or "?")

    def _heredoc_bodies(self) -> None:
        """The bodies of the heredocs the last line opened (at the line after it), each
        to its delimiter line; an unquoted one's substitutions run, as in double quotes."""
        for delimiter, strip, quoted in self.heredocs:
            lines = []
            while self.pos < len(self.text):
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end < 0 else end
                line = self.text[self.pos : end]
                self.pos = end + 1
                if (line.lstrip("\t") if strip else line) == delimiter:
                    break
                lines.append(line)
            if quoted:
                continue
            if any(line.endswith("\\") for line in lines):  # bash joins the next line first
                self.sink.unseen("a backslash-newline in a heredoc's body is not followed")
            body = Scanner("\n".join(lines), self.sink, self.depth, self.posix)
            body.levels = self.levels
            while body.pos < len(body.text):
                char = body.peek()
                if char in "$`":
                    body.expansion(quoted=True)
                else:
                    body.pos += 2 if char == "\\" else 1
        self.heredocs = []
        self.pos = min(self.pos, len(self.text))

    def word(self, current: Simple) -> None:
        """One word: quotes removed, substitutions recorded; an fd number before < or > skipped."""
        start = self.pos
        parts: list[str] = []
        bare: list[str] = []  # the characters outside quotes (globs and braces act there)
        dynamic = False
        while self.pos < len(self.text):
            char = self.peek()
            if char in WORD_END:
                break
            self.pos += 1
            if char == "\\":
                if self.pos < len(self.text) and self.peek() != "\n":  # else a line continuation
                    parts.append(self.peek())
                self.pos += 1
            elif char == "'":
                end = self.text.find("'", self.pos)
                if end < 0:
                    self.sink.unsure("a ' is not closed")
                    end = len(self.text)
                parts.append(self.text[self.pos : end])
                self.pos = end + 1
            elif char == '"':
                dynamic |= self._double_quoted(parts)
            elif char == "$" and self.peek() == "'":
                if self.posix:
                    self.sink.unseen("$'...' in a string sh runs (dash reads it differently)")
                text, exact = self.ansi_c()
                parts.append(text)
                dynamic |= not exact
            elif char == "$" and self.peek() == '"':
                pass  # $"...": a translated string, read as "..." next
            elif char == "$" or char == "`":
                self.pos -= 1
                parts.append(self.expansion(quoted=False))
                dynamic = True
            else:
                parts.append(char)
                bare.append(char)
        word = "".join(parts)
        unquoted = "".join(bare)
        braces = "{" in unquoted and re.search(r",|\.\.", unquoted) is not None
        raw = self.text[start : self.pos]
        if braces or any(c in unquoted for c in "*?[") or raw.startswith("~"):
            dynamic = True  # a glob, a brace expansion, ~: the words are known only when run
        if raw.isdigit() and self.peek() in "<>":
            return  # a file descriptor number (2>...): part of the redirection
        if self.pos > start:
            current.words.append(word)
            current.dynamic.append(dynamic)
            current.raw.append(raw)

    def ansi_c(self) -> tuple[str, bool]:
        """``$'...'`` (at its quote), decoded as bash does; and whether the result is
        exact (a byte past ASCII is not: bash keeps it as a byte, not a character)."""
        self.pos += 1
        raw: list[str] = []
        while self.pos < len(self.text) and self.peek() != "'":
            if self.peek() == "\\":
                raw.append(self.peek())
                self.pos += 1
            raw.append(self.peek())
            self.pos += 1
        if self.pos >= len(self.text):
            self.sink.unsure("a $' is not closed")
        self.pos += 1
        decoded = ANSI_C.sub(_unescape, "".join(raw)).partition("\0")[0]  # NUL ends it
        return decoded, decoded.isascii()

    def _double_quoted(self, parts: list[str]) -> bool:
        dynamic = False
        while self.pos < len(self.text):
            char = self.peek()
            if char == '"':
                self.pos += 1
                return dynamic
            if char == "\\" and self.peek(1) in '$`"\\\n':
                if self.peek(1) != "\n":
                    parts.append(self.peek(1))
                self.pos += 2
            elif char in "$`":
                parts.append(self.expansion(quoted=True))
                dynamic = True
            else:
                parts.append(char)
                self.pos += 1
        self.sink.unsure('a " is not closed')
        return dynamic

    def expansion(self, quoted: bool) -> str:
        """``$(...)``, backquotes, ``${...}``, ``$((...))`` or ``$name`` at pos (inside
        double quotes if ``quoted``); the commands inside are recorded, the word gets
        the text as written."""
        start = self.pos
        if self.depth + self.levels >= MAX_SCAN_DEPTH:  # ${ in ${ in ...: not followed
            self.sink.unseen(f"nested more than {MAX_SCAN_DEPTH} levels deep")
            self.pos = len(self.text)
            return self.text[start:]
        self.levels += 1
        try:
            self._expansion(start, quoted)
        finally:
            self.levels -= 1
        return self.text[start : self.pos]

    def _expansion(self, start: int, quoted: bool) -> None:
        if self.peek() == "`":
            self._backquoted(quoted)
        elif self.peek(1) == "(" and self.peek(2) == "(":
            # arithmetic evaluates the values of the variables it names, and a value
            # like a[$(cmd)] runs cmd: what it runs is known only when it runs
            self.sink.unseen("arithmetic $((...)) is not followed")
            self.pos += 2
            self.nested(")")
        elif self.peek(1) == "(":
            self.pos += 2
            self.nested(")", substitution=True)
        elif self.peek(1) == "{":
            self.pos += 2
            self._braced()
        else:
            self.pos += 1
            while self.peek().isascii() and (self.peek().isalnum() or self.peek() == "_"):
                self.pos += 1
            if self.pos == start + 1 and self.peek() in "?#@*$!-0123456789":
                self.pos += 1

    def _backquoted(self, quoted: bool) -> None:
        """A backquoted command (at its quote): a backslash before `` ` ``, ``$``, ``\\``
        (and ``"`` inside double quotes) is removed before the body is run."""
        self.pos += 1
        escapable = '`$\\"' if quoted else "`$\\"
        body: list[str] = []
        while self.pos < len(self.text) and self.peek() != "`":
            if self.peek() == "\\" and self.peek(1) in escapable:
                self.pos += 1
            body.append(self.peek())
            self.pos += 1
        if self.pos >= len(self.text):
            self.sink.unsure("a ` is not closed")
        self.pos += 1
        self.sink.script("".join(body), self.depth + 1, self.posix)

    def _braced(self) -> None:
        """The rest of ``${...}`` (past ``${``), to its own ``}``, as bash 5 finds it."""
        if self.peek() in " \t\n|":
            self.sink.unseen("${ ...; } runs commands in bash 5.3 and is not followed")
        name = re.match(r"[#!]?([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])?", self.text[self.pos :])
        after = self.pos + (name.end() if name else 0)
        if self.text[after : after + 1] == "[" or (
            self.text[after : after + 1] == ":" and self.text[after + 1 : after + 2] not in "-=?+"
        ):  # a subscript or an offset is arithmetic, which runs a[$(cmd)] found in a value
            self.sink.unseen("arithmetic in ${...} (a subscript or an offset) is not followed")
        braces = 1
        while self.pos < len(self.text):
            char = self.peek()
            if char == "}":
                braces -= 1
                self.pos += 1
                if not braces:
                    return
            elif char == "{":
                self.sink.unseen("a { inside ${...} (shells differ on where it ends)")
                braces += 1
                self.pos += 1
            elif char in "'\"\\":
                self.sink.unseen("quoting inside ${...} (shells differ on where it ends)")
                self._skip_quoted(char)
            elif char == "$" and self.peek(1) == "'":
                self.sink.unseen("quoting inside ${...} (shells differ on where it ends)")
                self.pos += 1
                self.ansi_c()
            elif char in "$`":
                self.expansion(quoted=False)
            else:
                self.pos += 1
        self.sink.unsure("a ${ is not closed")

    def _skip_quoted(self, char: str) -> None:
        """A backslash and its character, or a quoted span (at its quote)."""
        if char == "\\":
            self.pos += 2
        elif char == "'":
            end = self.text.find("'", self.pos + 1)
            self.pos = len(self.text) if end < 0 else end + 1
        else:
            self.pos += 1
            self._double_quoted([])


#: nesting deeper than this is not followed (and makes the command unseen)
MAX_SCAN_DEPTH = 12

ANSI_C = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c\\\\|c.|.)", re.S
)
SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n",
                  "r": "\r", "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"',
                  "?": "?"}  # fmt: skip


def _unescape(match: re.Match[str]) -> str:
    """One backslash escape of ``$'...'`` as bash decodes it (an unknown one stays)."""
    code = match.group(1)
    if code[0] in "xuU" and len(code) > 1:
        value = int(code[1:], 16)
        return chr(min(value, 0x10FFFF))
    if code[0] in "01234567":
        return chr(int(code, 8) & 0xFF)
    if code[0] == "c" and len(code) >= 2:
        return "\x7f" if code[1] == "?" else chr(ord(code[1].upper()) & 0x1F)
    return SIMPLE_ESCAPES.get(code, "\\" + code)

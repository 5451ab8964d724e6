"""What a shell command runs: every simple command in it, normalised for rules.

A ``bash`` call is one string, but the shell may run many programs from it:
parts chained with ``;``, ``&&``, ``||``, ``|``, ``&`` or a newline; commands
substituted with ``$(...)``, backquotes or ``<(...)`` (also inside double
quotes); subshells and ``{ ...; }`` groups; and programs started by other
programs: ``env X=1 cmd``, ``command cmd``, ``exec``, ``nohup``, ``nice``,
``timeout``, ``sudo``, ``xargs cmd``, ``find ... -exec cmd ;``, ``sh -c '...'``,
``eval ...``. :func:`analyse` finds each of them and gives it in two shapes:

- ``written``: the command as the person reads it (quotes removed, the program
  named by its basename when it is given as a path into a system directory such
  as ``/bin/rm``; ``./rm`` stays ``./rm``, since a local file is another
  program). Allow rules see this shape, and only of the commands the shell
  itself starts (not those a wrapper starts: ``allow bash env*`` is the rule
  that covers ``env X=1 rm``).
- ``forms``: what deny and ask rules see: the program's basename, with its
  short flags merged into one cluster (``-fr``, ``-r -f`` and, for the programs
  with a table in :mod:`.command_forms`, ``--recursive --force`` and their unique prefixes
  ``--rec``) in every order (so ``rm -rf*`` matches ``rm -v -f -r x``; past
  :data:`~.command_forms.MAX_PERMUTED` flags, every two of them first), before
  or after a subcommand word (``git push -f``). A wrapper adds the command it
  starts as one more command; ``find ... -delete`` adds ``rm -rf`` of find's
  starting points, ``xargs`` adds its command (``echo`` when none is given).

Quoting is undone as the shell undoes it (``r''m``, ``"rm"``, ``\\rm`` and
``$'\\x72m'`` are all ``rm``). Where a command cannot be named before it runs
(a program given as ``$VAR``, a glob, a brace expansion or a substitution; the
string of ``sh -c "$X"`` or ``eval "$(...)"``; nesting deeper than
:data:`MAX_DEPTH`) ``hidden`` says so: deny rules cannot see such a command, and
the policy asks about it wherever deny or ask rules for ``bash`` exist.

Why a scanner of our own and not a library: ``shlex`` (even with
``punctuation_chars``) does not see ``$(...)`` inside double quotes, backquotes
or nesting, and the one full bash parser for Python, ``bashlex``, is GPL-3
licensed (infai is MIT) and unreleased since 2023. The scanner below follows
the POSIX quoting rules and errs one way only: whatever it cannot follow
(a heredoc, whose body is scanned as commands too, ``case``, arithmetic, an
unbalanced quote, and everything ``hidden``) sets ``unclear``, and an unclear
command is never allowed by a rule that names only parts of it. What it
cannot tell at all: what a script, a Makefile, an alias, a function defined
earlier, a variable's value or a program's own options do
(``git diff --output=f``, ``sed -i``, ``tar --to-command``), code given to an
interpreter (``python -c``, ``perl -e``), and what a wrapper not listed in
:data:`WRAPPERS` starts (``strace cmd``: ``strace`` is the program rules see).
The sandbox confines those, and "allow always" offers such programs exactly only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .command_forms import forms_of

#: deeper nesting than this is not followed (and makes the command unclear)
MAX_DEPTH = 12
#: normalised forms made for one command string at most; past it, ``overflow``
FORM_BUDGET = 50_000
SYSTEM_DIRS = frozenset({
    "/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin",
})  # fmt: skip
#: shells whose ``-c`` argument is a command string
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"})
#: wrappers: the program's options that take a value, and how many words follow
#: the options before the command (``timeout 5 cmd``: one)
WRAPPERS: dict[str, tuple[str, int]] = {
    "command": ("", 0), "builtin": ("", 0), "exec": ("a", 0), "nohup": ("", 0),
    "nice": ("n", 0), "timeout": ("sk", 1), "stdbuf": ("ioe", 0), "setsid": ("", 0),
    "sudo": ("CDghpRrtTUu", 0), "doas": ("Cu", 0), "time": ("fo", 0), "ionice": ("cnp", 0),
    "chrt": ("", 1), "taskset": ("", 1), "unbuffer": ("", 0), "env": ("uCS", 0),
    "xargs": ("adEeIiLlnPs", 0), "busybox": ("", 0), "toybox": ("", 0), "chroot": ("", 1),
}  # fmt: skip
NAME_IS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


@dataclass(frozen=True, slots=True)
class Command:
    """One program the command runs, in the shapes rules see (module docstring)."""

    written: str
    forms: tuple[str, ...]
    #: started by another command of the same string (a wrapper, ``-exec``, ``sh -c``)
    wrapped: bool = False
    #: the program's basename ("" for a bare assignment like ``X=1``)
    program: str = ""


@dataclass(frozen=True, slots=True)
class Analysis:
    """Every command a shell string runs, the files it redirects output to, and
    why the analysis may be incomplete ("" when it is not)."""

    commands: tuple[Command, ...]
    writes: tuple[str, ...] = ()
    unclear: str = ""
    #: so many parts that not all were normalised (:data:`FORM_BUDGET`): rules cannot check it
    overflow: bool = False
    #: why some command it runs is not among ``commands`` at all ("" when none is): a
    #: program or command string known only when it runs, nesting too deep
    hidden: str = ""

    @property
    def simple(self) -> bool:
        """One command the shell starts itself, no output redirected to a file, fully understood."""
        return len(self.started) == 1 and not self.writes and not self.unclear

    @property
    def started(self) -> tuple[Command, ...]:
        """The commands the shell itself starts (what allow rules must cover)."""
        return tuple(c for c in self.commands if not c.wrapped)


def analyse(command: str) -> Analysis:
    """Every command in ``command`` (see the module docstring); never raises."""
    found = _Found()
    _script(command, found, depth=0, wrapped=False)
    return Analysis(
        tuple(found.commands), tuple(found.writes), found.unclear, found.overflow, found.hidden
    )


@dataclass
class _Found:
    commands: list[Command] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    unclear: str = ""
    forms: int = 0
    overflow: bool = False
    hidden: str = ""

    def unsure(self, why: str) -> None:
        self.unclear = self.unclear or why

    def unseen(self, why: str) -> None:
        """Some command it runs cannot be named here (so it is unclear too)."""
        self.unsure(why)
        self.hidden = self.hidden or why


@dataclass
class _Simple:
    """One simple command as scanned: its words, which are not literal, output targets."""

    words: list[str] = field(default_factory=list)
    dynamic: list[bool] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)


def _script(text: str, found: _Found, depth: int, wrapped: bool) -> None:
    """Scan ``text`` as a whole script and record what it runs."""
    if depth > MAX_DEPTH:
        found.unseen(f"nested more than {MAX_DEPTH} levels deep")
        return
    scanner = _Scanner(text, found, depth)
    for simple in scanner.commands(closer=""):
        _record(simple, found, depth, wrapped)
    if scanner.pos < len(text):
        found.unsure(f"an unexpected {text[scanner.pos]!r} at offset {scanner.pos}")


class _Scanner:
    """POSIX shell scanning: words, quotes, operators, substitutions (recursively)."""

    def __init__(self, text: str, found: _Found, depth: int) -> None:
        self.text, self.found, self.depth, self.pos = text, found, depth, 0

    def peek(self, ahead: int = 0) -> str:
        """The character ``ahead`` of the position ("\\0" past the end, which no test matches)."""
        at = self.pos + ahead
        return self.text[at] if at < len(self.text) else "\0"

    def commands(self, closer: str) -> list[_Simple]:
        """Simple commands until ``closer`` (consumed) or the end of the text."""
        done: list[_Simple] = []
        current = _Simple()
        while self.pos < len(self.text):
            char = self.peek()
            if char == closer:
                self.pos += 1
                break
            if char in " \t":
                self.pos += 1
            elif char == "\\" and self.peek(1) == "\n":
                self.pos += 2
            elif char == "#" and not current.words:
                while self.pos < len(self.text) and self.peek() != "\n":
                    self.pos += 1
            elif char in ";&|\n":
                self.pos += 1
                done.append(current)
                current = _Simple()
            elif char == "(" and not current.words:
                self.pos += 1
                self._nested(")")
            elif char == "(" or char == ")":
                if char == "(" and self.peek(1) == ")":  # a function definition: name ()
                    self.pos += 2
                    done.append(current)
                    current = _Simple()
                    continue
                self.found.unsure(f"an unexpected {char!r} at offset {self.pos}")
                self.pos += 1
            elif char in "<>" and self.peek(1) == "(":
                self.pos += 2
                self._nested(")")
                current.words.append("<(...)")
                current.dynamic.append(True)
            elif char in "<>":
                self._redirect(current)
            else:
                self._word(current)
        else:
            if closer:
                self.found.unsure(f"a {closer!r} is missing at the end")
        done.append(current)
        return [simple for simple in done if simple.words]

    def _nested(self, closer: str) -> None:
        if self.depth >= MAX_DEPTH:  # the rest is not followed (deny rules still see the text)
            self.found.unseen(f"nested more than {MAX_DEPTH} levels deep")
            self.pos = len(self.text)
            return
        inner = _Scanner(self.text, self.found, self.depth + 1)
        inner.pos = self.pos
        for simple in inner.commands(closer):
            _record(simple, self.found, self.depth + 1, wrapped=False)
        self.pos = inner.pos

    def _redirect(self, current: _Simple) -> None:
        start = self.pos
        while self.peek() in "<>&|":
            self.pos += 1
        operator = self.text[start : self.pos]
        if operator.startswith("<<") and operator != "<<<":
            self.found.unsure("a heredoc (<<) is not followed")
        while self.peek() in " \t":
            self.pos += 1
        target = _Simple()
        self._word(target)
        name = target.words[0] if target.words else ""
        duplicated = operator.endswith("&") and name.isdigit()  # 2>&1: no file
        writes = ">" in operator and not (duplicated or name == "-")
        if writes and name not in HARMLESS_TARGETS:
            current.writes.append(name or "?")
            self.found.writes.append(name or "?")

    def _word(self, current: _Simple) -> None:
        """One word: quotes removed, substitutions recorded; an fd number before < or > skipped."""
        start = self.pos
        parts: list[str] = []
        bare: list[str] = []  # the characters outside quotes (globs and braces act there)
        dynamic = False
        while self.pos < len(self.text):
            char = self.peek()
            if char in " \t\n;&|()<>":
                break
            self.pos += 1
            if char == "\\":
                if self.pos < len(self.text) and self.peek() != "\n":  # else a line continuation
                    parts.append(self.peek())
                self.pos += 1
            elif char == "'":
                end = self.text.find("'", self.pos)
                if end < 0:
                    self.found.unsure("a ' is not closed")
                    end = len(self.text)
                parts.append(self.text[self.pos : end])
                self.pos = end + 1
            elif char == '"':
                dynamic |= self._double_quoted(parts)
            elif char == "$" and self.peek() in "'\"":
                if self.peek() == "'":
                    parts.append(self._ansi_c())
                # else $"...": a translated string, read as "..." next
            elif char == "$" or char == "`":
                self.pos -= 1
                parts.append(self._expansion())
                dynamic = True
            else:
                parts.append(char)
                bare.append(char)
        word = "".join(parts)
        unquoted = "".join(bare)
        braces = "{" in unquoted and re.search(r",|\.\.", unquoted) is not None
        if braces or any(c in unquoted for c in "*?["):
            dynamic = True  # a glob or a brace expansion: the words are known only when run
        if self.text[start : self.pos].isdigit() and self.peek() in "<>":
            return  # a file descriptor number (2>...): part of the redirection
        if self.pos > start:
            current.words.append(word)
            current.dynamic.append(dynamic)

    def _ansi_c(self) -> str:
        """``$'...'`` (at its quote): backslash escapes decoded, as bash does."""
        self.pos += 1
        raw: list[str] = []
        while self.pos < len(self.text) and self.peek() != "'":
            if self.peek() == "\\":
                raw.append(self.peek())
                self.pos += 1
            raw.append(self.peek())
            self.pos += 1
        if self.pos >= len(self.text):
            self.found.unsure("a $' is not closed")
        self.pos += 1
        return ANSI_C.sub(_unescape, "".join(raw))

    def _double_quoted(self, parts: list[str]) -> bool:
        dynamic = False
        while self.pos < len(self.text):
            char = self.peek()
            if char == '"':
                self.pos += 1
                return dynamic
            if char == "\\" and self.peek(1) in '$`"\\\n':
                parts.append(self.peek(1))
                self.pos += 2
            elif char in "$`":
                parts.append(self._expansion())
                dynamic = True
            else:
                parts.append(char)
                self.pos += 1
        self.found.unsure('a " is not closed')
        return dynamic

    def _expansion(self) -> str:
        """``$(...)``, backquotes, ``${...}``, ``$((...))`` or ``$name`` at pos; the
        commands inside are recorded, the word gets the text as written."""
        start = self.pos
        if self.peek() == "`":
            self.pos += 1
            body: list[str] = []
            while self.pos < len(self.text) and self.peek() != "`":
                if self.peek() == "\\" and self.peek(1) in "`$\\":
                    self.pos += 1
                body.append(self.peek())
                self.pos += 1
            if self.pos >= len(self.text):
                self.found.unsure("a ` is not closed")
            self.pos += 1
            _script("".join(body), self.found, self.depth + 1, wrapped=False)
        elif self.peek(1) == "(" and self.peek(2) == "(":
            self.found.unsure("arithmetic $((...)) is not followed")
            self.pos += 2
            self._nested(")")
        elif self.peek(1) == "(":
            self.pos += 2
            self._nested(")")
        elif self.peek(1) == "{":
            self.pos += 2
            while self.pos < len(self.text) and self.peek() != "}":
                if self.peek() == "`" or self.text.startswith("$(", self.pos):
                    self._expansion()
                else:
                    self.pos += 1
            if self.pos >= len(self.text):
                self.found.unsure("a ${ is not closed")
            self.pos += 1
        else:
            self.pos += 1
            while self.peek() and (self.peek().isalnum() or self.peek() == "_"):
                self.pos += 1
            if self.pos == start + 1 and self.peek() in "?#@*$!-0123456789":
                self.pos += 1
        return self.text[start : self.pos]


ANSI_C = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S
)
SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n",
                  "r": "\r", "t": "\t", "v": "\v"}  # fmt: skip


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "xuU" and len(code) > 1:
        return chr(min(int(code[1:], 16), 0x10FFFF))
    if code[0] in "01234567":
        return chr(int(code, 8) & 0xFF)
    if code[0] == "c" and len(code) == 2:
        return chr(ord(code[1]) & 0x1F)
    return SIMPLE_ESCAPES.get(code, code)


# -- from scanned words to commands ------------------------------------------------

KEYWORDS = frozenset({"!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done",
                      "while", "until", "time", "[[", "]]", "coproc"})  # fmt: skip


def _record(simple: _Simple, found: _Found, depth: int, wrapped: bool) -> None:
    words, dynamic = list(simple.words), list(simple.dynamic)
    while words and words[0] in KEYWORDS and not dynamic[0]:
        words.pop(0)
        dynamic.pop(0)
    if not words or words[0] in ("fi", "done", "esac"):
        return
    if words[0] in ("for", "select", "function"):
        return  # a loop header or a function's name: the commands come as their own parts
    if words[0] == "case":
        found.unsure("case is not followed")
        return
    assignments = 0
    while assignments < len(words) and NAME_IS.match(words[assignments]):
        assignments += 1
    _command(words[assignments:], dynamic[assignments:], words[:assignments], found, depth, wrapped)


def _command(
    words: list[str],
    dynamic: list[bool],
    assignments: list[str],
    found: _Found,
    depth: int,
    wrapped: bool,
) -> None:
    """Record one command (and, for a wrapper, the command it starts)."""
    if not words:
        text = " ".join(assignments)
        found.commands.append(Command(text, (text,), wrapped))
        return
    given = words[0]
    if dynamic[0]:
        found.unseen(f"the program {given!r} is known only when the command runs")
    program = os.path.basename(given) if "/" in given else given
    shown = program if "/" not in given or os.path.dirname(given) in SYSTEM_DIRS else given
    args = words[1:]
    written = " ".join([*assignments, shown, *args])
    forms: tuple[str, ...] = (written, " ".join([given, *args]))
    if found.forms < FORM_BUDGET:
        forms += tuple(forms_of(program, args))
    else:
        found.overflow = True
        found.unseen("too many parts to follow")
    found.forms += len(forms)
    found.commands.append(Command(written, tuple(dict.fromkeys(forms)), wrapped, program))
    if depth > MAX_DEPTH:
        found.unseen(f"nested more than {MAX_DEPTH} levels deep")
        return
    _started(program, args, dynamic[1:], found, depth)


def _started(program: str, args: list[str], dynamic: list[bool], found: _Found, depth: int) -> None:
    """What ``program`` itself starts: a wrapped command, a shell string, find's actions."""
    if program in SHELLS or program == "su":
        at = _shell_string(args)
        if at is not None and (at >= len(args) or dynamic[at]):
            found.unseen(f"the command string of {program} -c is known only when it runs")
        elif at is not None:
            _script(args[at], found, depth + 1, wrapped=True)
    elif program in ("eval", "watch"):
        rest = args if program == "eval" else _after_options(args, "nd", 0)
        if any(dynamic[len(args) - len(rest) :]):
            found.unseen(f"what {program} runs is known only when it runs")
        _script(" ".join(rest), found, depth + 1, wrapped=True)
    elif program == "find":
        _find(args, found, depth)
    elif program in WRAPPERS:
        takes, skip = WRAPPERS[program]
        if program == "env":
            args = _env_split(args, found, depth)
        rest = _after_options(args, takes, skip)
        while program == "env" and rest and NAME_IS.match(rest[0]):
            rest = rest[1:]
        if not rest and program == "xargs":
            rest = ["echo"]
        if rest:
            at = len(args) - len(rest)
            flags = (dynamic[at:] + [False] * len(rest))[: len(rest)]
            _command(rest, flags, [], found, depth + 1, wrapped=True)


def _shell_string(args: list[str]) -> int | None:
    """Where the command string of ``sh -c 'string'`` is (also ``-ec``, ``-lc``,
    ``su -c``): its index, ``len(args)`` if missing, None without ``-c``."""
    for at, arg in enumerate(args):
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            later = (i for i in range(at + 1, len(args)) if not args[i].startswith("-"))
            return next(later, len(args))
    return None


def _env_split(args: list[str], found: _Found, depth: int) -> list[str]:
    """``env -S 'cmd args'`` (``--split-string``) runs the string's words."""
    for at, arg in enumerate(args):
        value = None
        if arg in ("-S", "--split-string") and at + 1 < len(args):
            value = args[at + 1]
        elif arg.startswith(("--split-string=", "-S")) and len(arg) > 2:
            value = arg.partition("=")[2] if arg.startswith("--") else arg[2:]
        if value is not None:
            _script(value, found, depth + 1, wrapped=True)
            return []
    return args


def _after_options(args: list[str], takes_value: str, skip: int) -> list[str]:
    """The words after a wrapper's options (and ``skip`` more words, like a duration)."""
    at = 0
    while at < len(args):
        arg = args[at]
        if arg == "--":
            at += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        if not arg.startswith("--") and arg[-1] in takes_value and len(arg) == 2:
            at += 1  # the value follows as its own word
        elif arg.startswith("--") and "=" not in arg and arg[2:] in LONG_VALUED:
            at += 1
        at += 1
    return args[at + skip :]


#: long wrapper options that take their value as the next word
LONG_VALUED = frozenset({"user", "group", "signal", "kill-after", "unset", "chdir", "adjustment",
                         "arg-file", "delimiter", "max-args", "max-procs", "replace"})  # fmt: skip


def _find(args: list[str], found: _Found, depth: int) -> None:
    """``-exec``/``-execdir``/``-ok``/``-okdir`` run a command; ``-delete`` is ``rm -rf``."""
    starts = []
    for arg in args:
        if arg.startswith("-") or arg in ("(", "!"):
            break
        starts.append(arg)
    at = 0
    while at < len(args):
        if args[at] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = at + 1
            while end < len(args) and args[end] not in (";", "+"):
                end += 1
            inner = args[at + 1 : end]
            if inner:
                _command(inner, [False] * len(inner), [], found, depth + 1, wrapped=True)
            at = end
        elif args[at] == "-delete":
            deleted = ["rm", "-rf", *(starts or ["."])]
            _command(deleted, [False] * len(deleted), [], found, depth + 1, wrapped=True)
        at += 1

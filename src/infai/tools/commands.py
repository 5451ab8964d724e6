"""What a shell command runs: every simple command in it, normalised for rules.

A ``bash`` call is one string, run by bash itself (:mod:`.bash_path`), and the
shell may run many programs from it: parts chained with ``;``, ``&&``, ``||``,
``|``, ``&`` or a newline; commands substituted with ``$(...)``, backquotes or
``<(...)`` (also inside double quotes); subshells and ``{ ...; }`` groups; and
programs started by other programs: ``env X=1 cmd``, ``timeout 5 cmd``,
``sudo cmd``, ``xargs cmd``, ``find ... -exec cmd ;``, ``sh -c '...'``,
``eval ...``, ``trap '...' EXIT`` (:mod:`.command_wrappers` lists them and
reads each one's options). :func:`analyse` finds each of them and gives it in
two shapes:

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
  starting points, ``xargs`` adds its command with the words it reads as one
  more argument, :data:`XARGS_INPUT` (``echo`` when none is given).

The string is scanned as bash reads it (:mod:`.command_scan`: comments, quotes,
``${...}``, ``$'...'``). Where a command cannot be named before it runs (a
program given as ``$VAR``, a glob, a brace expansion or a substitution; the
string of ``sh -c "$X"`` or ``eval "$(...)"``; arithmetic, which can
run ``a[$(cmd)]`` found in a variable; a shell reading its input; a wrapper
option not known; a runner not followed; a reading shells differ on; nesting
deeper than :data:`MAX_DEPTH`) ``hidden`` says so: deny rules cannot see such a
command, and the policy asks about it wherever deny or ask rules for ``bash``
exist. Whatever else it cannot follow (``case``, an unbalanced quote) sets
``unclear``, and an unclear command is never allowed by a rule that names only
parts of it.

Why a scanner of our own and not a library: ``shlex`` (even with
``punctuation_chars``) does not see ``$(...)`` inside double quotes, backquotes
or nesting, and the one full bash parser for Python, ``bashlex``, is GPL-3
licensed (infai is MIT) and unreleased since 2023. The scanner is tested
against bash itself (``tests/tools/test_checker_differential.py``). What it
cannot tell at all: what a script, a Makefile, a function defined earlier, a
variable's value or a program's own options do (``git diff --output=f``,
``sed -i``, ``tar --to-command``), and code given to an interpreter
(``python -c``, ``perl -e``). The sandbox confines those, and "allow always"
offers such programs exactly only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .command_forms import forms_of
from .command_scan import MAX_SCAN_DEPTH, Scanner, Simple
from .command_wrappers import LOADER, UNFOLLOWED, WRAPPERS, wrapped_command

#: deeper nesting than this is not followed (and makes the command unseen)
MAX_DEPTH = MAX_SCAN_DEPTH
#: normalised forms made for one command string at most; past it, ``overflow``
FORM_BUDGET = 50_000
SYSTEM_DIRS = frozenset({
    "/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin",
})  # fmt: skip
#: shells whose ``-c`` string is read here: bash as bash, the others as ``sh`` (dash)
SHELLS = frozenset({"sh", "bash", "dash", "ash", "su"})
#: shells whose command language is another (their strings are unseen)
OTHER_SHELLS = frozenset({"zsh", "ksh", "mksh", "ksh93", "pdksh", "yash", "posh", "fish",
                          "csh", "tcsh", "nu", "xonsh", "elvish", "busybox-sh"})  # fmt: skip
#: what xargs adds to its command: the words it reads, known only when it runs
XARGS_INPUT = "{}"
NAME_IS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
#: variables whose value a shell later runs as code (``PS4`` under ``set -x``), reads
#: as a file of commands (``BASH_ENV``, ``ENV``), or takes a program's path or an alias
#: from (``BASH_CMDS[ls]=/bin/rm``, ``BASH_ALIASES``)
CODE_VARIABLES = re.compile(r"(PS4|BASH_ENV|ENV|PROMPT_COMMAND)\+?=|.*(BASH_CMDS|BASH_ALIASES)")
#: builtins that make the shell run code only with one option: ``declare -i`` (its
#: values are arithmetic), ``hash -p /bin/rm ls`` and ``enable -f lib.so`` (a name runs
#: another program, or a library's code)
OPTIONED = {"declare": "i", "typeset": "i", "local": "i", "export": "i", "readonly": "i",
            "hash": "p", "enable": "f"}  # fmt: skip
#: a backslash-newline between two characters that are not blanks: bash joins them
#: before it reads anything (the scanner would read the halves apart)
JOINED = re.compile(r"[^ \t\n]\\\n[^ \t\n]")
#: paths that are a program's standard input or another descriptor
STDIN_PATHS = re.compile(r"-|/dev/stdin|/dev/fd/.*|/proc/.*|/dev/tcp/.*|/dev/udp/.*")


@dataclass(frozen=True, slots=True)
class Command:
    """One program the command runs, in the shapes rules see (module docstring)."""

    written: str
    forms: tuple[str, ...]
    #: started by another command of the same string (a wrapper, ``-exec``, ``sh -c``)
    wrapped: bool = False
    #: the program's basename ("" for a bare assignment like ``X=1``)
    program: str = ""
    #: the words it runs as scanned, quotes removed (without the assignments before them)
    argv: tuple[str, ...] = ()
    #: for each of ``argv``, whether it is known only when the command runs (``$x``, a glob)
    dynamic: tuple[bool, ...] = ()
    #: the assignments before it (``GIT_DIR=a b/.git``), quotes removed, one word each
    assignments: tuple[str, ...] = ()


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
    #: program or command string known only when it runs, nesting too deep, a reading
    #: shells differ on
    hidden: str = ""

    @property
    def simple(self) -> bool:
        """One command the shell starts itself, no output redirected to a file, fully understood."""
        return len(self.started) == 1 and not self.writes and not self.unclear

    @property
    def started(self) -> tuple[Command, ...]:
        """The commands the shell itself starts (what allow rules must cover)."""
        return tuple(c for c in self.commands if not c.wrapped)


def runs_arguments(program: str) -> bool:
    """Whether ``program`` runs a command or code it is given (a wrapper, a shell,
    ``eval``, ``find``, a runner not followed): "allow always" for it stays exact."""
    return (
        program in SHELLS
        or program in OTHER_SHELLS
        or program in SPECIAL
        or program in WRAPPERS
        or program in UNFOLLOWED
        or LOADER.fullmatch(program) is not None
    )


def analyse(command: str) -> Analysis:
    """Every command in ``command`` (see the module docstring); never raises."""
    found = _Found()
    _script(command, found, depth=0, wrapped=False)
    return Analysis(
        tuple(found.commands), tuple(found.writes), found.unclear, found.overflow, found.hidden
    )


@dataclass
class _Found:
    """What the scan found so far (the scanner's :class:`~.command_scan.Sink`)."""

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

    def record(self, simple: Simple, depth: int) -> None:
        _record(simple, self, depth, wrapped=False)

    def script(self, text: str, depth: int, posix: bool) -> None:
        _script(text, self, depth, wrapped=False, posix=posix)


def _script(text: str, found: _Found, depth: int, wrapped: bool, posix: bool = False) -> None:
    """Scan ``text`` as a whole script and record what it runs (``posix``: run by sh)."""
    if depth > MAX_DEPTH:
        found.unseen(f"nested more than {MAX_DEPTH} levels deep")
        return
    if JOINED.search(text):  # i\<newline>f is the keyword if, $\<newline>( a substitution
        found.unseen("a line continuation joins two parts of a word or an operator")
    scanner = Scanner(text, found, depth, posix)
    for simple in scanner.commands(closer=""):
        _record(simple, found, depth, wrapped)


# -- from scanned words to commands ------------------------------------------------

KEYWORDS = frozenset({"!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done",
                      "while", "until", "time", "[[", "]]"})  # fmt: skip


def _record(simple: Simple, found: _Found, depth: int, wrapped: bool) -> None:
    words, dynamic, raw = list(simple.words), list(simple.dynamic), list(simple.raw)
    if any(CODE_VARIABLES.match(word) for word in words):
        found.unseen("a variable whose value a shell runs (PS4, BASH_ENV, ENV) is set")
    keyword = ""
    while words and (
        (
            words[0] in KEYWORDS
            and raw[0] == words[0]
            and not (simple.piped and not keyword and words[0] == "time")  # a | time x
        )
        or (keyword == "time" and words[0] in ("-p", "--"))  # bash's time -p
    ):
        keyword = words[0] if words[0] in KEYWORDS else keyword
        del words[0], dynamic[0], raw[0]
    if keyword == "time" and words and words[0].startswith("-"):  # sh has no time keyword:
        _command(["time", *words], [False, *dynamic], [], found, depth, wrapped=True)  # a program
    literal = bool(words) and raw[0] == words[0]
    if keyword == "[[" or (literal and words[0] == "function"):
        _conditional_or_function(simple, words, dynamic, raw, found, depth, wrapped)
        return
    if not words or (literal and words[0] in ("fi", "done", "esac")):
        return
    if literal and words[0] in ("for", "select"):
        return  # a loop header: the commands come as their own parts
    if literal and words[0] == "case":
        found.unsure("case is not followed")
        return
    assignments = 0
    while assignments < len(words) and NAME_IS.match(raw[assignments]):  # ''x=1 is a program
        assignments += 1
    _command(words[assignments:], dynamic[assignments:], words[:assignments], found, depth, wrapped)


def _conditional_or_function(
    simple: Simple,
    words: list[str],
    dynamic: list[bool],
    raw: list[str],
    found: _Found,
    depth: int,
    wrapped: bool,
) -> None:
    """``[[ ... ]]`` runs nothing but its substitutions (recorded already), yet its
    ``-eq`` and the like evaluate values as arithmetic; ``function name { ...``
    goes on with the commands after the name."""
    if words and words[0] == "function":
        rest = Simple(words[2:], dynamic[2:], raw[2:], simple.writes)
        _record(rest, found, depth, wrapped)
    elif any(word in ARITHMETIC_TESTS for word in words):
        found.unseen("arithmetic in [[ ... ]] is not followed")


ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})


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
        found.commands.append(Command(text, (text,), wrapped, assignments=tuple(assignments)))
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
    command = Command(
        written,
        tuple(dict.fromkeys(forms)),
        wrapped,
        program,
        tuple(words),
        tuple(dynamic),
        tuple(assignments),
    )
    found.commands.append(command)
    if depth > MAX_DEPTH:
        found.unseen(f"nested more than {MAX_DEPTH} levels deep")
        return
    _started(program, args, dynamic[1:], found, depth)


def _started(program: str, args: list[str], dynamic: list[bool], found: _Found, depth: int) -> None:
    """What ``program`` itself starts: a wrapped command, a shell string, find's actions."""
    if program in SHELLS:
        _shell(program, args, dynamic, found, depth)
    elif program in SPECIAL:
        SPECIAL[program](program, args, dynamic, found, depth)
    elif program in WRAPPERS:
        _wrapper(program, args, dynamic, found, depth)
    elif program in UNFOLLOWED or program in OTHER_SHELLS or LOADER.fullmatch(program):
        found.unseen(f"what {program} runs is not followed")


def _shell(program: str, args: list[str], dynamic: list[bool], found: _Found, depth: int) -> None:
    """``sh -c 'string'`` runs the string (bash reads it as bash, the others as sh);
    a shell given no string and no script file reads its commands from its input."""
    at = _shell_string(args)
    if at is None:
        operand = _shell_operand(args)
        stdin = operand is None or dynamic[operand] or STDIN_PATHS.fullmatch(args[operand])
        reads = any(a.startswith("-") and not a.startswith("--") and "s" in a for a in args)
        if program != "su" and (stdin or reads):
            found.unseen(f"{program} reads its commands from its input")
    elif at >= len(args) or dynamic[at]:
        found.unseen(f"the command string of {program} -c is known only when it runs")
    else:
        _script(args[at], found, depth + 1, wrapped=True, posix=program != "bash")


def _shell_operand(args: list[str]) -> int | None:
    """Where a shell's script file is named: the first word not an option nor an
    option's value (``-o pipefail``, ``--rcfile f``); None when there is none."""
    at = 0
    while at < len(args):
        arg = args[at]
        if arg == "--":
            return at + 1 if at + 1 < len(args) else None
        if not arg.startswith(("-", "+")) or arg in ("-", "+"):
            return at
        valued = arg in ("--rcfile", "--init-file") or (
            not arg.startswith("--") and arg[-1] in "oO"
        )
        at += 2 if valued else 1
    return None


def _shell_string(args: list[str]) -> int | None:
    """Where the command string of ``sh -c 'string'`` is (also ``-ec``, ``-lc``,
    ``su -c``): its index, ``len(args)`` if missing, None without ``-c``."""
    for at, arg in enumerate(args):
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            later = (i for i in range(at + 1, len(args)) if not args[i].startswith("-"))
            return next(later, len(args))
    return None


def _eval(program: str, args: list[str], dynamic: list[bool], found: _Found, depth: int) -> None:
    """``eval`` runs its words joined as a command string."""
    if any(dynamic):
        found.unseen(f"what {program} runs is known only when it runs")
    _script(" ".join(args), found, depth + 1, wrapped=True)


def _trap(program: str, args: list[str], dynamic: list[bool], found: _Found, depth: int) -> None:
    """``trap 'cmd' EXIT``: the action is a command string, run later."""
    at = 0
    while at < len(args) and args[at] in ("-p", "-l", "-P", "--"):
        at += 1
    if at < len(args) and dynamic[at]:
        found.unseen("what trap runs is known only when it runs")
    elif at < len(args):
        _script(args[at], found, depth + 1, wrapped=True)


def _source(program: str, args: list[str], dynamic: list[bool], found: _Found, depth: int) -> None:
    """``source FILE`` runs a script (not followed, like any script), but one read from
    standard input or a substitution is a command string known only when it runs."""
    operand = next((n for n, a in enumerate(args) if a != "--"), None)
    if operand is None or dynamic[operand] or STDIN_PATHS.fullmatch(args[operand]):
        found.unseen(f"what {program} reads is known only when it runs")


def _unseen(program: str, args: list[str], dynamic: list[bool], found: _Found, depth: int) -> None:
    """Builtins that can make later words run code: ``alias x=...``, ``let``'s
    arithmetic (``a[$(cmd)]``), ``mapfile -C``, those of :data:`OPTIONED`."""
    if program == "alias" and not any("=" in a for a in args):
        return
    if program in OPTIONED and not any(
        a.startswith("-") and OPTIONED[program] in a for a in args
    ):  # declare -i x=...: the value is arithmetic; hash -p, enable -f: another program
        return
    if program in ("mapfile", "readarray") and not any(
        a.startswith("-") and "C" in a for a in args
    ):
        return
    found.unseen(f"what {program} makes the shell run is not followed")


def _wrapper(program: str, args: list[str], dynamic: list[bool], found: _Found, depth: int) -> None:
    """The command a wrapper (:data:`~.command_wrappers.WRAPPERS`) starts, as one more
    command (xargs: with the words it reads as one more argument)."""
    wrapped = wrapped_command(program, args)
    if wrapped.unknown:
        found.unseen(wrapped.unknown)
        return
    rest, flags = wrapped.command, dynamic[wrapped.at :]
    for name, value in wrapped.values:
        if program == "env" and name in ("S", "split-string"):  # env -S 'cmd' args
            if any(dynamic) or "\\" in value or "$" in value:  # env's own escapes, ${VAR}
                found.unseen("the string of env -S is not followed")
            _script(" ".join([value, *rest]), found, depth + 1, wrapped=True)
            return
    if program == "xargs":
        rest, flags = (rest, flags) if rest else (["echo"], [False])
        if not any(name in ("I", "i", "replace") for name, _ in wrapped.values):
            rest, flags = [*rest, XARGS_INPUT], [*flags, True]
    if program in ("watch", "flock") and rest:
        if program == "flock" and rest[0] not in ("-c", "--command"):
            _command(rest, flags, [], found, depth + 1, wrapped=True)
            return
        text = rest[1:] if program == "flock" else rest  # watch runs its words by sh -c
        if any(flags) or not text:
            found.unseen(f"what {program} runs is known only when it runs")
        _script(" ".join(text), found, depth + 1, wrapped=True, posix=True)
    elif rest:
        _command(rest, flags, [], found, depth + 1, wrapped=True)


def _find(program: str, args: list[str], dynamic: list[bool], found: _Found, depth: int) -> None:
    """``-exec``/``-execdir``/``-ok``/``-okdir`` run a command; ``-delete`` is ``rm -rf``."""
    at = 0
    while at < len(args) and (args[at] in ("-H", "-L", "-P") or args[at].startswith("-O")):
        at += 1
    if at < len(args) and args[at] == "-D":
        at += 2
    starts = []
    for arg in args[at:]:
        if arg.startswith("-") or arg in ("(", "!"):
            break
        starts.append(arg)
    while at < len(args):
        if args[at] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = at + 1
            while end < len(args) and args[end] not in (";", "+"):
                end += 1
            if end > at + 1:
                _command(args[at + 1 : end], dynamic[at + 1 : end], [], found, depth + 1, True)
            at = end
        elif args[at] == "-delete":
            deleted = ["rm", "-rf", *(starts or ["."])]
            _command(deleted, [False] * len(deleted), [], found, depth + 1, wrapped=True)
        at += 1


#: programs whose arguments say what else runs, and how to read them
SPECIAL: dict[str, Callable[[str, list[str], list[bool], _Found, int], None]] = {
    "eval": _eval, "trap": _trap, "source": _source, ".": _source, "alias": _unseen,
    "let": _unseen, "mapfile": _unseen, "readarray": _unseen, "find": _find,
    **dict.fromkeys(OPTIONED, _unseen),
}  # fmt: skip

"""Git's pattern language for one ignore file, as git itself matches it.

Why not :mod:`pathspec`: it matches a pattern against a path *and every
directory above it* (``a`` matches ``a/c``), which stands for "this is inside an
ignored directory" but is wrong once negations stack across files: ``!a`` in a
parent ``.gitignore`` would re-include ``a/c.tmp`` that ``c.tmp/`` ignores. Git
asks each pattern about the path itself only (an ignored directory is simply
never entered), and so does this module.

Model, in prose (git's ``dir.c`` and ``wildmatch.c``): a file is split into
lines at ``\\n`` (a leading UTF-8 byte order mark dropped, a ``\\r`` before the
``\\n`` dropped); a line starting with ``#`` is a comment; trailing spaces are
dropped unless escaped with ``\\``. A leading ``!`` negates; a trailing ``/``
says "directories only" and is dropped. A pattern with no ``/`` left is matched
against the path's last component; otherwise against the whole path relative to
the file's directory (a leading ``/`` only anchors). ``*`` and ``?`` never
match ``/``; ``**`` between slashes (or at either end) matches any number of
directories; ``[...]`` is a set (``!`` or ``^`` negates, ranges, ``[:alpha:]``
and the other ASCII classes); ``\\`` escapes the next character. Like git, it
all works on bytes, not characters. A malformed set or a trailing lone ``\\``
makes the pattern match nothing, as in git. For one path, the *last* pattern
of the file that matches decides.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_BOM = "\xef\xbb\xbf"  # UTF-8's byte order mark, one character per byte
#: ASCII character classes of ``[:name:]``, as git's sane ctype has them
_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9a-fA-F",
}
_WILD = frozenset("*?[\\")


def _set_char(ch: str) -> str:
    return "\\" + ch if ch in "\\]^-[" else ch


_ABORT = object()  # a malformed set: the whole pattern matches nothing


def _set_item(pat: str, p: int, prev: str | None) -> tuple[str | object, int, str | None]:
    """One item of a set at ``pat[p]``: (its regex or :data:`_ABORT`, the index
    of its last character, the character a following ``-`` ranges from)."""
    n = len(pat)
    ch = pat[p]
    if ch == "\\":
        if p + 1 >= n:
            return _ABORT, p, None
        return _set_char(pat[p + 1]), p + 1, pat[p + 1]
    if ch == "-" and prev is not None and p + 1 < n and pat[p + 1] != "]":
        p += 1
        hi = pat[p]
        if hi == "\\":
            p += 1
            if p >= n:
                return _ABORT, p, None
            hi = pat[p]
        return (f"{_set_char(prev)}-{_set_char(hi)}" if prev <= hi else ""), p, None
    if ch == "[" and p + 1 < n and pat[p + 1] == ":":
        end = pat.find("]", p + 2)
        if end < 0:
            return _ABORT, p, None
        if end - 1 >= p + 2 and pat[end - 1] == ":":
            name = pat[p + 2 : end - 1]
            return _CLASSES.get(name, _ABORT), end, None
    return _set_char(ch), p, ch


def _bracket(pat: str, i: int) -> tuple[str, int] | None:
    """The set starting at ``pat[i] == "["``: (regex, index after ``]``), or
    ``None`` if it is malformed (the pattern then matches nothing)."""
    n = len(pat)
    p = i + 1
    negated = p < n and pat[p] in "!^"
    if negated:
        p += 1
    items: list[str] = []
    prev: str | None = None
    while p < n:
        item, p, prev = _set_item(pat, p, prev)
        if not isinstance(item, str):
            return None
        items.append(item)
        p += 1
        if p < n and pat[p] == "]":
            body = "".join(items)
            if negated:
                return f"[^/{body}]", p + 1
            return (f"(?!/)[{body}]" if body else "(?!)"), p + 1
    return None


def _stars(pat: str, i: int) -> tuple[str, int]:
    """The run of ``*`` at ``pat[i]``: (regex, index after it)."""
    n = len(pat)
    j = i
    while j < n and pat[j] == "*":
        j += 1
    boundary = (i == 0 or pat[i - 1] == "/") and (
        j == n or pat[j] == "/" or pat[j : j + 2] == "\\/"
    )
    if j - i < 2 or not boundary:
        return "[^/]*", j
    if j < n and pat[j] == "/":
        return "(?:.*/)?", j + 1  # "**/": any number of directories, none included
    return ".*", j


def translate(pat: str) -> str | None:
    """The regex source of wildmatch with ``WM_PATHNAME`` for ``pat``, or
    ``None`` if it can match nothing."""
    out: list[str] = []
    i, n = 0, len(pat)
    while i < n:
        ch = pat[i]
        if ch == "*":
            src, i = _stars(pat, i)
            out.append(src)
            continue
        if ch == "?":
            out.append("[^/]")
        elif ch == "[":
            got = _bracket(pat, i)
            if got is None:
                return None
            out.append(got[0])
            i = got[1]
            continue
        elif ch == "\\":
            i += 1
            if i >= n:
                return None
            out.append(re.escape(pat[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _trim_trailing_spaces(line: str) -> str:
    last_space = -1
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == " ":
            if last_space < 0:
                last_space = i
        elif ch == "\\":
            i += 1
            if i >= n:
                return line
            last_space = -1
        else:
            last_space = -1
        i += 1
    return line[:last_space] if last_space >= 0 else line


@dataclass(frozen=True, slots=True)
class Pattern:
    """One parsed line: how it matches and what a match says."""

    negative: bool
    dir_only: bool
    #: matched against the last path component only (no ``/`` in it)
    basename: bool
    #: the pattern itself when it has no wildcard (compared as a string)
    literal: str | None
    match: Callable[[str], object] | None


def parse_line(line: str) -> Pattern | None:
    """One line of an ignore file (its ``\\r`` already dropped), ``None`` for a
    comment or a pattern that matches nothing."""
    if not line or line.startswith("#"):
        return None
    line = _trim_trailing_spaces(line)
    negative = line.startswith("!")
    if negative:
        line = line[1:]
    dir_only = line.endswith("/")
    if dir_only:
        line = line[:-1]
    basename = "/" not in line
    if not basename and line.startswith("/"):
        line = line[1:]
    if not line:
        return None
    if not _WILD.intersection(line):
        return Pattern(negative, dir_only, basename, line, None)
    src = translate(line)
    if src is None:
        return None
    return Pattern(negative, dir_only, basename, None, re.compile(src, re.DOTALL).fullmatch)


def as_bytes(path: str) -> str:
    """A path as git sees it, one character per byte (its UTF-8 bytes, an
    undecodable byte kept as it was): git matches bytes, so ``?`` matches one
    byte of ``é`` and ``??`` matches all of it."""
    return path.encode("utf-8", "surrogateescape").decode("latin-1")


class PatternList:
    """The patterns of one ignore file, asked about paths relative to its directory."""

    __slots__ = ("patterns",)

    def __init__(self, patterns: list[Pattern]) -> None:
        self.patterns = patterns[::-1]  # the last line is asked first

    @classmethod
    def parse(cls, data: bytes) -> PatternList:
        """An ignore file's bytes, matched as bytes (see :func:`as_bytes`)."""
        text = data.decode("latin-1")  # one character per byte: see as_bytes()
        if text.startswith(_BOM):
            text = text[len(_BOM) :]
        found = []
        for line in text.split("\n"):
            got = parse_line(line[:-1] if line.endswith("\r") else line)
            if got is not None:
                found.append(got)
        return cls(found)

    def decide(self, path: str, is_dir: bool) -> bool | None:
        """``True`` ignored, ``False`` re-included (``!``), ``None`` no opinion, for
        ``path`` (relative to the file's directory, no trailing slash)."""
        if not path.isascii():
            path = as_bytes(path)
        name = path[path.rfind("/") + 1 :]
        for pat in self.patterns:
            if pat.dir_only and not is_dir:
                continue
            target = name if pat.basename else path
            if pat.literal is not None:
                if target != pat.literal:
                    continue
            elif pat.match is None or pat.match(target) is None:
                continue
            return not pat.negative
        return None

    def __bool__(self) -> bool:
        return bool(self.patterns)

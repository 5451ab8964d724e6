"""The searching tools: list files by glob, grep files by regular expression.

Both walk a tree under the directory searched in a worker thread and cap what
they return. Every match of a glob is judged on its own before it is named or
read:

- it must lead into the directory searched once its symlinks are resolved (a
  symlink named in the pattern, or ``ldir/*`` through a linked directory, that
  leads out is neither named nor read: the output counts such links);
- the read policy (:attr:`~infai.tools.base.ToolContext.readable`) must allow
  both the name it was found under and the file it resolves to, so a denied
  ``.env`` never appears in a listing or in grep's hits, under its own name or
  a link's;
- grep reads a file through :func:`~infai.tools.paths.open_regular` (no link
  followed, regular files only: a FIFO is skipped, never waited on; where read
  rules deny, a file with more than one link is skipped, judged on the opened
  descriptor, so a link made after the walk changes nothing), skips a file
  over :data:`MAX_FILE_BYTES` and stops after :data:`MAX_TOTAL_BYTES`,
  saying so.

A glob's walk has a budget too (:class:`GlobBudget`: paths named and seconds),
repeated ``**`` segments are merged, and at most :data:`MAX_RECURSIVE_SEGMENTS`
remain: chained ones made pathlib walk every chain of directories, for minutes.

The regular expression runs under the ``regex`` package's timeout, a budget of
:data:`REGEX_SECONDS` for the whole search: a pattern that backtracks
catastrophically ends the search with an error result, instead of pinning a
CPU for ever.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import stat
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infai.llm import ToolSpec

from .base import ToolContext, ToolOutput
from .common import MAX_MATCHES, STR, argument_problem, cap, error, schema
from .paths import NulInPath, Resolved, open_regular, relative_name

#: a file bigger than this is not searched (and the output says so)
MAX_FILE_BYTES = 4 << 20
#: a search reads at most this much in all, then stops (and says so)
MAX_TOTAL_BYTES = 64 << 20
#: seconds the regular expression may run in all, over every line of every file
REGEX_SECONDS = 5.0
#: at most this many ``**`` segments in a glob once repeats are merged: each one
#: multiplies the walk's work by the tree's depth (``**/a/**/b/**/c/**`` visits
#: every chain of directories), so a few chained ones ran for minutes
MAX_RECURSIVE_SEGMENTS = 2
#: a glob's walk names at most this many paths before it stops (and says so)
MAX_GLOBBED = 200_000
#: seconds a glob's walk may run before it stops (and says so)
GLOB_SECONDS = 10.0


@dataclass(slots=True)
class Found:
    """The matches of a glob that may be named, and what was left out and why."""

    #: (the path as found under the directory searched, the file it resolves to)
    paths: list[tuple[Path, Path]] = field(default_factory=list)
    leaving: int = 0
    denied: int = 0

    def notes(self, searched: str) -> list[str]:
        """What the output says about what was left out."""
        notes = []
        if self.leaving:
            notes.append(f"[{self.leaving} links leading out of {searched} not read]")
        if self.denied:
            notes.append(
                f"[{self.denied} paths the read rules deny left out (or hard-linked files, "
                "which may be a denied file under another name)]"
            )
        return notes


def _under(path: Path, base: Path) -> bool:
    return path == base or base in path.parents


def matches(
    base: Path, globbed: Iterable[Path], context: ToolContext, *, skip_git: bool = False
) -> Found:
    """Judge each globbed path (see the module's docstring): keep those that lead
    into ``base`` (a resolved directory) and that the read policy allows."""
    found = Found()
    for named in globbed:
        if skip_git and ".git" in named.relative_to(base).parts:
            continue
        try:
            real = named.resolve()
        except (OSError, RuntimeError):  # a link loop
            found.leaving += 1
            continue
        if not _under(real, base):
            found.leaving += 1
            continue
        names = {relative_name(context.working_dir, p) for p in (named, real)}
        if not all(context.may_read(name) for name in names) or (
            context.reads_denied and _hard_linked(real)
        ):
            found.denied += 1
            continue
        found.paths.append((named, real))
    return found


def _hard_linked(path: Path) -> bool:
    """Whether ``path`` is a regular file with more than one name."""
    try:
        found = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_nlink > 1


def _base(arguments: dict[str, Any], context: ToolContext, spec: ToolSpec) -> Resolved | str:
    if problem := argument_problem(spec, arguments):
        return problem
    try:
        return context.resolve(str(arguments.get("path") or "."))
    except NulInPath:
        return "argument 'path' has a NUL byte in it, which no path can hold"


def merged_recursion(pattern: str) -> str:
    """The pattern with each run of ``**`` segments written once: ``**/**`` matches
    exactly what ``**`` does, but pathlib walks the tree once per repeat, nested."""
    parts: list[str] = []
    for part in pattern.split("/"):
        if part == "**" and parts and parts[-1] == "**":
            continue
        parts.append(part)
    return "/".join(parts)


class GlobBudget:
    """How much a glob's walk may still do: it stops after :data:`MAX_GLOBBED`
    paths looked at (each entry of each directory read, matching or not: a
    pattern matching nothing walks as far as one matching everything) or
    :data:`GLOB_SECONDS`, and the output says which."""

    def __init__(self) -> None:
        self.deadline = time.monotonic() + GLOB_SECONDS
        self.left = MAX_GLOBBED
        self.stopped: str | None = None

    def spend(self) -> bool:
        """Count one path looked at; False once the budget has run out."""
        if self.stopped is None and self.left <= 0:
            self.stopped = f"[walk stopped after {MAX_GLOBBED:,} paths; narrow the pattern]"
        elif self.stopped is None and time.monotonic() > self.deadline:
            self.stopped = f"[walk stopped after {GLOB_SECONDS:g}s; narrow the pattern]"
        self.left -= 1
        return self.stopped is None

    def entries(self, directory: Path) -> list[os.DirEntry[str]]:
        """The entries of ``directory`` while the budget lasts ([] if unreadable)."""
        out: list[os.DirEntry[str]] = []
        try:
            with os.scandir(directory) as listing:
                for entry in listing:
                    if not self.spend():
                        break
                    out.append(entry)
        except OSError:
            pass
        return out


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _select(parent: Path, parts: list[str], budget: GlobBudget) -> Iterator[Path]:
    """What ``parts`` match below ``parent``, as :meth:`pathlib.Path.glob` finds
    them: ``**`` is any number of directories (symlinked ones not entered), a
    wildcard segment is matched against each entry, a plain one looked up."""
    if not parts:
        yield parent
        return
    part, rest = parts[0], parts[1:]
    if part == "**":
        todo = deque([parent])
        while todo and budget.stopped is None:
            here = todo.popleft()
            yield from _select(here, rest, budget)
            todo += [
                Path(e.path) for e in budget.entries(here) if _is_dir(e) and not e.is_symlink()
            ]
    elif "**" in part:
        raise ValueError("Invalid pattern: '**' can only be an entire path component")
    elif any(c in part for c in "*?["):
        matcher = re.compile(fnmatch.translate(part)).fullmatch
        for entry in budget.entries(parent):
            if matcher(entry.name) and (not rest or _is_dir(entry)):
                yield from _select(Path(entry.path), rest, budget)
    elif budget.spend():
        path = parent / part
        if path.is_dir() if rest else path.exists():
            yield from _select(path, rest, budget)


def _globbed(
    base: Path, pattern: str, budget: GlobBudget, *, recursive: bool = False
) -> Iterator[Path]:
    """The paths the pattern matches under ``base`` (``ValueError`` for a bad pattern);
    ``recursive`` matches it at any depth, as ``rglob`` does. Each path once, the
    walk bounded by ``budget``."""
    pattern = merged_recursion(f"**/{pattern}" if recursive else pattern)
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if not parts:
        raise ValueError(f"Unacceptable pattern: {pattern!r}")
    seen: set[Path] = set()
    for path in _select(base, parts, budget):
        if path not in seen:
            seen.add(path)
            yield path


class ListFiles:
    """``list_files``: paths under a directory matching a glob, sorted, at most
    :data:`MAX_MATCHES`; a glob may not climb out of the directory, and what it
    matches is named only if it leads into it and the read policy allows it."""

    #: reads only: no files snapshot after a call (:mod:`infai.checkpoints.session`)
    changes_files = False
    spec = ToolSpec(
        "list_files",
        "List files matching a glob pattern (e.g. '**/*.py') under a directory.",
        schema([], pattern=STR, path=STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """:meth:`listing` in a worker thread."""
        return await asyncio.to_thread(self.listing, arguments, context)

    def listing(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """The blocking part (a walk of the tree), run in a worker thread."""
        base = _base(arguments, context, self.spec)
        if isinstance(base, str):
            return error(base)
        pattern = str(arguments.get("pattern") or "*")
        if problem := _glob_problem(pattern, "pattern"):
            return error(problem)
        if not base.path.is_dir():
            return error(f"{arguments.get('path', '.')} is not a directory")
        if not context.may_read(relative_name(context.working_dir, base.path)):
            return error(f"the read rules deny listing {arguments.get('path', '.')}")
        walk = GlobBudget()
        try:
            found = matches(base.path, _globbed(base.path, pattern, walk), context)
        except ValueError as exc:
            return error(f"bad pattern {pattern!r}: {exc}")
        names = sorted(
            str(named.relative_to(base.path)) + ("/" if real.is_dir() else "")
            for named, real in found.paths
        )
        listed = names[:MAX_MATCHES]
        more = [f"[... {len(names) - len(listed)} more]"] if len(names) > len(listed) else []
        lines = [*listed, *more, *found.notes(base.shown(context.working_dir))]
        if walk.stopped:
            lines.append(walk.stopped)
        return ToolOutput("\n".join(lines) if listed else "\n".join(["(no matches)", *lines]))


class _Budget:
    """What one search may still read and how long its regex may still run."""

    def __init__(self) -> None:
        self.bytes_left = MAX_TOTAL_BYTES
        self.deadline = time.monotonic() + REGEX_SECONDS
        self.too_big = 0
        self.exhausted = False

    def seconds_left(self) -> float:
        return max(0.001, self.deadline - time.monotonic())


def _read_text(path: Path, context: ToolContext, budget: _Budget) -> str | None:
    """The file's text, if it is a regular UTF-8 file within the caps; else None."""
    root = context.working_dir.resolve()
    try:
        fd = open_regular(Resolved(path, _under(path, root)), context.working_dir)
    except OSError:
        return None  # gone, not a regular file, or changed under us: not searched
    with open(fd, "rb") as handle:
        opened = os.fstat(fd)
        if context.reads_denied and opened.st_nlink > 1:
            return None  # made a hard link since the walk judged it: what it opened decides
        size = opened.st_size
        if size > MAX_FILE_BYTES:
            budget.too_big += 1
            return None
        if size > budget.bytes_left:
            budget.exhausted = True
            return None
        data = handle.read(MAX_FILE_BYTES + 1)
    budget.bytes_left -= len(data)
    if len(data) > MAX_FILE_BYTES:  # it grew while read
        budget.too_big += 1
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None  # binary


class Grep:
    """``grep``: a regular expression over the UTF-8 files under a directory, ``.git``
    and binary files skipped, links leading out not followed, files the read
    policy denies left out, at most :data:`MAX_MATCHES`, within a time limit."""

    #: reads only: no files snapshot after a call (:mod:`infai.checkpoints.session`)
    changes_files = False
    spec = ToolSpec(
        "grep",
        "Search files under a directory for a regular expression; lines as path:line:text.",
        schema(["pattern"], pattern=STR, path=STR, glob=STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """:meth:`search` in a worker thread."""
        return await asyncio.to_thread(self.search, arguments, context)

    def search(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """The blocking part (a walk of the tree), run in a worker thread."""
        base = _base(arguments, context, self.spec)
        if isinstance(base, str):
            return error(base)
        import regex  # the engine is imported when a search runs, not at every start

        try:
            pattern = Matcher(str(arguments.get("pattern", "")))
        except (regex.error, ValueError, OverflowError, RecursionError) as exc:
            return error(f"bad regular expression: {exc}")
        glob = str(arguments.get("glob") or "*")
        if problem := _glob_problem(glob, "glob", recursive=True):
            return error(problem)
        globbed: Iterable[Path]
        walk = GlobBudget()
        if base.path.is_file():
            root, globbed = base.path.parent, [base.path]
        else:
            root, globbed = base.path, _globbed(base.path, glob, walk, recursive=True)
        try:
            found = matches(root, globbed, context, skip_git=True)
        except ValueError as exc:
            return error(f"bad glob {glob!r}: {exc}")
        budget = _Budget()
        hits: list[str] = []
        try:
            self._scan(found, root, pattern, context, budget, hits)
        except TimeoutError:
            shown = cap("\n".join(hits)) + "\n" if hits else ""
            return error(
                f"{shown}the regular expression timed out after {REGEX_SECONDS:g}s "
                "(it backtracks too much); simplify it"
            )
        notes = found.notes(base.shown(context.working_dir))
        if walk.stopped:
            notes.append(walk.stopped)
        if budget.too_big:
            notes.append(f"[{budget.too_big} files over {MAX_FILE_BYTES >> 20} MiB not searched]")
        if budget.exhausted:
            notes.append(f"[stopped after reading {MAX_TOTAL_BYTES >> 20} MiB]")
        text = cap("\n".join(hits)) if hits else "(no matches)"
        return ToolOutput("\n".join([text, *notes]))

    @staticmethod
    def _scan(
        found: Found,
        root: Path,
        pattern: Matcher,
        context: ToolContext,
        budget: _Budget,
        hits: list[str],
    ) -> None:
        """Search each file the walk kept, appending ``path:line:text`` to ``hits``."""
        for named, real in found.paths:
            if len(hits) >= MAX_MATCHES:
                hits.append(f"[... stopped after {MAX_MATCHES} matches]")
                return
            if budget.exhausted:
                return
            text = _read_text(real, context, budget)
            if text is None:
                continue
            shown = named.relative_to(root) if named != root else Path(named.name)
            for number, line in pattern.lines(text.splitlines(), budget):
                hits.append(f"{shown}:{number}:{line[:300]}")
                if len(hits) >= MAX_MATCHES:
                    break


#: what may match differently at a line's end when a newline follows it (lookaround,
#: inline flags, \A \Z \z \G, possessive quantifiers): such a pattern is run line by line only
_NOT_LINEWISE = re.compile(r"\(\?|\\[AZzG]|[*+?}]\+")
#: global flags at the start that keep a pattern line-wise (not s, which lets . cross lines)
_LEADING_FLAGS = re.compile(r"\(\?[aiLmux]+\)")


class Matcher:
    """A grep pattern, matched line by line, under the search's time budget.

    The ``regex`` package's ``timeout`` costs a few microseconds a call, too much
    once per line of a large tree; so a file is first searched whole (its lines
    joined by ``\n``, the pattern in MULTILINE mode), and only a file with a
    match is searched line by line. Every line-wise match is also a whole-text
    match for a pattern free of the constructs :data:`_NOT_LINEWISE` names, so
    the first pass only skips files without matches; other patterns go line by
    line from the start.
    """

    def __init__(self, source: str) -> None:
        import regex

        self.line = regex.compile(source)
        flags = _LEADING_FLAGS.match(source)
        rest = source[flags.end() :] if flags else source
        self.whole = None if _NOT_LINEWISE.search(rest) else regex.compile(source, regex.MULTILINE)

    def lines(self, lines: list[str], budget: _Budget) -> Iterator[tuple[int, str]]:
        """The (1-based number, text) of each line that matches."""
        if self.whole is not None and not self.whole.search(
            "\n".join(lines), timeout=budget.seconds_left()
        ):
            return
        for number, line in enumerate(lines, 1):
            if self.line.search(line, timeout=budget.seconds_left()):
                yield number, line


def _glob_problem(pattern: str, field: str, *, recursive: bool = False) -> str | None:
    """Why a glob may not be used: it must stay under the directory searched
    (leaving it is a matter for ``path``, which the permission policy sees), and
    its walk must not multiply (``recursive``: matched at any depth, as grep's)."""
    if pattern.startswith(("/", "~")) or ".." in Path(pattern).parts:
        return f"{field} {pattern!r} must stay under the directory searched; give path instead"
    chained = merged_recursion(f"**/{pattern}" if recursive else pattern).split("/").count("**")
    if chained > MAX_RECURSIVE_SEGMENTS:
        shown = chained - 1 if recursive else chained
        return (
            f"{field} {pattern!r} has {shown} '**' segments; at most "
            f"{MAX_RECURSIVE_SEGMENTS - recursive} (each one walks the tree again below the last)"
        )
    return None

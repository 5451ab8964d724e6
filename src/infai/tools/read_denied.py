"""The files the read rules deny, found on disk, so sandboxed commands cannot read them either.

``deny read_file .env`` keeps the file tools and searches away from ``.env``,
but a shell command could still ``cat`` it: so the files such rules name are
hidden from commands too (mounted over by an empty file or directory, as
``sandbox.hidden`` paths are, :mod:`.sandbox_hide`). A rule's pattern is
matched as the policy matches it (``fnmatch``, ``*`` crossing ``/``) against
paths relative to the working directory, or absolute outside it:

- a pattern with no wildcard names one path, looked up directly;
- a pattern with wildcards is matched against a walk of the working directory
  (``.git`` left out), bounded by :data:`MAX_WALKED` entries and
  :data:`WALK_SECONDS`, since it runs before every command; where the walk
  stops, the result says so, and the files past it are not hidden.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .rules import matcher

#: the entries one command's walk for denied files looks at, at most
MAX_WALKED = 20_000
#: the seconds it may take, at most
WALK_SECONDS = 0.25
_WILD = frozenset("*?[")


@dataclass(slots=True)
class DeniedFiles:
    """What to hide, and whether the walk stopped before it looked everywhere."""

    paths: list[str] = field(default_factory=list)
    stopped: bool = False

    def note(self) -> str:
        """The line a command's output gets when the walk stopped early ("" if not)."""
        if not self.stopped:
            return ""
        return (
            f"\n[sandbox] the read rules' files were looked for in the first {MAX_WALKED:,} "
            "paths only; a denied file past them is not hidden from this command"
        )


def denied_files(working_dir: Path, patterns: Iterable[str]) -> DeniedFiles:
    """The existing paths ``patterns`` (deny rules' patterns for reads) name."""
    found = DeniedFiles()
    wild: list[Callable[[str], object]] = []
    for pattern in dict.fromkeys(patterns):
        if not _WILD & set(pattern):
            path = Path(pattern) if os.path.isabs(pattern) else working_dir / pattern
            if os.path.lexists(path):
                found.paths.append(os.path.normpath(path))
        elif not pattern.startswith(("/", "..")):
            wild.append(matcher(pattern))
    if wild:
        found.stopped = _walk(working_dir, wild, found.paths)
    return found


def _walk(working_dir: Path, wild: list[Callable[[str], object]], out: list[str]) -> bool:
    """Append the paths under ``working_dir`` a pattern matches; True if it stopped early."""
    deadline = time.monotonic() + WALK_SECONDS
    left = MAX_WALKED
    stack = [("", str(working_dir))]
    while stack:
        prefix, directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                listed = list(entries)
        except OSError:
            continue
        for entry in listed:
            left -= 1
            if left < 0 or time.monotonic() > deadline:
                return True
            if entry.name == ".git":
                continue
            rel = prefix + entry.name
            if any(match(rel) for match in wild):
                out.append(entry.path)
                continue  # hidden whole: nothing under it need be looked at
            if entry.is_dir(follow_symlinks=False):
                stack.append((rel + "/", entry.path))
    return False

"""The working directory's files as a snapshot sees them: for a shell that offers
paths (the TUI's ``@`` completion), with the snapshot's ignore rules.

Why not a walk of its own: what infai calls "the files of this directory" must
be one thing. This walk applies the same rules the snapshot walk does
(:class:`~.repo.RepoRules` for the repository's levels, each directory's
``.gitignore`` entered as :mod:`.walk` enters it, nested repositories starting
from their own rules), never enters ``.git`` nor the top's ``.infai`` (infai's
own), and follows no symlinked directory. It stops after ``limit``
files, breadth first, so the paths nearest the top are the ones offered.
"""

from __future__ import annotations

import os
from collections import deque

from .ignore import IGNORE_FILE, IgnoreRules
from .repo import RepoRules
from .walk import GIT_DIR, INFAI_DIR

#: files listed at most (a huge tree offers its upper levels)
LIMIT = 20_000


def _gitignore(path: str) -> bytes | None:
    try:
        with open(os.path.join(path, IGNORE_FILE), "rb") as found:
            return found.read()
    except OSError:
        return None


def working_files(working_dir: str, limit: int = LIMIT) -> list[str]:
    """The files of ``working_dir`` a snapshot would record, as paths relative to
    it (``a/b.txt``), breadth first, at most ``limit``."""
    repo = RepoRules(working_dir)
    rules, _ = repo.rules()
    out: list[str] = []
    todo: deque[tuple[str, IgnoreRules]] = deque([("", rules)])
    while todo and len(out) < limit:
        prefix, rules = todo.popleft()
        path = os.path.join(working_dir, prefix)
        try:
            with os.scandir(path) as found:
                entries = sorted(found, key=lambda entry: entry.name)
        except OSError:
            continue
        if prefix and any(entry.name == GIT_DIR for entry in entries):
            nested = repo.nested(path, prefix)
            rules = nested[0] if nested is not None else rules
        rules = rules.enter(prefix, _gitignore(path))
        for entry in entries:
            name = entry.name
            rel = prefix + name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if name == GIT_DIR or (is_dir and not prefix and name == INFAI_DIR):
                continue
            if rules.active and rules.ignored(rel, is_dir):
                continue
            if is_dir:
                todo.append((rel + "/", rules))
            elif len(out) < limit:
                out.append(rel)
    return out

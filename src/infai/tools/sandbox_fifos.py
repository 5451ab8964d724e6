"""FIFOs in the read-only parts of a writable root: covered, or a command writes into them.

Inside the working directory, ``.git/``, ``.infai/``, the git config files the
repository includes, protected paths and infai's own Python are mounted
read-only (:mod:`.sandbox`). A read-only mount refuses changes to a file
system, and writing into a FIFO changes none; Landlock (:mod:`.landlock`) lets
a command open for writing anything beneath a writable root. So a FIFO there
took what a confined command wrote, and a reader outside got it: the user's
``git status`` reading an included config (or a ``.git/config``) that is a
FIFO runs the ``core.fsmonitor`` the command feeds it; infai reading a
``.infai/config.toml`` that is one takes where to send the user's prompts.

A confined command cannot make a FIFO there (the mount is read-only), but one
may be there already: made before the path was read-only (a ``.git`` a command
made with ``git init``, a ``writable = [".git"]`` since removed), by an
unconfined command, or unpacked from an archive. :func:`fifos_in` finds them,
by a walk of at most :data:`MAX_ENTRIES` entries that follows no link, and
:func:`cover_args` mounts ``/dev/null`` over each, read-only: bubblewrap's
binds are ``nodev``, so opening it fails, for writing as for reading. A FIFO
beyond that many entries (a ``.git`` of more loose objects) is not covered.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

#: entries the walk looks at, at most, over all the read-only parts of one command
MAX_ENTRIES = 20_000


def fifos_in(paths: Sequence[str]) -> list[str]:
    """The FIFOs at or beneath ``paths`` (files or directories), links not followed."""
    found: list[str] = []
    todo = list(paths)
    seen = 0
    while todo and seen < MAX_ENTRIES:
        path = todo.pop()
        seen += 1
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if stat.S_ISFIFO(mode):
            found.append(path)
        elif stat.S_ISDIR(mode):
            seen += _scan(path, todo, found)
    return found


def _scan(directory: str, todo: list[str], found: list[str]) -> int:
    """Add ``directory``'s subdirectories to ``todo`` and its FIFOs to ``found``;
    returns how many entries it held. The entry's type comes from the directory
    listing: only one that is neither a file, a directory nor a link is stat-ed."""
    count = 0
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                count += 1
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
                elif _odd(entry) and stat.S_ISFIFO(entry.stat(follow_symlinks=False).st_mode):
                    found.append(entry.path)
    except OSError:
        pass
    return count


def _odd(entry: os.DirEntry[str]) -> bool:
    """Whether the listing says ``entry`` is neither a file, a directory nor a link."""
    return not entry.is_file(follow_symlinks=False) and not entry.is_symlink()


def cover_args(paths: Sequence[str]) -> list[str]:
    """bwrap's arguments that cover each FIFO at or beneath ``paths`` with
    ``/dev/null``, read-only (after the mounts that make ``paths`` read-only)."""
    args: list[str] = []
    for fifo in fifos_in(paths):
        args += ["--ro-bind", "/dev/null", fifo]
    return args

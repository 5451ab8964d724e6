"""Which paths of a working directory git would ignore, from its ``.gitignore`` files.

Model, in prose: git reads a ``.gitignore`` in every directory it enters, and
each file's patterns are relative to the directory holding it. For one path,
the deepest ``.gitignore`` that has an opinion decides (within one file the
last matching pattern wins, and ``!pattern`` says "not ignored"); an ignored
directory is never entered, so nothing below it can be re-included. This module
keeps one compiled :class:`pathspec.GitIgnoreSpec` per directory (pathspec
implements git's pattern language for one file; the stacking across directories
is done here, as git does it) and is asked about one entry at a time while the
snapshot walks the tree: the walk itself never enters an ignored directory.

Git also reads two files of patterns for the whole working tree, below every
``.gitignore`` in precedence: the repository's ``info/exclude`` and, lowest,
the user's global excludes file (``core.excludesFile``, by default
``$XDG_CONFIG_HOME/git/ignore`` or ``~/.config/git/ignore``). So do snapshots:
:func:`exclude_files` finds them (``info/exclude`` through the working
directory's ``.git``, a directory or a worktree's ``gitdir:`` file: read, never
written; the global one's path asked of ``git config`` once, when git is
installed), and they become the bottom levels of the root's stack, relative to
the working directory. Only a working directory at the top of its repository
has its ``info/exclude`` read (a subdirectory's walk would need the patterns
re-rooted; not done).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec

#: the name git reads in every directory
IGNORE_FILE = ".gitignore"
#: how long ``git config`` may take to say where the global excludes file is
_GIT_TIMEOUT_S = 5.0


def _default_global() -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg else Path.home() / ".config"
    return base / "git" / "ignore"


def global_excludes(workdir: str) -> Path:
    """The user's global excludes file: ``core.excludesFile`` as git resolves it
    for ``workdir`` (``~`` expanded), else git's default path (also when git is
    not installed)."""
    try:
        done = subprocess.run(
            ["git", "config", "--path", "--get", "core.excludesFile"],
            cwd=workdir,
            capture_output=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return _default_global()
    value = os.fsdecode(done.stdout.rstrip(b"\n"))
    if done.returncode != 0 or not value:
        return _default_global()
    return Path(workdir, value) if not os.path.isabs(value) else Path(value)


def info_exclude(workdir: str) -> Path | None:
    """``<git dir>/info/exclude`` of the repository whose top is ``workdir``
    (``.git`` a directory, or a file ``gitdir: …`` with perhaps a ``commondir``),
    or ``None`` if ``workdir`` has no ``.git``."""
    dotgit = Path(workdir, ".git")
    try:
        if dotgit.is_dir():
            return dotgit / "info" / "exclude"
        text = dotgit.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(workdir, text[len("gitdir:") :].strip())
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return gitdir / "info" / "exclude"
    return Path(gitdir, common) / "info" / "exclude"


def exclude_files(workdir: str) -> list[Path]:
    """The whole-tree pattern files, lowest precedence first (see the module)."""
    found = [global_excludes(workdir)]
    local = info_exclude(workdir)
    if local is not None:
        found.append(local)
    return found


def read_excludes(paths: list[Path]) -> list[bytes]:
    """Their bytes (``b""`` for a missing or unreadable one: git skips it too)."""
    out = []
    for path in paths:
        try:
            out.append(path.read_bytes())
        except OSError:
            out.append(b"")
    return out


@dataclass(frozen=True, slots=True)
class _Level:
    prefix: str  # the directory's path relative to the root, "" or ending in "/"
    spec: GitIgnoreSpec


class IgnoreRules:
    """The stack of ``.gitignore`` specs from the root to the directory being walked.

    Immutable: :meth:`enter` returns the rules for a subdirectory, so the walk
    can hand each directory its own stack without undoing anything.
    """

    __slots__ = ("_levels",)

    def __init__(self, levels: tuple[_Level, ...] = ()) -> None:
        self._levels = levels

    def enter(self, prefix: str, gitignore: bytes | None) -> IgnoreRules:
        """The rules inside the directory ``prefix`` (``""`` for the root, else
        ``"a/b/"``), given its ``.gitignore`` bytes (``None`` if it has none)."""
        if not gitignore:
            return self
        lines = gitignore.decode("utf-8", "surrogateescape").splitlines()
        spec = GitIgnoreSpec.from_lines(lines)
        return IgnoreRules((*self._levels, _Level(prefix, spec)))

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether git ignores ``path`` (relative to the root, no trailing slash).

        The deepest level with a matching pattern decides; a directory is
        asked with a trailing slash so that ``name/`` patterns match it.
        """
        for level in reversed(self._levels):
            rel = path[len(level.prefix) :]
            result = level.spec.check_file(rel + "/" if is_dir else rel)
            if result.include is not None:
                return bool(result.include)
        return False

    @property
    def active(self) -> bool:
        """Whether any ``.gitignore`` applies here (a cheap test to skip matching)."""
        return bool(self._levels)

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

Not read: ``.git/info/exclude`` (infai never reads the user's ``.git``) and the
user's global excludes file; a path ignored only there is snapshotted.
"""

from __future__ import annotations

from dataclasses import dataclass

from pathspec import GitIgnoreSpec

#: the name git reads in every directory
IGNORE_FILE = ".gitignore"


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

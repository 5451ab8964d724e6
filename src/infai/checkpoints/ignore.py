"""Which paths of a working directory git would ignore: the matcher.

Model, in prose: git reads a ``.gitignore`` in every directory it enters, and
each file's patterns are relative to the directory holding it. For one path,
the deepest ``.gitignore`` that has an opinion decides (within one file the
last matching pattern wins, and ``!pattern`` says "not ignored"); an ignored
directory is never entered, so nothing below it can be re-included. This module
keeps one compiled :class:`~.gitmatch.PatternList` per directory (git's
pattern language for one file; the stacking across directories is done here,
as git does it) and is asked about one entry at a time while the
snapshot walks the tree: the walk itself never enters an ignored directory.

Below the working directory's own levels lie the repository's (found by
:mod:`.repo`): the ``.gitignore`` files of the directories above the working
directory up to the repository's top, its ``info/exclude`` and the global
excludes file. Their patterns are relative to another directory than the
walk's root, so such a level *re-roots* a path first: it prepends the working
directory's path relative to the directory whose patterns it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .gitmatch import PatternList

#: the name git reads in every directory
IGNORE_FILE = ".gitignore"


def compile_patterns(data: bytes) -> PatternList:
    """One pattern file's bytes, compiled (matched on bytes, as git does)."""
    return PatternList.parse(data)


@dataclass(frozen=True, slots=True)
class _Level:
    prefix: str  # the directory's path relative to the root, "" or ending in "/"
    spec: PatternList
    #: prepended to a path below ``prefix`` before matching: "" for the walk's
    #: own levels, the working directory's path relative to the pattern file's
    #: directory for a repository level (see the module)
    reroot: str = ""


class IgnoreRules:
    """The stack of ``.gitignore`` specs from the root to the directory being walked.

    Immutable: :meth:`enter` returns the rules for a subdirectory, so the walk
    can hand each directory its own stack without undoing anything.
    ``everything``: the working directory is itself inside a directory the
    repository ignores, so git ignores every path in it (nothing below an
    ignored directory can be re-included).
    """

    __slots__ = ("_everything", "_levels")

    def __init__(self, levels: tuple[_Level, ...] = (), everything: bool = False) -> None:
        self._levels = levels
        self._everything = everything

    @classmethod
    def rerooted(
        cls,
        bases: Sequence[tuple[str, PatternList]],
        everything: bool = False,
        prefix: str = "",
    ) -> IgnoreRules:
        """The rules of a repository's top levels, lowest precedence first:
        (the path of the directory ``prefix`` relative to the level's
        directory, ``""`` or ``"a/b/"``; its patterns). ``prefix``: where the
        walk meets them, ``""`` for its root, a nested repository's path else."""
        levels = tuple(_Level(prefix, spec, reroot) for reroot, spec in bases)
        return cls(levels, everything)

    def enter(self, prefix: str, gitignore: bytes | None) -> IgnoreRules:
        """The rules inside the directory ``prefix`` (``""`` for the root, else
        ``"a/b/"``), given its ``.gitignore`` bytes (``None`` if it has none)."""
        spec = compile_patterns(gitignore) if gitignore else None
        if not spec:
            return self
        level = _Level(prefix, spec)
        return IgnoreRules((*self._levels, level), self._everything)

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether git ignores ``path`` (relative to the root, no trailing slash).

        The deepest level with a matching pattern decides (``name/`` patterns
        only match when ``is_dir``).
        """
        if self._everything:
            return True
        for level in reversed(self._levels):
            rel = path[len(level.prefix) :]
            if level.reroot:
                rel = level.reroot + rel
            decided = level.spec.decide(rel, is_dir)
            if decided is not None:
                return decided
        return False

    @property
    def active(self) -> bool:
        """Whether any pattern applies here (a cheap test to skip matching)."""
        return bool(self._levels) or self._everything

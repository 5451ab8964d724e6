"""Which repositories a command's git may open: where :mod:`.git_hardening` looks.

A repository's own config can make git run a program (a driver, an external
diff, an alias) and can move its work tree (``core.worktree``), and git takes
that config from the repository it *opens*, which need not be the one seen
from the working directory: ``git -C vendor/lib diff``, ``cd sub && git
diff``, ``git --git-dir=x/.git log`` or a script that runs git in a nested
checkout each open another. :func:`repositories` names them all as far as they
can be known before the command runs:

- the working directory's own (git looks from there, and upwards);
- each place the command's text names for git: every ``cd``/``pushd`` target
  and directory a wrapper runs its command in (``env -C``, ``make -C``:
  :data:`CHDIR_OPTIONS`), relative to the working directory and to the earlier
  targets; a git's ``-C``
  chain from each of those, its ``--git-dir`` and a ``GIT_DIR=`` assignment
  (read in the text, not from a variable: ``$X`` is not known until it runs);
- every word of the text (an option's value after ``=`` too) that names a
  repository as it is (a directory holding a ``.git``, or a bare one): the
  source of a ``cp -r`` or ``ln -s`` whose copy the command then opens;
- with ``nested``, every repository beneath the working directory (a ``.git``
  directory or file, submodules and nested checkouts alike), found by a walk of
  at most :data:`MAX_SCANNED_DIRS` directories that follows no link: what a
  script or a loop may reach without naming it.

A repository outside the working directory that the text does not name (a
path in a variable, a script's own ``cd``, one unpacked from an archive, the
repositories nested inside a directory ``cp -r`` copies) is not found: the sandbox confines
such a command (:mod:`.sandbox`); with it off, the user approves each command.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .commands import Command, analyse

#: directories a nested-repository walk opens at most (then it stops)
MAX_SCANNED_DIRS = 5_000
#: places a command's text names for git, at most (the rest are not looked at)
MAX_NAMED = 64
#: git's global options that take a value as the next word
_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path",
                     "--config-env", "--super-prefix"})  # fmt: skip
#: programs that run what they start in another directory, with their options for
#: it: ``env -C DIR git diff`` opens DIR's repository as ``cd DIR && git diff`` does
CHDIR_OPTIONS: dict[str, tuple[str, str]] = {
    "env": ("-C", "--chdir"),
    "sudo": ("-D", "--chdir"),
    "make": ("-C", "--directory"),
    "gmake": ("-C", "--directory"),
    "unshare": ("-w", "--wd"),
    "nsenter": ("-w", "--wd"),
}


@dataclass(frozen=True)
class Repository:
    """Where git finds a repository: ``where`` is a directory it looks from (it
    walks up to the nearest ``.git``), or, with ``git_dir``, the git directory
    itself, named explicitly."""

    where: Path
    git_dir: bool = False


def repositories(working_dir: Path, command: str | None, *, nested: bool) -> list[Repository]:
    """The repositories a command run in ``working_dir`` may open (the module's
    docstring says which), the working directory's first, each once."""
    wd = working_dir.resolve()
    found = [Repository(wd)]
    if command:
        found += named_in(command, wd)
    if nested:
        found += [Repository(top) for top in nested_tops(wd)]
    return list(dict.fromkeys(found))


def named_in(command: str, wd: Path) -> list[Repository]:
    """The places ``command``'s text names for git (see the module's docstring)."""
    bases = [wd]
    found: list[Repository] = []
    for part in analyse(command).commands:
        if len(found) >= MAX_NAMED:
            break
        words = [w for w, dyn in zip(part.argv[1:], part.dynamic[1:], strict=False) if not dyn]
        if part.program in ("cd", "pushd") or part.program in CHDIR_OPTIONS:
            targets = _chdir_targets(part.program, words)
            moved = [_at(base, t) for base in bases for t in targets]
            bases += moved
            found += [Repository(p) for p in moved]
        elif part.program == "git":
            found += _git_places(part, words, bases)
        for assigned in _git_dirs_assigned([*part.assignments, *words]):
            found += [Repository(_at(base, assigned), git_dir=True) for base in bases]
        found += _repositories_named(words, bases)
    return found[:MAX_NAMED]


def _repositories_named(words: list[str], bases: list[Path]) -> list[Repository]:
    """The repositories ``words`` name as they are, from each of ``bases``: a
    directory holding a ``.git``, or a git directory itself (a bare repository).
    Why: ``cp -r ../other copy`` or ``ln -s ../other l`` makes a repository whose
    config is ``other``'s, and ``copy`` does not exist before the command runs."""
    found = []
    for word in words:
        value = word.partition("=")[2] if word.startswith("--") else word
        if not value or value.startswith("-"):
            continue
        for base in bases:
            path = _at(base, value)
            with contextlib.suppress(OSError):  # a name too long, a directory not searchable
                if (path / ".git").exists():
                    found.append(Repository(path))
                elif (path / "HEAD").is_file() and (path / "objects").is_dir():
                    found.append(Repository(path, git_dir=True))
    return found


def _git_dirs_assigned(words: list[str]) -> list[str]:
    """Where ``GIT_DIR=`` assignments among ``words`` point (before a command, or as
    ``env``'s or ``export``'s word), each word whole: a path with a space is one."""
    return [w.split("=", 1)[1] for w in words if w.startswith("GIT_DIR=") and len(w) > 8]


def _chdir_targets(program: str, words: list[str]) -> list[str]:
    """Where ``program`` (``cd``, or one of :data:`CHDIR_OPTIONS`) moves what it
    runs to, as its ``words`` say."""
    if program not in CHDIR_OPTIONS:
        return [w for w in words if not w.startswith("-")][:1]
    short, long = CHDIR_OPTIONS[program]
    found = []
    for at, word in enumerate(words):
        following = words[at + 1] if at + 1 < len(words) else ""
        if word in (short, long):
            found.append(following)
        elif word.startswith(long + "="):
            found.append(word.partition("=")[2])
        elif word.startswith("-") and not word.startswith("--") and short[1] in word:
            rest = word[word.index(short[1]) + 1 :]  # -Cdir, or a cluster: -sC dir
            found.append(rest or following)
    return [target for target in found if target]


def _git_places(part: Command, words: list[str], bases: list[Path]) -> list[Repository]:
    """Where one git command looks for its repository, from each of ``bases``."""
    chain: list[str] = []
    git_dir = ""
    at = 0
    while at < len(words) and words[at].startswith("-"):
        word = words[at]
        value = words[at + 1] if word in _VALUED and at + 1 < len(words) else ""
        if word == "-C":
            chain.append(value)
        elif word == "--git-dir" or word.startswith("--git-dir="):
            git_dir = value or word.partition("=")[2]
        at += 2 if word in _VALUED else 1
    found = []
    for base in bases:
        start = base
        for step in chain:
            start = _at(start, step)
        found.append(Repository(_at(start, git_dir), True) if git_dir else Repository(start))
    return found


def _at(base: Path, given: str) -> Path:
    """``given`` (``~`` expanded) taken relative to ``base``, resolved."""
    path = base / os.path.expanduser(given)
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def nested_tops(wd: Path) -> list[Path]:
    """The top directories of the repositories beneath ``wd`` (not ``wd`` itself),
    found by a walk of at most :data:`MAX_SCANNED_DIRS` directories: it follows no
    link and does not look inside a ``.git`` directory."""
    tops: list[Path] = []
    todo = [wd]
    opened = 0
    while todo and opened < MAX_SCANNED_DIRS:
        directory = todo.pop()
        opened += 1
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.name == ".git":
                        if directory != wd:
                            tops.append(directory)
                    elif entry.is_dir(follow_symlinks=False):
                        todo.append(Path(entry.path))
        except OSError:
            continue
    return tops


#: how much of one config file is read for its includes
_MAX_CONFIG_BYTES = 1 << 20


def read_regular(path: Path) -> str | None:
    """``path``'s text if it is a regular file (None otherwise, or unreadable).
    Why: an include may name a FIFO (a command can make one in the working tree),
    and opening one to read waits for a writer: infai would hang before the command."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return file.read(_MAX_CONFIG_BYTES).decode(errors="replace")

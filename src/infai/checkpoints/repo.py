"""The repository's ignore rules above the working directory, as git finds them.

Model, in prose: git applies to a path the patterns of every ``.gitignore``
from the top of the repository down to the path's directory, then the
repository's ``info/exclude``, then (lowest) the user's global excludes file
(``core.excludesFile``, by default ``$XDG_CONFIG_HOME/git/ignore`` or
``~/.config/git/ignore``). A snapshot's walk reads the ``.gitignore`` files of
the working directory and below itself (:mod:`.walk`); this module supplies the
rest, whatever directory infai runs in:

* the repository is the nearest directory, from the working directory
  (symlinks resolved, as git's ``getcwd`` sees it) upwards, holding a
  ``.git`` — a directory, or a file ``gitdir: …`` (a worktree, a submodule),
  whose git dir may name a ``commondir`` holding ``info/exclude``. A submodule
  is a repository of its own: its superproject's rules do not apply in it.
  Outside any repository only the global excludes file is added (there is no
  repository whose rules could apply);
* its levels are, lowest precedence first: the global excludes file, the
  ``info/exclude``, then the ``.gitignore`` of the top and of each directory
  down to (not including) the working directory. Each is matched re-rooted
  (:class:`~.ignore.IgnoreRules`) since its patterns are relative to another
  directory than the walk's root;
* if the working directory, or a directory above it within the repository, is
  itself ignored by those levels, git ignores everything in it: so does the
  snapshot (every entry of the working directory is left out as ignored).

A repository nested below the working directory (a submodule, or a clone
inside the tree: a directory holding such a ``.git``) is its own too: the walk
enters it if the outer rules do not ignore it, and inside it applies the global
excludes file, its ``info/exclude`` and its own ``.gitignore`` files only
(:meth:`RepoRules.nested`), as if infai ran there.

Finding the repository and asking ``git config`` where the global file is
happen once, on a :class:`RepoRules`' first use (so never on a warm snapshot's
path). The pattern files themselves are ``stat``-ed at every snapshot (no
watcher sees them change) and read and compiled again only when a ``stat``
differs from the last read's or one was changed within
:data:`~.statcache.RACY_NS` of now (a rewrite in the same clock tick keeps its
``stat``: git's racy rule). A ``.gitignore`` that is a symlink is not followed
(git does not follow one either); the other two files are. Nothing under a
``.git`` is ever written.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .gitmatch import PatternList
from .ignore import IGNORE_FILE, IgnoreRules, compile_patterns
from .statcache import RACY_NS
from .walk import _fingerprint

#: how long ``git config`` may take to say where the global excludes file is
_GIT_TIMEOUT_S = 5.0
#: the real clock, for the racy rule of the pattern files (a seam for tests)
_now_ns = time.time_ns

_StatKey = tuple[int, int, int, int, int]


def _default_global() -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg else Path.home() / ".config"
    return base / "git" / "ignore"


def global_excludes(workdir: str, top: str | None = None) -> Path:
    """The user's global excludes file: ``core.excludesFile`` as git resolves it
    for ``workdir`` (``~`` expanded; a relative path is relative to the
    repository's ``top``, where git runs, else to ``workdir``), else git's
    default path (also when git is not installed)."""
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
    return Path(top or workdir, value)  # (an absolute value stands alone)


def _git_dir(top: str) -> Path | None:
    """The git dir of a repository whose top is ``top``: its ``.git``
    directory, or where its ``.git`` file (``gitdir: PATH``, relative to
    ``top``) points; ``None`` if ``top`` holds no such ``.git``."""
    dotgit = os.path.join(top, ".git")
    try:
        st = os.stat(dotgit)
        if stat.S_ISDIR(st.st_mode):
            return Path(dotgit)
        with open(dotgit, "rb") as f:
            text = f.read(4096).decode("utf-8", "surrogateescape")
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    return Path(top, text[len("gitdir:") :].strip())


def _info_exclude(git_dir: Path) -> Path:
    """``info/exclude`` of a git dir: in its ``commondir`` if it names one (a
    worktree's git dir does)."""
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir / "info" / "exclude"
    return Path(git_dir, common) / "info" / "exclude"


@dataclass(frozen=True, slots=True)
class Repository:
    """Where the working directory sits in its repository."""

    top: str  #: the repository's top (symlinks resolved)
    rel: str  #: the working directory relative to ``top``: ``""`` or ``"a/b/"``
    info_exclude: Path


def find_repository(workdir: str) -> Repository | None:
    """The repository ``workdir`` is in (see the module), ``None`` outside one."""
    real = os.path.realpath(workdir)
    at = real
    while True:
        git_dir = _git_dir(at)
        if git_dir is not None:
            rel = os.path.relpath(real, at)
            rel = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            return Repository(at, rel, _info_exclude(git_dir))
        up = os.path.dirname(at)
        if up == at:
            return None
        at = up


@dataclass(frozen=True, slots=True)
class PatternFile:
    """One pattern file of the repository's levels."""

    path: Path
    #: the directory its patterns are relative to, from the top: "" or "a/"
    base: str
    #: a ``.gitignore`` (in the tree: a symlink is not followed)
    in_tree: bool


def pattern_files(workdir: str) -> tuple[list[PatternFile], str]:
    """The repository's pattern files, lowest precedence first, and the working
    directory's path relative to the top (``""`` outside a repository)."""
    repo = find_repository(workdir)
    if repo is None:
        return [PatternFile(global_excludes(workdir), "", False)], ""
    files = [
        PatternFile(global_excludes(workdir, repo.top), "", False),
        PatternFile(repo.info_exclude, "", False),
    ]
    parts = repo.rel.split("/")[:-1]
    for n in range(len(parts)):  # the top and each directory down to the working one
        base = "".join(part + "/" for part in parts[:n])
        files.append(PatternFile(Path(repo.top, base, IGNORE_FILE), base, True))
    return files, repo.rel


def _stat_key(file: PatternFile) -> _StatKey | None:
    """What says a pattern file is unchanged: (dev, inode, size, mtime, ctime),
    ``None`` if it cannot be read (or is a ``.gitignore`` that is no regular file)."""
    try:
        st = os.lstat(file.path) if file.in_tree else os.stat(file.path)
    except OSError:
        return None
    if file.in_tree and not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read_patterns(files: list[PatternFile]) -> list[bytes]:
    """Their bytes (``b""`` for a missing or unreadable one, or an in-tree one
    that is not a regular file: git skips those too)."""
    out = []
    for file in files:
        try:
            out.append(_read_in_tree(file.path) if file.in_tree else file.path.read_bytes())
        except OSError:
            out.append(b"")
    return out


def _read_in_tree(path: Path) -> bytes:
    """A ``.gitignore``'s bytes, a symlink or other non-regular file not followed."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        parts = []
        while chunk := os.read(fd, 1 << 16):
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def _inside_ignored(levels: list[tuple[str, PatternList]], rel: str) -> bool:
    """Whether a directory from the top down to the working one (``rel``) is
    ignored by the levels ((base, spec), lowest precedence first) that apply
    to it: those of the directories above it."""
    parts = rel.split("/")[:-1]
    for n in range(1, len(parts) + 1):
        path = "/".join(parts[:n])
        for base, spec in reversed(levels):
            if len(base) > len(path) or not path.startswith(base):
                continue  # a level of this directory or one below: not for it
            decided = spec.decide(path[len(base) :], True)
            if decided is not None:
                if decided:
                    return True
                break
    return False


def build_rules(files: list[PatternFile], found: list[bytes], rel: str) -> tuple[IgnoreRules, str]:
    """The root's rules from the pattern files' bytes, and their fingerprint
    (``""`` when all are empty)."""
    levels: list[tuple[str, PatternList]] = []
    fp = ""
    for n, (file, data) in enumerate(zip(files, found, strict=True)):
        spec = compile_patterns(data)
        if spec:
            levels.append((file.base, spec))
            fp = _fingerprint(fp, f"repo{n}:{file.base}:{rel}", data)
    if not levels:
        return IgnoreRules(), ""
    everything = _inside_ignored(levels, rel)
    if everything:
        fp = _fingerprint(fp, "everything", b"")
    bases = [(rel[len(base) :], spec) for base, spec in levels]
    return IgnoreRules.rerooted(bases, everything), fp


class RepoRules:
    """The repository's rules for one working directory, kept between snapshots
    (read again only when a pattern file's ``stat`` changes: see the module)."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self._files: list[PatternFile] | None = None
        self._rel = ""
        self._keys: list[_StatKey | None] = []
        self._compiled: tuple[list[bytes], IgnoreRules, str] | None = None
        #: the global excludes file's bytes and patterns, for nested repositories
        self._global: tuple[bytes, PatternList] = (b"", PatternList([]))
        #: nested repositories' ``info/exclude`` bytes → their patterns
        self._nested_specs: dict[bytes, PatternList] = {}
        #: the nested ``info/exclude`` files the walks read, with their stat then
        self._nested_keys: dict[Path, _StatKey | None] = {}

    @property
    def files(self) -> list[PatternFile]:
        """The pattern files (found on first use)."""
        if self._files is None:
            self._files, self._rel = pattern_files(self.workdir)
        return self._files

    def rules(self) -> tuple[IgnoreRules, str]:
        """The root's rules before its own ``.gitignore``, and their fingerprint."""
        files = self.files
        keys = [_stat_key(file) for file in files]
        racy = _now_ns() - RACY_NS
        if (
            self._compiled is not None
            and keys == self._keys
            and all(key is None or max(key[3], key[4]) < racy for key in keys)
        ):
            return self._compiled[1], self._compiled[2]
        self._keys = keys
        found = read_patterns(files)
        if self._compiled is not None and self._compiled[0] == found:
            return self._compiled[1], self._compiled[2]  # compiled once
        rules, fp = build_rules(files, found, self._rel)
        self._compiled = (found, rules, fp)
        self._global = (found[0], compile_patterns(found[0]))
        return rules, fp

    def nested(self, path: str, prefix: str) -> tuple[IgnoreRules, str] | None:
        """The rules a nested repository at ``path`` (``prefix`` in the walk)
        starts from: the global excludes file and its own ``info/exclude``
        (read at each visit, its ``stat`` kept for :meth:`nested_changed`);
        ``None`` if its ``.git`` is no repository's. Its superproject's rules
        do not apply in it."""
        git_dir = _git_dir(path)
        if git_dir is None:
            return None
        exclude = _info_exclude(git_dir)
        self._nested_keys[exclude] = _stat_key(PatternFile(exclude, "", False))
        try:
            data = exclude.read_bytes()
        except OSError:
            data = b""
        spec = self._nested_specs.get(data)
        if spec is None:
            if len(self._nested_specs) > 64:
                self._nested_specs.clear()
            spec = self._nested_specs[data] = compile_patterns(data)
        fp = _fingerprint("", f"nested:{prefix}", self._global[0] + b"\0" + data)
        bases = [("", level) for level in (self._global[1], spec) if level]
        return IgnoreRules.rerooted(bases, prefix=prefix), fp

    def nested_changed(self) -> bool:
        """Whether a nested repository's ``info/exclude`` read by an earlier walk
        changed since (its ``stat``, or changed within the racy window): no
        watcher sees a ``.git``, so the next walk must visit everything."""
        if not self._nested_keys:
            return False
        racy = _now_ns() - RACY_NS
        for path, was in self._nested_keys.items():
            key = _stat_key(PatternFile(path, "", False))
            if key != was or (key is not None and max(key[3], key[4]) >= racy):
                return True
        return False

    def forget_nested(self) -> None:
        """Before a walk that visits everything: it finds the nested ones again."""
        self._nested_keys.clear()

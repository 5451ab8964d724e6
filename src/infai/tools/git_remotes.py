"""Repositories a command's git reaches over the file transport, where no override applies.

For a remote that is a path or a ``file://`` URL (``git push ../other``, a
``git fetch`` of a remote whose ``url = ../other.git``, ``git archive
--remote=../other``, ``git clone /srv/x``) git starts the other side
(receive-pack, upload-pack, upload-archive) *here*, in that repository, and
clears the ``GIT_CONFIG_*`` variables for it (git's ``local_repo_env``): that
side runs the other repository's hooks (``pre-receive``…) and the programs its
own config names (``tar.<fmt>.command``, ``core.fsmonitor``), with none of
infai's overrides. :func:`reached` lists the local repositories a command may
reach so (:mod:`.git_hardening` judges them, and refuses the file transport to
an unconfined command where one would run a program):

- each remote's ``url`` and ``pushurl`` in the config of the repositories the
  command may open (:mod:`.git_repos`; included files too), and each URL a
  ``url.<url>.insteadOf`` there rewrites one to, a relative path taken from the
  repository's top and from the working directory;
- each word of a git command in the text (an option's value after ``=`` too)
  that names a local repository, from the working directory.

A path in a variable, or one a script computes, is not known before the command
runs and is not found: with the sandbox off, the user approves each command.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .commands import analyse

#: local repositories looked at, at most
MAX_REACHED = 32
#: a section header, and a remote's ``url``/``pushurl`` line, in a git config file
_SECTION = re.compile(r"^\s*\[([^\]]*)\]\s*(.*)$")
_REMOTE = re.compile(r'^\s*remote\s+"', re.I)
_REWRITE = re.compile(r'^\s*url\s+"((?:[^"\\]|\\.)*)"\s*$', re.I)
_URL = re.compile(r'^\s*(?:push)?url\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^#;]*?))\s*(?:[#;].*)?$', re.I)


def reached(configs: list[tuple[Path, str]], command: str | None, wd: Path) -> list[Path]:
    """The git directories of the local repositories the command may reach over
    the file transport (see the module's docstring), each once. ``configs``: for
    each repository it may open, its top directory and the text of each of its
    config files (includes too)."""
    found: list[Path] = []
    for top, text in configs:
        for url in remote_urls(text):
            found += [g for base in (top, wd) if (g := local_git_dir(url, base)) is not None]
    for word in _git_words(command or ""):
        if (g := local_git_dir(word, wd)) is not None:
            found.append(g)
    return list(dict.fromkeys(found))[:MAX_REACHED]


def remote_urls(config: str) -> list[str]:
    """The ``url`` and ``pushurl`` values of the ``[remote "…"]`` sections of a
    config file's text, and the URL of each ``[url "…"]`` section (what its
    ``insteadOf`` or ``pushInsteadOf`` rewrites a remote's URL to)."""
    urls = []
    in_remote = False
    for line in config.splitlines():
        if section := _SECTION.match(line):
            in_remote = bool(_REMOTE.match(section.group(1)))
            if rewrite := _REWRITE.match(section.group(1)):
                urls.append(re.sub(r"\\(.)", r"\1", rewrite.group(1)))
            line = section.group(2)
        if in_remote and (url := _URL.match(line)):
            value = url.group(1) if url.group(1) is not None else url.group(2)
            if value:
                urls.append(value)
    return urls


def local_git_dir(url: str, base: Path) -> Path | None:
    """The git directory a local ``url`` (a path, relative to ``base``, or a
    ``file://`` URL) names, as git's other side finds it (``X/.git``, ``X``,
    ``X.git``); None for another transport's URL or no repository there."""
    if url.startswith("file://"):
        path = url.removeprefix("file://")
    elif "://" in url or ("::" in url) or (":" in url.split("/", 1)[0]):
        return None  # https://…, a helper's x::…, scp-like host:path
    else:
        path = url
    if not path:
        return None
    where = base / os.path.expanduser(path)
    for candidate in (where / ".git", where, Path(f"{where}.git")):
        try:  # (a name too long, a directory not searchable: git cannot reach it either)
            if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
                return candidate.resolve()
        except (OSError, RuntimeError):
            return None
    return None


def _git_words(command: str) -> list[str]:
    """The words of the git commands in ``command``'s text (an option's value
    after ``=`` as a word of its own), known before it runs."""
    words: list[str] = []
    for part in analyse(command).commands:
        if part.program != "git":
            continue
        for word, dynamic in zip(part.argv[1:], part.dynamic[1:], strict=False):
            if not dynamic:
                words.append(word.partition("=")[2] if word.startswith("--") else word)
    return [w for w in words if w and not w.startswith("-")]

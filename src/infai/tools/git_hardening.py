"""What git may not take from a repository a command runs in: code it would run.

Every shell command gets these settings through ``GIT_CONFIG_COUNT`` /
``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n`` (which outrank every config
file), so a repository's own ``.git/config`` cannot make ``git status`` run a
program: no fsmonitor, hooks, pager, editor, ssh command, credential helper or
signing program of its choosing. Drivers are named per repository
(``filter.<name>.smudge``, ``diff.<name>.textconv``…), so they cannot be
listed in advance: :func:`driver_overrides` reads the names the repository's
own config sets (never running it) and empties them. Used by
:mod:`.sandbox`, which builds each command's environment.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

#: git settings no command's git may take from a repository: code it would run
GIT_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),  # not a directory: no hook is ever found
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.sshCommand", "ssh"),
    ("core.askPass", ""),
    ("core.gitProxy", ""),
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),  # empty resets the list of helpers
    ("uploadpack.packObjectsHook", ""),
    ("protocol.ext.allow", "never"),
    ("safe.bareRepository", "explicit"),  # a bare repository hidden in a checkout
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gpg.program", "gpg"),
    ("gpg.ssh.program", "ssh-keygen"),
    ("gpg.x509.program", "gpgsm"),
    ("gpg.ssh.defaultKeyCommand", ""),
)
GIT_ENV: dict[str, str] = {"GIT_PAGER": "cat", "PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
#: settings named per driver that run a program; emptied where a repository sets
#: them (git then fails instead of running it)
GIT_DRIVER_KEYS = {
    "filter": ("clean", "smudge", "process"),
    "diff": ("command", "textconv"),
    "merge": ("driver",),
}


def driver_overrides(working_dir: Path | None, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """Empty values for the program-running driver settings (and ``diff.external``)
    that the repository seen from ``working_dir`` configures itself (its local or
    worktree config, includes followed; the user's global and system settings,
    git-lfs's filter say, are the user's own and kept). Names only are read
    (``git config`` runs no configured code); no repository, or a config file
    that mentions no driver or include at all: none, and no git is started."""
    if working_dir is None or not _may_name_drivers(working_dir):
        return []
    try:
        done = subprocess.run(
            ["git", "config", "--list", "--name-only", "--show-scope", "--includes", "-z"],
            cwd=working_dir,
            capture_output=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
            env={**env, "GIT_CONFIG_COUNT": "0"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    fields = done.stdout.split(b"\0")
    found = []
    for scope, raw in zip(fields[::2], fields[1::2], strict=False):
        if scope not in (b"local", b"worktree"):
            continue
        name = raw.decode(errors="replace")
        section, _, rest = name.partition(".")
        _, _, key = rest.rpartition(".")
        section, key = section.lower(), key.lower()
        if name.lower() == "diff.external" or (
            "." in rest and key in GIT_DRIVER_KEYS.get(section, ())
        ):
            found.append((name, ""))
    return found


def _may_name_drivers(path: Path) -> bool:
    """Whether the repository holding ``path`` may configure a driver: its config
    mentions one (or an include), or cannot be read cheaply (a ``.git`` file of a
    worktree, an unreadable config). False outside any repository."""
    here = path.resolve()
    for parent in (here, *here.parents):
        dot_git = parent / ".git"
        if dot_git.is_dir():
            try:
                text = b"".join(
                    f.read_bytes() for f in dot_git.glob("config*") if f.is_file()
                ).lower()
            except OSError:
                return True
            return any(word in text for word in (b"filter", b"diff", b"merge", b"include"))
        if dot_git.exists():
            return True
    return False

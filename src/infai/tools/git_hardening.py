"""What git may not take from a repository a command runs in: code it would run.

Every shell command gets these settings through ``GIT_CONFIG_COUNT`` /
``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n`` (which outrank every config
file), so a repository's own ``.git/config`` cannot make ``git status`` run a
program: no fsmonitor, hooks, pager, editor, ssh command, credential helper or
signing program of its choosing. Drivers are named per repository
(``filter.<name>.smudge``, ``diff.<name>.textconv``…), and so are the
programs a fetch or push runs on the other side (``remote.<name>.uploadpack``
and ``receivepack``: for a local remote they run *here*), a submodule's
``update = !command`` and a shell alias (``alias.<name> = !command``, which
turns an allowed ``git st`` into any command); none can be listed in advance:
:func:`driver_overrides` reads what the repository's own config sets (never
running it) and overrides each (a remote's program cannot be overridden, git
keeps the first value: the file transport is refused instead). Used by
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
#: per-remote settings naming the program a fetch or push runs on the other side;
#: for a local remote (a path or ``file://``) that side is this machine. git takes
#: the *first* value it reads, the repository's, so a later override is ignored:
#: where a repository sets one, fetching and pushing over the file transport is
#: refused instead (``protocol.file.allow``); over ssh it runs on the remote host
REMOTE_PROGRAM_KEYS = ("uploadpack", "receivepack")
FILE_TRANSPORT_REFUSED = ("protocol.file.allow", "never")
#: per-name settings that run a shell command only when their value starts with
#: ``!``: such a value is replaced (a submodule is checked out; an alias is empty,
#: so git refuses it instead of running it)
GIT_SHELL_VALUES = {("submodule", "update"): "checkout", ("alias", ""): ""}
#: words whose presence in a repository's config files means it may set one of
#: the settings above (absent: no git is started to list them)
_MENTIONS: tuple[bytes, ...] = (
    *(b"filter", b"diff", b"merge", b"include"),
    *(b"uploadpack", b"receivepack", b"alias", b"submodule"),
)


def driver_overrides(working_dir: Path | None, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """Overrides for the program-running settings (see the module's docstring) that
    the repository seen from ``working_dir`` configures itself (its local or
    worktree config, includes followed; the user's global and system settings,
    git-lfs's filter say, are the user's own and kept). ``git config`` only lists
    them (it runs no configured code); no repository, or config files that
    mention none of them: no overrides, and no git is started."""
    if working_dir is None or not _may_name_drivers(working_dir):
        return []
    try:
        done = subprocess.run(
            ["git", "config", "--list", "--show-scope", "--includes", "-z"],
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
        name, _, value = raw.decode(errors="replace").partition("\n")
        override = _override(name, value)
        if override is not None and override not in found:
            found.append(override)
    return found


def _override(name: str, value: str) -> tuple[str, str] | None:
    """The setting that neutralises a repository's own ``name = value``, or None."""
    section, _, rest = name.partition(".")
    subsection, _, key = rest.rpartition(".")
    section, key = section.lower(), key.lower()
    if name.lower() == "diff.external" or (subsection and key in GIT_DRIVER_KEYS.get(section, ())):
        return (name, "")
    if section == "remote" and subsection and key in REMOTE_PROGRAM_KEYS:
        return FILE_TRANSPORT_REFUSED
    shell_key = (section, "" if section == "alias" else key)
    if shell_key in GIT_SHELL_VALUES and value.lstrip().startswith("!"):
        return (name, GIT_SHELL_VALUES[shell_key])
    return None


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
            return any(word in text for word in _MENTIONS)
        if dot_git.exists():
            return True
    return False

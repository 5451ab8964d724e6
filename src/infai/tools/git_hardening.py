"""What git may not take from a repository a command runs in: code it would run.

Every shell command gets these settings through ``GIT_CONFIG_COUNT`` /
``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n`` (which outrank every config
file), so a repository's own ``.git/config`` cannot make ``git status`` run a
program: no fsmonitor, hooks, pager, editor, ssh command, credential helper or
signing program of its choosing, nor a filter ``git add -p`` pipes its diff
through (``interactive.diffFilter``). Drivers are named per repository
(``filter.<name>.smudge``, ``diff.<name>.textconv``…, a trailer's
``trailer.<name>.cmd`` that ``git commit --trailer`` runs, ``git send-email``'s
``sendemail.<identity>.sendmailCmd``, ``toCmd``, ``ccCmd``), and so are the
programs a fetch or push runs on the other side (``remote.<name>.uploadpack``
and ``receivepack``: for a local remote they run *here*), a submodule's
``update = !command`` and a shell alias (``alias.<name> = !command``, which
turns an allowed ``git st`` into any command); none can be listed in advance:
:func:`harden` reads what a repository's own config sets (never running
it) and overrides each (a remote's program cannot be overridden, git keeps the
first value: the file transport is refused instead), for every repository a
command may open (:mod:`.git_repos`: the working directory's, those its text
names, nested ones), and says where a
repository's own ``core.worktree`` moves git's work tree away from it, which
no override can undo. Used by :mod:`.sandbox`, which builds each command's
environment.

A config file that the repository's config includes (``include.path`` or
``includeIf.*.path``) is config as much as ``.git/config`` is, but it may sit in
the working tree (``path = ../.gitconfig.project``), an ordinary file a command
or a write tool could change, and the user's own ``git status`` would then run
its ``core.fsmonitor``, unconfined: :func:`included_config_files` names such
files so that the sandbox mounts them read-only and the write tools guard them
as they guard ``.git/``.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .git_remotes import reached
from .git_repos import Repository, read_regular, repositories

#: git settings no command's git may take from a repository: code it would run
GIT_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),  # not a directory: no hook is ever found
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.sshCommand", "ssh"),
    ("core.askPass", ""),
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
    ("interactive.diffFilter", "cat"),  # git add -p pipes its diff through it
)
#: ``GIT_PROXY_COMMAND`` set, even empty, is taken before any ``core.gitProxy``; an
#: override of that setting would come too late (git keeps its *first* value, the
#: repository's), so the git:// proxy is refused through the environment
GIT_ENV: dict[str, str] = {
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PROXY_COMMAND": "",
}
#: settings named per driver that run a program; emptied where a repository sets
#: them (git then fails instead of running it)
GIT_DRIVER_KEYS = {
    "filter": ("clean", "smudge", "process"),
    "diff": ("command", "textconv"),
    "merge": ("driver",),
    "tar": ("command",),  # git archive --format=<name>
    "difftool": ("cmd", "path"),
    "mergetool": ("cmd", "path"),
    "man": ("cmd", "path"),  # git help, with man.viewer naming the tool
    "browser": ("cmd", "path"),  # git help --web, git web--browse
    "guitool": ("cmd",),
    "trailer": ("cmd", "command"),  # git commit --trailer, git interpret-trailers
}
#: settings of no driver that run a program, emptied where a repository sets them
#: (``git diff``; ``git imap-send`` pipes through ``imap.tunnel``; ``git instaweb``
#: starts ``instaweb.httpd``, its apache loads modules from ``modulePath``; a line
#: break in ``rebase.instructionFormat`` (``%n``, ``%b``) put an ``exec`` line in
#: ``git rebase -i``'s todo list, run as it stands: empty, it is git's ``%s``)
GIT_PROGRAM_KEYS = (
    *("diff.external", "imap.tunnel", "instaweb.httpd", "instaweb.modulepath"),
    "rebase.instructionformat",
)
#: per-remote settings naming the program a fetch or push runs on the other side;
#: for a local remote (a path or ``file://``) that side is this machine. git takes
#: the *first* value it reads, the repository's, so a later override is ignored:
#: where a repository sets one, fetching and pushing over the file transport is
#: refused instead (``protocol.file.allow``); over ssh it runs on the remote host
REMOTE_PROGRAM_KEYS = ("uploadpack", "receivepack")
FILE_TRANSPORT_REFUSED = ("protocol.file.allow", "never")
#: what a result adds when git then says "transport 'file' not allowed": why, and
#: what the user can do (git's own message names neither)
FILE_TRANSPORT_NOTE = (
    "infai: git's file transport was refused for this command: a local repository it "
    "reaches runs a program of its own (a receive-side hook, an archiver or another "
    "driver in its config) on git's other side, where infai's overrides do not reach; "
    "run the command yourself if you trust that repository"
)
#: the hooks the other side of a local push runs in its own repository (and the
#: ``git gc --auto`` it may start), and the settings of that repository that run a
#: program there, beside those :func:`_override` names: none of infai's overrides
#: reaches that side (:mod:`.git_remotes`), so the file transport is refused instead
#: to an unconfined command that may reach a repository with one
OTHER_SIDE_HOOKS = (
    *("pre-receive", "update", "post-receive", "post-update", "push-to-checkout"),
    *("reference-transaction", "proc-receive", "pre-auto-gc"),
)
OTHER_SIDE_KEYS = frozenset(
    {"core.fsmonitor", "core.alternaterefscommand", "gpg.program", "core.hookspath"}
)
#: settings that name a program git finds itself, a path when the name has a slash:
#: ``remote.<name>.vcs`` runs ``git-remote-<vcs>`` (``x/../../evil`` relative to the
#: working directory); emptied where a repository's value has one
NO_PATH_KEYS = frozenset({("remote", "vcs")})
#: ``git difftool``/``mergetool`` *source* the file named as their tool in git's
#: ``mergetools`` directory (``../../../tmp/x``, with a slash, leads anywhere): where
#: a repository's value has a slash, the tool is :data:`REFUSED_TOOL`, whose command
#: is ``false`` (emptied, git would guess a tool and might start an editor)
TOOL_KEYS = frozenset(
    {("diff", "tool"), ("diff", "guitool"), ("merge", "tool"), ("merge", "guitool")}
)
REFUSED_TOOL = "infai-refused"
#: settings that make git write a file of the repository's choosing: libcurl's
#: cookie jar (``http.cookieFile`` with ``http.saveCookies``, each per URL too:
#: ``http.<url>.cookieFile``) replaced any file with the cookies a server set;
#: ``git format-patch`` wrote its patches (``format.suffix``: ``.fish``) into any
#: directory (a shell's ``conf.d``, which runs them);
#: where a repository sets one, that name is overridden with these values (``.``:
#: where git writes by default)
WRITTEN_FILE_KEYS = {
    ("http", "cookiefile"): "",
    ("http", "savecookies"): "false",
    ("format", "outputdirectory"): ".",
}
#: ``git send-email``'s settings that run a program (each also per identity,
#: ``sendemail.<id>.toCmd``, which outranks the plain one, so it cannot be listed in
#: advance): where a repository sets one, it is set to ``false`` (send-email then
#: fails). ``smtpServer`` runs a program when its value is an absolute path:
#: there the same identity's ``sendmailCmd``, which send-email takes first, is
#: ``false`` instead
SENDEMAIL_PROGRAM_KEYS = ("sendmailcmd", "tocmd", "cccmd", "headercmd")
#: per-name settings that run a shell command only when their value starts with
#: ``!``: such a value is replaced (a submodule is checked out; an alias is empty,
#: so git refuses it instead of running it)
GIT_SHELL_VALUES = {("submodule", "update"): "checkout", ("alias", ""): ""}
#: words whose presence in a repository's config files means it may set one of
#: the settings above (absent: no git is started to list them)
_MENTIONS: tuple[bytes, ...] = (
    *(b"filter", b"diff", b"merge", b"include", b"tar", b"man", b"browser", b"guitool", b"imap"),
    *(b"instaweb", b"vcs", b"tool", b"cookie", b"instructionformat", b"outputdirectory"),
    *(b"uploadpack", b"receivepack", b"alias", b"submodule", b"worktree", b"trailer"),
    b"sendemail",
)


class WorkTreeMoved(Exception):
    """A repository's own config moves its work tree away from it (the message
    says which and where): unconfined, no command is run there."""


@dataclass(frozen=True)
class Hardening:
    """What the repositories a command may open (:mod:`.git_repos`) call for:
    ``overrides`` for their program-running settings, and ``moved``, why git
    would work on files outside such a repository ("" when none moves them)."""

    overrides: list[tuple[str, str]]
    moved: str = ""


def harden(
    working_dir: Path | None,
    env: Mapping[str, str],
    *,
    command: str | None = None,
    nested: bool = False,
    local_remotes: bool = False,
) -> Hardening:
    """Overrides for the program-running settings (see the module's docstring)
    that each repository ``command`` may open configures itself (its local or
    worktree config, includes followed; the user's global and system settings,
    git-lfs's filter say, are the user's own and kept), for the repositories its
    text names and, with ``nested``, those beneath ``working_dir``; and
    the first of them whose own ``core.worktree`` (``git clean``'s and ``git
    checkout``'s tree) is not its own top directory: such a setting points git
    at ``$HOME`` or anywhere, and no override moves it back (git reads it from
    the repository's file alone), so an unconfined command is refused there.
    With ``local_remotes``, the file transport is refused where the command may
    reach a local repository that would run a program (:func:`_runs_programs`)."""
    if working_dir is None:
        return Hardening([])
    found: list[tuple[str, str]] = []
    moved = ""
    repos = repositories(working_dir, command, nested=nested)
    git_dirs: list[Path] = []
    for repo in repos:
        config = _local_config(repo, env)
        for name, value in config:
            found += [o for o in _override(name, value) if o not in found]
        with contextlib.suppress(OSError):  # (see _local_config)
            if not repo.git_dir and not moved:
                moved = _moved_work_tree(repo.where, config)
            if git_dir := repo.where if repo.git_dir else _git_dir(repo.where):
                git_dirs.append(git_dir)
    if local_remotes and FILE_TRANSPORT_REFUSED not in found:
        configs = [(_top(g), text) for g in git_dirs for text in _config_texts(g)]
        others = reached(configs, command, working_dir.resolve())
        if any(_runs_programs(other, env) for other in others):
            found.append(FILE_TRANSPORT_REFUSED)
    return Hardening(found, moved)


def _top(git_dir: Path) -> Path:
    """The top directory of the repository of ``git_dir`` (itself, when bare)."""
    return git_dir.parent if git_dir.name == ".git" else git_dir


def _config_texts(git_dir: Path) -> list[str]:
    """The text of each config file of the repository of ``git_dir``: its (common)
    ``config``, ``config.worktree`` and what they include, read as text."""
    todo = [_common_dir(git_dir) / "config", git_dir / "config.worktree"]
    seen: set[Path] = set()
    texts = []
    while todo and len(seen) < _MAX_INCLUDED:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.add(path)
        text = read_regular(path)
        if text is not None:
            texts.append(text)
            todo += _includes(path)
    return texts


def _runs_programs(git_dir: Path, env: Mapping[str, str]) -> bool:
    """Whether the other side of the file transport, run in the repository of
    ``git_dir`` with none of infai's overrides, may run a program of its choosing:
    an executable hook of :data:`OTHER_SIDE_HOOKS` in its ``hooks/``, a
    ``core.hooksPath`` of its own (hooks elsewhere), or a setting that names a program."""
    config = _config_files([git_dir / "config"], {**env, "GIT_CONFIG_COUNT": "0"})
    keys = {name.lower() for name, value in config if value.lower() not in _FALSE_OR_TRUE}
    if keys & OTHER_SIDE_KEYS or any(_override(name, value) for name, value in config):
        return True
    hooks = git_dir / "hooks"
    return any(os.access(hooks / name, os.X_OK) for name in OTHER_SIDE_HOOKS)


#: values of :data:`OTHER_SIDE_KEYS` that name no program (``core.fsmonitor = false``)
_FALSE_OR_TRUE = frozenset({"", "false", "true", "no", "yes", "off", "on", "0", "1"})


def _local_config(repo: Repository, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The ``(name, value)`` settings of ``repo``'s local and worktree config,
    includes followed (:func:`_config_files`; ``git config --file`` reads each,
    running nothing a config names); none where its config files mention nothing
    of interest."""
    try:  # a path too long to name, or in a directory not searchable: git cannot either
        git_dir = repo.where if repo.git_dir else _git_dir(repo.where)
        if not repo.where.is_dir() or git_dir is None or not _may_name_drivers(git_dir):
            return []
    except OSError:
        return []
    files = [_common_dir(git_dir) / "config", git_dir / "config.worktree"]
    return _config_files(files, {**env, "GIT_CONFIG_COUNT": "0"})


def _config_files(files: list[Path], env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The settings of ``files`` and of every file they include, whether an
    ``includeIf`` condition holds now or not: an ``onbranch:x`` (or
    ``hasconfig:remote.*.url:…``) include becomes active once the command checks
    out ``x`` (adds that remote), and git then runs the driver it names. Regular
    files only: git waits on a FIFO (a command can make one), and a listing that
    timed out would name no driver to override."""
    seen: set[Path] = set()
    todo = list(files)
    found: list[tuple[str, str]] = []
    while todo and len(seen) < _MAX_INCLUDED:
        path = todo.pop(0).resolve()
        if path in seen:
            continue
        seen.add(path)
        if not path.is_file():
            continue
        listed = _git_config(["--list", "-z", "--file", str(path)], env)
        for raw in listed.split(b"\0"):
            if raw:
                name, _, value = raw.decode(errors="replace").partition("\n")
                found.append((name, value))
        todo += _includes(path)
    return found


def _common_dir(git_dir: Path) -> Path:
    """Where a worktree's shared config lives (its ``commondir``), or ``git_dir``."""
    common = read_regular(git_dir / "commondir")
    return (git_dir / common.strip()).resolve() if common else git_dir


def _git_config(args: list[str], env: Mapping[str, str]) -> bytes:
    """What ``git config ARGS`` prints (nothing where it fails). Run in ``/``: in a
    repository's directory git would look at the repository too (its ``.git``
    file, its ``commondir``), and a FIFO there keeps it waiting."""
    try:
        done = subprocess.run(
            ["git", "config", *args],
            cwd="/",
            capture_output=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired):
        return b""
    return done.stdout


def _moved_work_tree(where: Path, config: list[tuple[str, str]]) -> str:
    """Why the repository found from ``where`` works on files elsewhere: its last
    ``core.worktree`` resolves (relative to its git directory) to another directory
    than the one holding its ``.git``; "" when it does not (a submodule's points
    back at its own checkout)."""
    values = [value for name, value in config if name.lower() == "core.worktree"]
    dot_git, git_dir = _dot_git(where), _git_dir(where)
    if not values or dot_git is None or git_dir is None:
        return ""
    top = dot_git.parent.resolve()
    target = (git_dir / os.path.expanduser(values[-1])).resolve()
    if target == top:
        return ""
    return (
        f"the repository at {top} sets core.worktree = {values[-1]} in its own git config, "
        f"so git would clean, check out or reset files in {target} instead; infai runs no "
        "command there unconfined (remove it: git config --unset core.worktree)"
    )


def _override(name: str, value: str) -> list[tuple[str, str]]:
    """The settings that neutralise a repository's own ``name = value`` (none
    where it runs nothing)."""
    section, _, rest = name.partition(".")
    subsection, _, key = rest.rpartition(".")
    section, key = section.lower(), key.lower()
    if name.lower() in GIT_PROGRAM_KEYS or (subsection and key in GIT_DRIVER_KEYS.get(section, ())):
        return [(name, "")]
    if section == "remote" and subsection and key in REMOTE_PROGRAM_KEYS:
        return [FILE_TRANSPORT_REFUSED]
    if (section, key) in NO_PATH_KEYS and "/" in value:
        return [(name, "")]
    if (section, key) in TOOL_KEYS and "/" in value:
        return [(name, REFUSED_TOOL), (f"mergetool.{REFUSED_TOOL}.cmd", "false")]
    if (section, key) in WRITTEN_FILE_KEYS:
        return [(name, WRITTEN_FILE_KEYS[section, key])]
    if section == "sendemail":
        return _sendemail_override(name, key, value)
    shell_key = (section, "" if section == "alias" else key)
    if shell_key in GIT_SHELL_VALUES and value.lstrip().startswith("!"):
        return [(name, GIT_SHELL_VALUES[shell_key])]
    return []


def _sendemail_override(name: str, key: str, value: str) -> list[tuple[str, str]]:
    """What neutralises ``git send-email``'s setting ``name`` (its ``key``) = ``value``."""
    if key in SENDEMAIL_PROGRAM_KEYS:
        return [(name, "false")]
    if key == "smtpserver" and value.startswith("/"):
        return [(f"{name.rpartition('.')[0]}.sendmailCmd", "false")]
    return []


def _may_name_drivers(git_dir: Path) -> bool:
    """Whether the repository of ``git_dir`` may configure a driver (or move its
    work tree): its config files (a linked worktree's common one too) mention
    one, or an include, or cannot be read."""
    dirs = [git_dir, _common_dir(git_dir)]
    try:
        text = b"".join(
            f.read_bytes() for d in dirs if d.is_dir() for f in d.glob("config*") if f.is_file()
        ).lower()
    except OSError:
        return True
    return any(word in text for word in _MENTIONS)


def _dot_git(path: Path) -> Path | None:
    """The nearest ``.git`` (a directory, or a worktree's or submodule's file) at
    ``path`` or above it, or None outside any repository."""
    for parent in (path, *path.parents):
        dot_git = parent / ".git"
        if dot_git.exists():
            return dot_git
    return None


#: a section header, and an include's ``path = …`` line, in a git config file
_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"(?:[^"\\]|\\.)*")?\s*\]\s*(.*)$')
_PATH_KEY = re.compile(r'^\s*path\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^#;]*?))\s*(?:[#;].*)?$', re.I)
#: how many config files an include chain is followed through
_MAX_INCLUDED = 32


def included_config_files(working_dir: Path) -> tuple[Path, ...]:
    """The files the repository seen from ``working_dir`` includes as config, from
    its ``.git/config`` (and ``config.worktree``) and, in turn, from those files;
    each resolved (``~/`` is the home directory, a relative path is relative to
    the including file's directory), whether it exists yet or not. Conditions of
    ``includeIf`` are not judged: a file inactive now may be active after a
    checkout. Read as text, never by running git; none outside a repository."""
    git_dir = _git_dir(working_dir.resolve())
    if git_dir is None:
        return ()
    todo = [git_dir / "config", git_dir / "config.worktree"]
    if (git_dir / "commondir").exists():
        todo.append(_common_dir(git_dir) / "config")
    seen: set[Path] = set(todo)
    found: list[Path] = []
    while todo and len(found) < _MAX_INCLUDED:
        for target in _includes(todo.pop(0)):
            if target not in seen:
                seen.add(target)
                found.append(target)
                todo.append(target)
    return tuple(found)


def read_only_included_configs(wd: Path, roots: list[Path]) -> list[str]:
    """The git config files the repository includes that lie in a writable root
    (:func:`included_config_files`), to be mounted
    read-only; one not there yet is made empty (an empty config is no config to
    git), its directories first, or a command could create it (and a FIFO there
    would take what a command writes into it even once mounted)."""
    kept = []
    for path in included_config_files(wd):
        if not any(r in path.parents for r in roots):
            continue
        if not path.exists() and not path.is_symlink():
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)  # beneath the root only
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
        if path.exists():
            kept.append(str(path))
    return kept


def _git_dir(path: Path) -> Path | None:
    """The git directory of the repository holding ``path`` (a worktree's own, for
    a ``.git`` file), or None outside any."""
    dot_git = _dot_git(path)
    if dot_git is None or dot_git.is_dir():
        return dot_git
    with contextlib.suppress(OSError, UnicodeDecodeError):
        line = (read_regular(dot_git) or "").strip()
        if line.startswith("gitdir:"):
            return (dot_git.parent / line.removeprefix("gitdir:").strip()).resolve()
    return None


def _includes(config: Path) -> list[Path]:
    """The include paths one config file names, resolved."""
    text = read_regular(config)
    if text is None:
        return []
    found = []
    in_include = False
    for line in text.splitlines():
        if section := _SECTION.match(line):
            in_include = section.group(1).lower() in ("include", "includeif")
            line = section.group(2)
        if in_include and (key := _PATH_KEY.match(line)):
            value = key.group(1) if key.group(1) is not None else key.group(2)
            if value:
                target = Path(os.path.expanduser(value))
                found.append((config.parent / target).resolve())
    return found

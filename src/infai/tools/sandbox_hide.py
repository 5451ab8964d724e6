"""What a sandboxed command may not read: ``sandbox.hidden`` and infai's own files.

Why: the sandbox mounts the whole file system read-only, so without this a
command (or a prompt-injected one) could ``cat ~/.ssh/id_ed25519`` and its
output would go to the model's provider. Each hidden path that exists is
covered in the command's mount namespace: a directory by an empty read-only
tmpfs, anything else by a read-only bind of an empty file (not ``/dev/null``:
bwrap's binds are ``nodev``, so a device there cannot even be opened, and a
tool reading its config, npm its ``~/.npmrc``, would fail instead of finding
it empty). Reads get nothing, writes fail with "Read-only file system", and
nothing on the host changes.

The rules:

- an entry is absolute or ``~/…``, expanded when a command starts; one that
  does not exist is skipped (no error): the defaults name many tools' files;
- the defaults follow the environment infai runs in where tools let it move
  their credentials (:data:`ENV_HIDDEN`: ``$KUBECONFIG``'s files,
  ``$AWS_SHARED_CREDENTIALS_FILE``, ``$DOCKER_CONFIG/config.json``,
  ``$XDG_CONFIG_HOME/gh``, ``$CODEX_HOME/auth.json``…), read when the
  configuration is (:func:`followed`);
- a symlink is resolved and its target hidden (a mount over a link lands on
  its target anyway); so is the target of each symlink directly inside a
  hidden directory (``~/.ssh/id_ed25519 -> ~/dotfiles/ssh/id_ed25519``). A
  path once hidden stays hidden in this process while it exists, so a command
  that renames the link ``~/.ssh`` (possible in a writable directory: a link
  is no mount point) does not uncover its target for the next one;
- the working directory is never hidden: an entry that *is* it is not hidden
  at all (the user chose to work there); one that *contains* it is hidden but
  for the way down to it: each directory on the way stays, its other entries
  are hidden one by one. A directory on the way with more than
  :data:`MAX_SPLIT` entries is refused (:class:`TooManyEntries`) rather than
  left readable;
- an entry inside another is covered by it; paths under ``/proc`` and ``/dev``
  (which the sandbox replaces) are left alone;
- in a writable directory (a command run in ``$HOME``), the directories between
  it and a hidden or protected path are made mount points too (:func:`pin_args`):
  a mount point cannot be renamed, so ``mv ~/.config ~/c`` cannot carry
  ``~/.config/gh`` out from under its hidden name, nor make ``~/.config/infai``
  anew for a command to write.

Configuration: ``hidden`` adds paths (from any config file, a project's
included: hiding more only narrows); ``unhide`` takes defaults out again (the
path it names and every hidden path inside it) and is read from the user's own
file only (a project's would loosen the sandbox).

Not covered: another path to the same files (a hard link made earlier, a bind
mount elsewhere on the host), a path created after the command (or a
long-lived MCP server) started, the target of a link entry a command renamed
once infai has restarted, and anything run unconfined (``mode = "off"``,
``outside_sandbox``, or mode ``auto`` where bwrap does not work). Hiding only
takes away: a project that hides ``/usr`` breaks its own commands, nothing more.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import stat
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: well-known credential locations hidden unless the user's config ``unhide``\ s them
DEFAULT_HIDDEN: tuple[str, ...] = (
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.config/gh",
    "~/.config/hub",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/git/credentials",
    "~/.docker/config.json",
    "~/.kube",
    "~/.npmrc",
    "~/.pypirc",
    "~/.config/gcloud",
    "~/.azure",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.gem/credentials",
    "~/.pgpass",
    "~/.vault-token",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.claude/.credentials.json",
    "~/.codex/auth.json",
    "~/.config/containers/auth.json",
    "~/.cache/huggingface/token",
)
#: where the environment moves a credential location (see :func:`followed`): each
#: variable, and what under its value is hidden ("": the value itself)
ENV_HIDDEN: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("XDG_CONFIG_HOME", ("gh", "hub", "git/credentials", "containers/auth.json", "gcloud")),
    ("XDG_RUNTIME_DIR", ("containers/auth.json",)),
    ("XDG_DATA_HOME", ("keyrings",)),
    ("KUBECONFIG", ("",)),
    ("AWS_SHARED_CREDENTIALS_FILE", ("",)),
    ("AWS_CONFIG_FILE", ("",)),
    ("DOCKER_CONFIG", ("config.json",)),
    ("REGISTRY_AUTH_FILE", ("",)),
    ("GH_CONFIG_DIR", ("",)),
    ("CLOUDSDK_CONFIG", ("",)),
    ("AZURE_CONFIG_DIR", ("",)),
    ("CODEX_HOME", ("auth.json",)),
    ("CLAUDE_CONFIG_DIR", (".credentials.json",)),
    ("GNUPGHOME", ("",)),
    ("PASSWORD_STORE_DIR", ("",)),
    ("CARGO_HOME", ("credentials", "credentials.toml")),
    ("PGPASSFILE", ("",)),
    ("NPM_CONFIG_USERCONFIG", ("",)),
)
#: of those, the variables that hold a list of paths, ``:``-separated
PATH_LISTS = ("KUBECONFIG",)
#: entries of one directory on the way down to the working directory hidden one by one
MAX_SPLIT = 256
#: where the sandbox mounts its own file systems: hiding there means nothing
_REPLACED = ("/proc", "/dev")


#: opens a path without reading it (Linux); 0 elsewhere, where realpath resolves
_O_PATH: int = getattr(os, "O_PATH", 0)
#: per configured list (expanded): every path it hid in this process (see hidden_paths)
_SEEN: dict[tuple[str, ...], set[str]] = {}
_SEEN_LOCK = threading.Lock()
_EMPTY: list[Path] = []  # the empty file hidden files are covered with (one per process)
_EMPTY_LOCK = threading.Lock()


class TooManyEntries(Exception):
    """A hidden directory containing the working directory is too big to split."""


# -- configuration ---------------------------------------------------------------------


def followed(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The credential locations ``environ`` (default: infai's own environment)
    moves away from the defaults (:data:`ENV_HIDDEN`: ``$KUBECONFIG``'s files,
    ``$DOCKER_CONFIG/config.json``, ``$XDG_CONFIG_HOME/gh``…), ``~/``-spelt
    under the home directory.

    Why: a user whose ``gh`` keeps its token under ``$XDG_CONFIG_HOME`` or whose
    kubeconfig is ``$KUBECONFIG`` has them where no default names them, and a
    command could read them there. A variable unset or empty, a relative value,
    and a value that is ``/``, the home directory or one above it (that would hide
    every file the user has) are left out."""
    env = os.environ if environ is None else environ
    home = os.path.expanduser("~")
    out: list[str] = []
    for name, below in ENV_HIDDEN:
        value = env.get(name, "")
        for base in value.split(os.pathsep) if name in PATH_LISTS else [value]:
            base = os.path.expanduser(base) if base else ""
            if not os.path.isabs(base):
                continue
            for rest in below:
                path = os.path.normpath(os.path.join(base, rest))
                entry = _tilde(path)
                if not _within(home, path) and entry not in out:
                    out.append(entry)
    return tuple(out)


def default_hidden(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """What is hidden when no configuration says otherwise: :data:`DEFAULT_HIDDEN`
    and the locations the environment moved (:func:`followed`)."""
    return merge_hidden(DEFAULT_HIDDEN, followed(environ), ())


def check_entry(where: str, entry: str) -> None:
    """A ValueError naming ``where`` unless ``entry`` is absolute or ``~/…``."""
    if not Path(entry).expanduser().is_absolute():
        raise ValueError(f"{where}: {entry!r}: must be an absolute path or start with ~/")


def merge_hidden(
    current: Sequence[str], hidden: Sequence[str], unhide: Sequence[str]
) -> tuple[str, ...]:
    """``current`` with a file's ``hidden`` added and its ``unhide`` taken out: the
    entry it names and every entry inside it (``unhide = ["~/.kube"]`` takes out
    a ``$KUBECONFIG`` of ``~/.kube/work`` too).

    An ``unhide`` entry that names no hidden path is a ValueError: a typo there
    would leave the user believing something is readable that is not (or the
    reverse, after a later edit)."""
    merged = list(current)
    for entry in hidden:
        if _key(entry) not in {_key(e) for e in merged}:
            merged.append(entry)
    for entry in unhide:
        keep = [e for e in merged if not _within(_key(e), _key(entry))]
        if len(keep) == len(merged):
            raise ValueError(
                f"sandbox.unhide: {entry!r} is not a hidden path (hidden: {', '.join(merged)})"
            )
        merged = keep
    return tuple(merged)


def hidden_report(hidden: Sequence[str], private: Sequence[str | Path]) -> dict[str, Any]:
    """What ``infai doctor`` says of hidden paths, as data: ``hidden`` (each
    configured entry, its path, whether it exists here, and ``inside``: the
    existing entry covering it, if another does), ``unhidden`` (the defaults
    ``hidden`` leaves out: the user's ``unhide``) and ``private`` (infai's own
    files, hidden whatever is configured), rows as for ``hidden``."""
    entries = [*hidden, *(str(p) for p in private)]
    shown = existing(entries)
    covers = [(e, _key(e)) for e in shown]

    def row(entry: str) -> dict[str, Any]:
        path = _key(entry)
        inside = next((e for e, p in covers if e != entry and _within(path, p)), None)
        return {"entry": entry, "path": path, "exists": os.path.exists(path), "inside": inside}

    return {
        "hidden": [row(e) for e in hidden],
        "unhidden": unhidden(hidden),
        "private": [row(str(p)) for p in private],
    }


def unhidden(hidden: Sequence[str]) -> list[str]:
    """The entries of :func:`default_hidden` that ``hidden`` leaves out (the user's
    ``unhide``), as spelled there."""
    kept = {_key(e) for e in hidden}
    return [e for e in default_hidden() if _key(e) not in kept]


def _key(entry: str) -> str:
    """What two spellings of one path (``~/.ssh/``, ``$HOME/.ssh``) share."""
    return os.path.normpath(Path(entry).expanduser())


# -- mounts ----------------------------------------------------------------------------


def hide_args(entries: Iterable[str | Path], working_dir: Path) -> list[str]:
    """bwrap arguments covering each existing path of ``entries`` (see the module
    docstring), to come after every other mount. ``working_dir`` is resolved.
    Raises :class:`TooManyEntries` when the way down to it cannot be left alone."""
    return mount_args(hidden_paths(entries, working_dir))


def hidden_paths(
    entries: Iterable[str | Path], working_dir: Path, *, unscanned: Iterable[str] = ()
) -> dict[str, bool]:
    """The paths to cover for ``entries`` (each: whether it is a directory), one
    inside another left out, in mount order. Raises :class:`TooManyEntries`.
    ``unscanned``: absolute paths hidden the same way but for the symlinks inside
    a directory, whose targets are left alone; not remembered, and left out when
    they are or contain the working directory (the socket paths of
    :mod:`infai.tools.sandbox_sockets`).

    A path once found stays hidden in this process (for the same ``entries``)
    while it exists: run in ``$HOME``, a command could rename the link
    ``~/.ssh -> dotfiles/ssh`` (a link is no mount point), and the next one
    would no longer find the entry, so not hide its target.

    Paths are handled as strings and resolved by the kernel (:func:`_real`):
    this runs before every command, and pathlib's ``parents`` comparisons or
    ``os.path.realpath`` (an ``lstat`` per component) cost milliseconds here."""
    wd = str(working_dir)
    found: dict[str, bool] = {}  # path -> is a directory
    split: set[str] = set()
    home = os.path.expanduser("~").rstrip("/")
    expanded = tuple(
        home + e[1:] if isinstance(e, str) and e.startswith("~/") else os.path.expanduser(e)
        for e in entries
    )
    with _SEEN_LOCK:
        seen = _SEEN.setdefault(expanded, set())
        earlier = sorted(seen)
    resolved = [r for path in expanded for r in _resolved(path, scan=True)]
    now = {path for path, _ in resolved}
    resolved += [r for path in earlier if path not in now for r in _resolved(path, scan=True)]
    for path in unscanned:  # one that is or holds the working directory is left whole
        resolved += [r for r in _resolved(path, scan=False) if not _within(wd, r[0])]
    with _SEEN_LOCK:
        seen.update(now)
    for path, is_dir in resolved:
        _collect(path, is_dir, wd, found, split)
    kept: dict[str, bool] = {}
    for path in sorted(found):  # a directory sorts before what is inside it
        if not _covered(path, kept) and not any(_within(path, r) for r in _REPLACED):
            kept[path] = found[path]
    return kept


def _covered(path: str, kept: dict[str, bool]) -> bool:
    """Whether ``path`` or a directory it is in is one of ``kept``."""
    while path not in kept:
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return True


def mount_args(paths: dict[str, bool]) -> list[str]:
    """bwrap arguments covering ``paths`` (:func:`hidden_paths`): a directory by
    an empty read-only tmpfs, anything else by a read-only bind of an empty file."""
    args: list[str] = []
    empty = ""
    for path, is_dir in paths.items():
        if is_dir:
            args += ["--tmpfs", path, "--remount-ro", path]
        else:
            empty = empty or empty_file()
            args += ["--ro-bind", empty, path]
    return args


def pin_args(paths: Iterable[str], roots: Iterable[str | Path]) -> list[str]:
    """``--bind D D`` for each directory D between a writable root and a path of
    ``paths`` inside it (not the root, not the path), to come before the mounts
    covering ``paths``.

    Why: a read-only or hidden path in a writable directory cannot be renamed (it
    is a mount point) but its parent could be. Run in ``$HOME``, ``mv ~/.config
    ~/c`` would carry ``~/.config/gh`` out from under its hidden name (the next
    command would read ``~/c/gh``) and let ``~/.config/infai`` be made anew,
    infai's config written by a command. A mount point cannot be renamed or
    removed, and a bind of a directory onto itself changes nothing else."""
    tops = [str(r) for r in roots]
    pins: set[str] = set()
    # (a root is bound already; one inside another is not pinned again)
    for path in paths:
        for root in tops:
            if path == root or not _within(path, root):
                continue
            parent = os.path.dirname(path)
            while parent != root and _within(parent, root):
                if parent not in tops:
                    pins.add(parent)
                parent = os.path.dirname(parent)
    return [arg for pin in sorted(pins) for arg in ("--bind", pin, pin)]


def empty_file() -> str:
    """An empty, read-only regular file of this process's own, made when first
    needed (again if something removed it) and removed when infai exits."""
    with _EMPTY_LOCK:
        if _EMPTY and _is_empty(_EMPTY[-1]):
            return str(_EMPTY[-1])
        fd, name = tempfile.mkstemp(prefix="infai-hidden-", suffix=".empty")
        os.close(fd)
        os.chmod(name, 0o444)
        path = Path(name)
        _EMPTY.append(path)
        atexit.register(path.unlink, missing_ok=True)
        return name


def _is_empty(path: Path) -> bool:
    try:
        found = path.lstat()
    except OSError:
        return False
    return found.st_size == 0 and stat.S_ISREG(found.st_mode)


def _within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or inside it (both absolute and normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _resolved(path: str, *, scan: bool) -> list[tuple[str, bool]]:
    """``path`` resolved, with whether it is a directory (nothing if it does not
    exist or is relative) and, with ``scan``, the targets of the symlinks
    directly inside it (not scanned in turn: a link back to the directory ends
    there)."""
    if not os.path.isabs(path):
        return []
    real = _real(path)
    if real is None:
        return []  # missing, a dangling link (or a loop): nothing to read there
    out = [real]
    if scan and real[1]:
        try:
            with os.scandir(real[0]) as entries:
                for n, item in enumerate(entries):
                    if n >= MAX_SPLIT:
                        break
                    if item.is_symlink():
                        out += _resolved(item.path, scan=False)
        except OSError:
            pass  # unreadable: covered whole all the same
    return out


def _real(path: str) -> tuple[str, bool] | None:
    """What ``path`` leads to and whether it is a directory, or None if nothing
    (missing, a dangling link, a loop, a directory on the way not searchable).

    Resolved by the kernel: an ``O_PATH`` descriptor and its ``/proc/self/fd``
    link, three system calls where ``os.path.realpath`` makes one per component.
    Without ``/proc`` (or ``O_PATH``), ``realpath`` it is."""
    if not _O_PATH:
        real = os.path.realpath(path)
        return (real, os.path.isdir(real)) if os.path.exists(real) else None
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            real = ""
        if not real.startswith("/") or real.endswith(" (deleted)"):
            real = os.path.realpath(path)
        return real, is_dir
    except OSError:
        return None
    finally:
        os.close(fd)


def _collect(path: str, is_dir: bool, wd: str, found: dict[str, bool], split: set[str]) -> None:
    """Record ``path`` to hide, or, when it contains ``wd``, its entries but the
    one on the way down (recursively; ``split``: the directories done so, each
    once, whatever links lead back to them)."""
    if path == wd or path in split:
        return
    if not _within(wd, path):
        found[path] = is_dir
        return
    split.add(path)
    base = path.rstrip("/")
    down = base + "/" + wd[len(base) + 1 :].split("/")[0]
    try:
        with os.scandir(path) as listing:
            children = [item.path for item in listing]
    except OSError:
        return  # unreadable to infai's user: so to the command too
    if len(children) > MAX_SPLIT:
        raise TooManyEntries(
            f"the working directory {wd} is inside the hidden path {path}, whose "
            f"{len(children)} entries (more than {MAX_SPLIT}) cannot be hidden one by one; "
            "work elsewhere or take it out with sandbox.unhide in your config"
        )
    for child in children:
        if child == down:
            _collect(child, True, wd, found, split)
        else:
            for target, target_is_dir in _resolved(child, scan=True):
                _collect(target, target_is_dir, wd, found, split)


# -- telling the model -----------------------------------------------------------------

#: how many hidden paths a description names before it says "and N more"
NAMED = 6
#: what may stand right before a path in a command (start, space, quote, shell syntax)
_BEFORE = r"(?:^|(?<=[\s'\"=:;|&(<>`]))"
#: what may stand right after it (end, a path inside, space, quote, shell syntax)
_AFTER = r"(?=$|[/\s'\"`;|&)<>*])"


def existing(entries: Iterable[str]) -> list[str]:
    """The entries (as spelled) that name something that exists now, so would be
    hidden from a command started now; one inside another is left out."""
    found: list[tuple[str, str]] = []
    for entry in entries:
        path = _key(entry)
        if os.path.exists(path) and not any(_within(path, p) for _, p in found):
            found = [(e, p) for e, p in found if not _within(p, path)]
            found.append((entry, path))
    return [e for e, _ in found]


def describe(entries: Sequence[str], private: Sequence[str | Path]) -> str:
    """One or two sentences telling the model which paths read as empty in the
    sandbox: the existing ones of ``entries`` (at most :data:`NAMED`; none: the
    kind of thing hidden) and infai's own files (``private``, in ``~`` form).

    Why: a model that finds ``~/.ssh/config`` empty would otherwise conclude
    there is no ssh configuration, and act on it."""
    shown = [_shown(e) for e in existing(entries)]
    if len(shown) > NAMED:
        shown[NAMED:] = [f"{len(shown) - NAMED} more"]
    if not shown:
        shown = ["well-known credential files (~/.ssh, ~/.aws and the like)"]
    own = [_shown(_tilde(str(p))) for p in existing(str(p) for p in private)]
    if own:
        shown.append(f"infai's own config and store ({', '.join(own)})")
    what = ", ".join(shown[:-1]) + (" and " if len(shown) > 1 else "") + shown[-1]
    return (
        f"These read as empty in the sandbox, by the user's policy (sandbox.hidden): "
        f"{what}. Empty there does not mean empty on the machine."
    )


def mentioned(command: str, entries: Iterable[str | Path], working_dir: Path) -> list[str]:
    """The hidden paths of ``entries`` that ``command`` names (``~/.ssh``,
    ``$HOME/.ssh``, the absolute path, or relative to ``working_dir``) and that
    exist, so were hidden from it: a hint for the model, which cannot tell an
    empty file from a hidden one. Only the text is read: a path reached another
    way (``cd ~; cat .ssh/x``) is not found, and one that is not named is never
    claimed. Paths that are, or contain, the working directory are not claimed
    either (they are not hidden whole)."""
    out: list[str] = []
    for path, forms in _spellings(tuple(entries), os.path.expanduser("~"), str(working_dir)):
        named = any(
            form in command and re.search(_BEFORE + re.escape(form) + _AFTER, command)
            for form in forms
        )
        if named and os.path.exists(path):
            out.append(_tilde(path))
    return out


@functools.lru_cache(maxsize=32)
def _spellings(
    entries: tuple[str | Path, ...], home: str, wd: str
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each entry's path and the ways a command may spell it (see :func:`mentioned`),
    worked out once per list, home and working directory: this runs after every
    command."""
    out = []
    for entry in entries:
        path = _key(str(entry))
        if _within(wd, path):
            continue
        forms = {str(entry), path}
        if _within(path, home) and path != home:
            rel = path[len(home.rstrip("/")) + 1 :]
            forms |= {f"~/{rel}", f"$HOME/{rel}", f"${{HOME}}/{rel}"}
        if _within(path, wd):
            forms |= {path[len(wd.rstrip("/")) + 1 :]}
        out.append((path, tuple(sorted(forms))))
    return tuple(out)


def _tilde(path: str) -> str:
    """``path`` with the home directory written ``~`` (as the model would type it)."""
    home = os.path.expanduser("~").rstrip("/")
    return "~" + path[len(home) :] if home and _within(path, home) else path


def _shown(entry: str) -> str:
    """``entry`` as it may go into the model's text: escaped if it holds control
    characters (a user's own ``hidden`` entry is any string)."""
    return entry if entry.isprintable() else ascii(entry)


__all__ = [
    "DEFAULT_HIDDEN",
    "ENV_HIDDEN",
    "MAX_SPLIT",
    "NAMED",
    "TooManyEntries",
    "check_entry",
    "default_hidden",
    "describe",
    "existing",
    "followed",
    "hidden_paths",
    "hidden_report",
    "hide_args",
    "mentioned",
    "merge_hidden",
    "mount_args",
    "pin_args",
    "unhidden",
]

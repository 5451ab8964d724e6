"""Reads that stay home: ``sandbox.home = "hidden"`` hides ``$HOME`` outside the work.

Why: hiding a list of credential paths (:mod:`infai.tools.sandbox_hide`) leaves
everything else in the home directory readable to a command, and to the model
provider its output goes to: another project's ``.env``, a ``~/.bashrc`` that
exports keys, shell history, mail, browser profiles. Most of a home directory
is of no use to a command run in a project; what is of use is the toolchains
people install there.

So, with ``home = "hidden"`` (the default) the sandbox mounts an empty tmpfs
over the home directory (read-only once everything is in place) and binds back
read-only:

- the toolchain locations of :data:`TOOLCHAIN_HOME` that exist (language homes
  and their caches: ``~/.cargo``, ``~/.rustup``, ``~/.pyenv``, ``~/.npm``,
  ``~/.cache``, ``~/.local/lib/python*``, ``~/.gitconfig``…), those the
  environment names (:data:`TOOLCHAIN_ENV`: ``$CARGO_HOME``, ``$GOPATH``…)
  and the ``PATH`` entries inside the home directory (for ``…/bin``, the
  installation it is in, as ``node`` needs its ``lib/`` next to its ``bin/``),
  and infai's own Python (its venv and installation: every command starts
  through it, :mod:`.landlock`);
- the user's ``unhide`` entries inside the home directory (user file only);

and then, as before, the working directory and the ``writable`` roots
(writable, so they win over the tmpfs), the read-only and protected paths, and
the hidden paths: a credential file inside an allowed directory
(``~/.cargo/credentials.toml``) is still covered, as is infai's own store.
A symlinked entry (``~/.gitconfig -> dotfiles/gitconfig``) is bound where it
leads and a link to it is made in the tmpfs, so what is hidden by its real
path stays hidden.

A working directory (or writable root) that is the home directory or holds it
leaves nothing of it to hide: there ``home`` changes nothing (infai already
runs in ``$HOME`` with only ``hidden`` covering credentials). A working
directory outside the home directory sees the same allowed toolchains.
``home = "visible"`` keeps the old behaviour: every path not hidden is readable.

Not covered: other users' homes, ``/srv``, ``/opt``, a projects directory
outside ``$HOME``: only the home directory is hidden.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .landlock import interpreter_paths

HomeMode = Literal["hidden", "visible"]
HOME_MODES: tuple[HomeMode, ...] = ("hidden", "visible")

#: where toolchains live in a home directory: read-only in the sandbox when they
#: exist (``*`` patterns are expanded); credential files inside stay hidden
TOOLCHAIN_HOME: tuple[str, ...] = (
    "~/.cache",
    "~/.local/bin",
    "~/.local/lib/python*",
    "~/.local/share/pnpm",
    "~/.local/share/uv",
    "~/.local/share/virtualenvs",
    "~/.local/share/pipx",
    "~/.local/share/pypoetry",
    "~/.local/share/mise",
    "~/.local/share/fnm",
    "~/.local/share/hatch",
    "~/.local/share/pdm",
    "~/.npm",
    "~/.nvm",
    "~/.yarn",
    "~/.bun",
    "~/.deno",
    "~/.volta",
    "~/.cargo",
    "~/.rustup",
    "~/go",
    "~/.pyenv",
    "~/.rye",
    "~/.pixi",
    "~/.rbenv",
    "~/.nodenv",
    "~/.goenv",
    "~/.jenv",
    "~/.gem",
    "~/.gradle",
    "~/.m2",
    "~/.sbt",
    "~/.ivy2",
    "~/.sdkman",
    "~/.asdf",
    "~/.nix-profile",
    "~/.tool-versions",
    "~/.ghcup",
    "~/.cabal",
    "~/.stack",
    "~/.opam",
    "~/.elan",
    "~/.julia",
    "~/.dotnet",
    "~/.nuget/packages",
    "~/.pub-cache",
    "~/.conda",
    "~/miniconda3",
    "~/miniforge3",
    "~/anaconda3",
    "~/.config/git",
    "~/.gitconfig",
    "~/.gitignore_global",
)
#: variables naming a toolchain location: allowed too where it is in the home directory
TOOLCHAIN_ENV: tuple[str, ...] = (
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOMODCACHE",
    "GOROOT",
    "PYENV_ROOT",
    "NVM_DIR",
    "VOLTA_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "DENO_INSTALL",
    "SDKMAN_DIR",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "PNPM_HOME",
    "UV_CACHE_DIR",
    "XDG_CACHE_HOME",
    "GRADLE_USER_HOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PIPX_HOME",
    "POETRY_HOME",
    "RBENV_ROOT",
    "JAVA_HOME",
)


@dataclass(frozen=True)
class HomeView:
    """What of the home directory a command sees: ``home`` (resolved) is an empty
    tmpfs but for ``binds`` (real paths bound read-only onto themselves) and
    ``links`` (``(target, path)``: a symlinked entry)."""

    home: str
    binds: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = field(default=())


def home_dir() -> str | None:
    """The home directory, resolved; None when there is none worth hiding
    (unset, ``/``, not a directory)."""
    home = os.path.realpath(os.path.expanduser("~"))
    return home if home != "/" and os.path.isdir(home) else None


def allowed_entries(
    unhide: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> list[str]:
    """The allowed paths inside the home directory that exist (absolute, normalised,
    not resolved): :data:`TOOLCHAIN_HOME`, :data:`TOOLCHAIN_ENV`, ``PATH`` and the
    user's ``unhide`` entries, in that order, each once."""
    env = os.environ if environ is None else environ
    home = os.path.normpath(os.path.expanduser("~"))
    real_home = os.path.realpath(home)
    candidates: list[str] = []
    for entry in (*TOOLCHAIN_HOME, *unhide):
        path = home + entry[1:] if entry.startswith("~/") else os.path.expanduser(entry)
        candidates += sorted(glob.glob(path)) if "*" in entry else [path]
    candidates += [env.get(name, "") for name in TOOLCHAIN_ENV]
    candidates += interpreter_paths()  # the write limiter runs on it (:mod:`.landlock`)
    for part in env.get("PATH", "").split(os.pathsep):
        part = os.path.normpath(part) if os.path.isabs(part) else ""
        parent = os.path.dirname(part)
        if os.path.basename(part) == "bin" and parent not in (home, os.path.join(home, ".local")):
            part = parent  # a toolchain's prefix: node's lib/ is next to its bin/
        candidates.append(part)
    out: list[str] = []
    for path in candidates:
        if not path or not os.path.isabs(path):
            continue
        path = os.path.normpath(path)
        inside = _within(path, home) or _within(path, real_home)
        if inside and path not in (home, real_home) and os.path.exists(path) and path not in out:
            out.append(path)
    return out


def home_view(
    mode: HomeMode,
    roots: Iterable[str],
    unhide: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> HomeView | None:
    """How to hide the home directory from a command whose writable ``roots``
    (resolved; the working directory first) are given; None when nothing is
    hidden (``visible``, no home directory, or a root that is it or holds it)."""
    home = home_dir()
    tops = list(roots)
    if mode == "visible" or home is None or any(_within(home, r) for r in tops):
        return None
    reals: list[str] = []
    links: list[tuple[str, str]] = []
    spelt = os.path.normpath(os.path.expanduser("~"))
    for entry in allowed_entries(unhide, environ):
        real = os.path.realpath(entry)
        if _within(entry, spelt) and not _within(entry, home):  # $HOME is a link
            entry = home + entry[len(spelt.rstrip("/")) :]
        if _within(real, home) and real != home:
            reals.append(real)
        if real != entry and real != home:
            links.append((real, entry))
    binds: list[str] = []
    for real in sorted(set(reals)):  # a directory sorts before what is inside it
        if not any(_within(real, b) for b in binds):
            binds.append(real)
    kept = tuple(
        (target, path)
        for target, path in links
        if _within(path, home)
        and not any(_within(path, b) or _within(b, path) for b in (*binds, *tops))
    )
    return HomeView(home, tuple(binds), tuple(dict.fromkeys(kept)))


def home_args(view: HomeView | None) -> list[str]:
    """bwrap arguments for ``view``, to come before the writable roots are bound."""
    if view is None:
        return []
    args = ["--tmpfs", view.home]
    for path in view.binds:
        args += ["--ro-bind", path, path]
    for target, path in view.links:
        args += ["--symlink", target, path]
    return args


def home_tail(view: HomeView | None) -> list[str]:
    """bwrap arguments for ``view`` to come last: the tmpfs becomes read-only (a
    command can no more write there than in the home directory it replaces)."""
    return [] if view is None else ["--remount-ro", view.home]


def keep_hidden(
    view: HomeView | None, hidden: dict[str, bool], roots: Iterable[str]
) -> dict[str, bool]:
    """``hidden`` (:func:`~infai.tools.sandbox_hide.hidden_paths`) without the paths
    the tmpfs hides already: those in the home directory but in no bound path or
    root (and holding none). Mounting over them would only make them appear."""
    if view is None:
        return hidden
    shown = (*view.binds, *roots)
    return {
        path: is_dir
        for path, is_dir in hidden.items()
        if not _within(path, view.home) or any(_within(path, s) or _within(s, path) for s in shown)
    }


def split_unhide(hidden: Sequence[str], unhide: Sequence[str]) -> tuple[list[str], list[str]]:
    """``unhide`` split into the entries that take hidden paths out (for
    :func:`~infai.tools.sandbox_hide.merge_hidden`) and those inside the home
    directory that exist (bound back when it is hidden). An entry may be both
    (``~/.kube``); one that is neither goes to the first, whose check names it (a
    typo, ``~/.sssh``, is an error rather than a silent no-op). ``~`` itself is a
    ValueError: ``home = "visible"`` says that."""
    home = os.path.normpath(os.path.expanduser("~"))
    keys = [os.path.normpath(os.path.expanduser(e)) for e in hidden]
    for_hidden: list[str] = []
    for_home: list[str] = []
    for entry in unhide:
        path = os.path.normpath(os.path.expanduser(entry))
        if path == home:
            raise ValueError(
                f"sandbox.unhide: {entry!r} is the home directory: "
                'set sandbox.home = "visible" to let commands read all of it'
            )
        in_home = _within(path, home)
        names_hidden = any(_within(k, path) for k in keys)
        if in_home and (names_hidden or os.path.exists(path)):
            for_home.append(entry)
        if names_hidden or not for_home or for_home[-1] != entry:
            for_hidden.append(entry)
    return for_hidden, for_home


def home_note(mode: HomeMode) -> str:
    """What the model is told of the home directory (" " first; "" when visible):
    a missing ``~/.bashrc`` there does not mean the user has none."""
    if mode == "visible":
        return ""
    return (
        " Your home directory (outside the working directory) shows only toolchain "
        "directories (~/.cargo, ~/.npm, ~/.cache, ~/.gitconfig and the like), read-only; "
        "the rest of it is missing in the sandbox, by the user's policy (sandbox.home)."
    )


def home_report(
    mode: HomeMode,
    unhide: Sequence[str],
    working_dir: str | None = None,
    writable: Sequence[str] = (),
) -> dict[str, Any]:
    """What ``infai doctor`` says of the home directory: its ``mode``, the ``home``
    path, whether it is ``hidden`` for a command run in ``working_dir`` (default:
    the current directory) with the absolute ``writable`` roots, the allowed paths
    that exist (``readable``, ``~``-spelt, one inside another left out), the
    user's ``unhide`` ones included, and the ``writable`` roots in it."""
    wd = os.path.realpath(working_dir or os.getcwd())
    home = os.path.normpath(os.path.expanduser("~"))
    roots = [os.path.normpath(os.path.expanduser(w)) for w in writable]
    roots = [r for r in roots if os.path.isabs(r) and os.path.isdir(r)]
    view = home_view(mode, [wd, *(os.path.realpath(r) for r in roots)], unhide)
    readable: list[str] = []
    for path in allowed_entries(unhide) if view else []:
        if not any(_within(path, p) for p in readable):
            readable.append(path)
    return {
        "mode": mode,
        "path": home,
        "hidden": view is not None,
        "readable": [_tilde(p, home) for p in readable],
        "writable": [_tilde(r, home) for r in roots if _within(r, home)],
    }


def _tilde(path: str, home: str) -> str:
    return "~" + path[len(home.rstrip("/")) :] if _within(path, home) else path


def _within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or inside it (both absolute and normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


__all__ = [
    "HOME_MODES",
    "TOOLCHAIN_ENV",
    "TOOLCHAIN_HOME",
    "HomeMode",
    "HomeView",
    "allowed_entries",
    "home_args",
    "home_dir",
    "home_note",
    "home_report",
    "home_tail",
    "home_view",
    "keep_hidden",
    "split_unhide",
]

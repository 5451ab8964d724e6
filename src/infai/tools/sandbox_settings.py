"""The ``[sandbox]`` settings and how a config file's table becomes them.

Split from :mod:`.sandbox` (which builds each command's bwrap line from them):
the modes, the environment lists every command sees or never sees, the
working-directory entries kept read-only, and the rules for what a project's
file may not say (anything that would loosen the sandbox).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from . import sandbox_home as home_mod
from .sandbox_hide import check_entry, default_hidden, merge_hidden
from .write_budget import DEFAULT_BUDGET, parse_budget

Mode = Literal["auto", "required", "off"]
MODES: tuple[Mode, ...] = ("auto", "required", "off")
#: what asks (:mod:`.sandbox_verified`): ``sandboxed`` lets confined work run unasked
Approvals = Literal["ask", "sandboxed"]
APPROVALS: tuple[Approvals, ...] = ("ask", "sandboxed")

#: variables every command sees (if set): where programs are, who and where the
#: user is, language and terminal; ``LC_*`` is every locale category
PASS_ENV: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "TMPDIR",
    "VIRTUAL_ENV",
)
#: variables no command sees, even when ``pass_env`` matches them
SECRET_ENV: tuple[str, ...] = (
    "*_API_KEY",
    "*_APIKEY",
    "*_TOKEN",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_CREDENTIALS*",
    "*_PRIVATE_KEY*",
    "INFAI_SERVER_TOKEN",
)
#: working-directory entries mounted read-only unless ``writable`` names them
READ_ONLY_ENTRIES = (".git", ".infai")
#: those of them made (an empty directory) when missing, so a command cannot make
#: them: a ``.infai/config.toml`` of its own would choose where the next run sends
#: the user's prompts and key (a missing ``.git`` a command may make: ``git init``)
MADE_READ_ONLY = (".infai",)


@dataclass(frozen=True)
class SandboxSettings:
    """The ``[sandbox]`` configuration (see the module docstring)."""

    mode: Mode = "auto"
    network: bool = False
    pass_env: tuple[str, ...] = ()
    secret_env: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    #: paths commands cannot read (:mod:`infai.tools.sandbox_hide`)
    hidden: tuple[str, ...] = field(default_factory=default_hidden)
    #: bytes a command may write (:mod:`infai.tools.write_budget`); None: no limit
    write_budget: int | None = DEFAULT_BUDGET
    #: whether ``$HOME`` outside the working directory is hidden (:mod:`.sandbox_home`)
    home: home_mod.HomeMode = "hidden"
    #: the user's ``unhide`` entries inside ``$HOME``: readable when it is hidden
    home_unhide: tuple[str, ...] = ()
    #: whether what the sandbox confines runs without asking (:mod:`.sandbox_verified`)
    approvals: Approvals = "ask"


# -- configuration ---------------------------------------------------------------------

#: the settings that take one of a few words
CHOICES: dict[str, tuple[str, ...]] = {
    "mode": MODES,
    "home": home_mod.HOME_MODES,
    "approvals": APPROVALS,
}

#: what a project's file may not set: each would loosen the sandbox
LOOSENING = (
    "mode",
    "network",
    "home",
    "pass_env",
    "writable",
    "unhide",
    "write_budget",
    "approvals",
)


def parse_sandbox(
    value: Any, current: SandboxSettings, *, project: bool
) -> tuple[SandboxSettings, list[str]]:
    """``current`` updated by a config file's ``sandbox`` value, and notices.

    ``value`` is a mode string or a table. A project's file (``project``) is
    untrusted: what it says about mode, network, pass_env, writable, unhide,
    write_budget or approvals is ignored (a notice says so); its ``secret_env``
    and ``hidden`` add to the user's. A bad value is a ValueError whose message
    names the key (the caller adds the file).
    """
    table: dict[str, Any] = {"mode": value} if isinstance(value, str) else value
    if not isinstance(table, dict):
        raise ValueError(f"sandbox: must be a mode ({', '.join(MODES)}) or a table")
    changes: dict[str, Any] = {}
    for key, item in table.items():
        where = f"sandbox.{key}" if not isinstance(value, str) else "sandbox"
        if key in CHOICES:
            if item not in CHOICES[key]:
                raise ValueError(f"{where}: must be one of {', '.join(CHOICES[key])}, not {item!r}")
            changes[key] = item
        elif key == "network":
            if not isinstance(item, bool):
                raise ValueError(f"{where}: must be true or false, not {item!r}")
            changes[key] = item
        elif key in ("pass_env", "secret_env", "writable", "hidden", "unhide"):
            changes[key] = _strings(where, item)
        elif key == "write_budget":
            changes[key] = parse_budget(where, item)
        else:
            known = (
                "mode, network, home, pass_env, secret_env, writable, hidden, unhide, "
                "write_budget, approvals"
            )
            raise ValueError(f"sandbox: unknown key {key!r} (known: {known})")
    _check_lists(changes)
    notices = []
    if project:
        tighter = {"home": "hidden"} if changes.get("home") == "hidden" else {}
        ignored = [key for key in LOOSENING if key in changes and key not in tighter]
        if ignored:
            notices.append(
                f"sandbox: {', '.join(ignored)} ignored: a project's config may not "
                "loosen the sandbox (set it in your own config)"
            )
        changes = {k: changes.get(k, ()) for k in ("secret_env", "hidden")} | tighter
    if "secret_env" in changes:
        changes["secret_env"] = (*current.secret_env, *changes["secret_env"])
    if "hidden" in changes or "unhide" in changes:
        known_hidden = (*current.hidden, *changes.get("hidden", ()))
        unhide, in_home = home_mod.split_unhide(known_hidden, changes.pop("unhide", ()))
        changes["hidden"] = merge_hidden(current.hidden, changes.get("hidden", ()), unhide)
        changes["home_unhide"] = (*current.home_unhide, *in_home)
    return replace(current, **changes), notices


def _check_lists(changes: dict[str, Any]) -> None:
    """A ValueError for an entry of a list setting that can never be right."""
    for pattern in changes.get("pass_env", ()):
        if _matches(pattern, SECRET_ENV):
            raise ValueError(
                f"sandbox.pass_env: {pattern!r} looks like a secret "
                f"({', '.join(SECRET_ENV)}) and is never passed to commands"
            )
    for entry in changes.get("writable", ()):
        _check_writable(entry)
    for key in ("hidden", "unhide"):
        for entry in changes.get(key, ()):
            check_entry(f"sandbox.{key}", entry)


def _strings(where: str, item: Any) -> tuple[str, ...]:
    if not isinstance(item, list) or not all(isinstance(s, str) and s for s in item):
        raise ValueError(f"{where}: must be a list of non-empty strings, not {item!r}")
    return tuple(item)


def _check_writable(entry: str) -> None:
    """A relative entry names a read-only part of the working directory; any other
    must be an absolute (or ``~``) directory to mount writable."""
    if entry.rstrip("/") in READ_ONLY_ENTRIES:
        return
    if not Path(entry).expanduser().is_absolute():
        raise ValueError(
            f"sandbox.writable: {entry!r}: a relative entry must be one of "
            f"{', '.join(READ_ONLY_ENTRIES)}; other directories are given absolute (or ~/…)"
        )


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)

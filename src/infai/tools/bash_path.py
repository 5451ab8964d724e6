"""Which shell runs a ``bash`` tool command: bash itself, found by absolute path.

The command checker (:mod:`.commands`) reads a command as bash reads it, so
the command must run under bash, not under ``/bin/sh`` (dash on Debian and
Ubuntu, which reads ``$'...'``, comments and ``${...}`` differently): a rule
checked against one reading would be enforced against another. bash is looked
for at the fixed paths of :data:`BASH_CANDIDATES`, never through ``PATH`` (a
``bash`` earlier on ``PATH``, in the working directory say, would be another
program). Where none is there, :func:`shell_argv` raises :class:`ShellMissing`
and the command is refused: nothing runs under a shell the checker does not model.

bash runs with ``--noprofile --norc`` and without the variables that would make
it read a file first or parse differently (:data:`SHELL_STARTUP_ENV`,
exported functions ``BASH_FUNC_*``), whatever ``pass_env`` says.
"""

from __future__ import annotations

import os
from fnmatch import fnmatchcase

#: where bash is looked for, in this order (the first executable file wins)
BASH_CANDIDATES: tuple[str, ...] = (
    "/bin/bash",
    "/usr/bin/bash",
    "/usr/local/bin/bash",
    "/opt/homebrew/bin/bash",
)
#: variables never passed to the shell: startup files, parsing modes, functions
SHELL_STARTUP_ENV: tuple[str, ...] = (
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "BASH_COMPAT",
    "POSIXLY_CORRECT",
    "BASH_FUNC_*",
)


class ShellMissing(Exception):
    """bash is not installed where infai looks for it (the message says where)."""


def find_bash() -> str | None:
    """The absolute path of bash (None: not at any of :data:`BASH_CANDIDATES`)."""
    for path in BASH_CANDIDATES:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def bash_missing() -> str:
    """Why no command can run here ("" when bash is installed)."""
    if find_bash() is not None:
        return ""
    return f"bash is not installed (looked for {', '.join(BASH_CANDIDATES)})"


def shell_argv(command: str) -> list[str]:
    """The argv that runs ``command`` under bash; :class:`ShellMissing` without one.

    ``--`` ends bash's own options: a command that begins with ``-`` (``-O
    extglob``) is run as the command the checker read, not taken as options."""
    bash = find_bash()
    if bash is None:
        raise ShellMissing(
            f"{bash_missing()}; infai runs commands only under bash, the shell its "
            "command checker reads them as"
        )
    return [bash, "--noprofile", "--norc", "-c", "--", command]


def startup_variable(name: str) -> bool:
    """Whether ``name`` would change how bash starts or parses (never passed on)."""
    return any(fnmatchcase(name, pattern) for pattern in SHELL_STARTUP_ENV)

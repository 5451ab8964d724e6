"""The built-in tools, assembled: files, search and the shell.

Each lives in its own module (:mod:`~infai.tools.files`,
:mod:`~infai.tools.search`, :mod:`~infai.tools.shell`); this one hands the set
to a :class:`~infai.tools.base.Toolbox`.
"""

from __future__ import annotations

from .base import Tool
from .common import MAX_OUTPUT
from .files import EditFile, ReadFile, WriteFile
from .sandbox import Sandbox
from .search import Grep, ListFiles
from .shell import Bash

__all__ = [
    "MAX_OUTPUT",
    "Bash",
    "EditFile",
    "Grep",
    "ListFiles",
    "ReadFile",
    "WriteFile",
    "builtin_tools",
]


def builtin_tools(sandbox: Sandbox | None = None) -> list[Tool]:
    """Every built-in tool, ready for a :class:`~infai.tools.base.Toolbox`; ``bash``
    runs its commands under ``sandbox`` (None: unconfined, environment scrubbed)."""
    return [ReadFile(), WriteFile(), EditFile(), ListFiles(), Grep(), Bash(sandbox=sandbox)]

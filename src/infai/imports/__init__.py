"""Importers of other coding agents' sessions, and the framework they share.

Model, in prose: each importer turns one tool's session files into
:class:`~.base.ForeignSession` objects (metadata, typed events with ids derived
from the source, HEAD, subagents as children, and a report of what was kept,
skipped or odd); :func:`~.write.commit` writes them, whole or not at all, and
idempotently (see :mod:`.base` and :mod:`.write`). Importers stand above the
store: they use its neutral core (records, events, the contract), never a
backend, and the store knows nothing of them. The registry below maps a tool's command-line name to
its importer class, loaded on first use.
"""

from __future__ import annotations

from .base import (
    EventTree,
    ForeignSession,
    Importer,
    ImportReport,
    derive_id,
    label,
    read_json_lines,
    to_rfc3339,
    unanswered_calls,
)
from .write import ImportOutcome, commit

#: tool name -> (module of this package, importer class)
REGISTRY: dict[str, tuple[str, str]] = {
    "claude-code": ("claude_code", "ClaudeCodeImporter"),
    "codex": ("codex", "CodexImporter"),
    "opencode": ("opencode", "OpenCodeImporter"),
    "pi": ("pi", "PiImporter"),
}

#: the tools ``infai import`` knows, in the order it lists them
TOOLS: tuple[str, ...] = tuple(REGISTRY)


def importer_for(tool: str) -> Importer:
    """A fresh importer for ``tool``; :class:`InvalidInput` for a name not known."""
    from infai.store import InvalidInput

    where = REGISTRY.get(tool)
    if where is None:
        raise InvalidInput(f"unknown tool {tool!r} (known: {', '.join(TOOLS)})")
    from importlib import import_module

    try:
        module = import_module(f"{__name__}.{where[0]}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{where[0]}":
            raise
        raise InvalidInput(f"the {tool} importer is not available in this build") from None
    made: Importer = getattr(module, where[1])()
    return made


__all__ = [
    "REGISTRY",
    "TOOLS",
    "EventTree",
    "ForeignSession",
    "ImportOutcome",
    "ImportReport",
    "Importer",
    "commit",
    "derive_id",
    "importer_for",
    "label",
    "read_json_lines",
    "to_rfc3339",
    "unanswered_calls",
]

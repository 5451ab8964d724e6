"""The configuration keys of the context and the turn: ``[context] rules`` (which
registered context rules run, in order) and ``max_steps`` (model calls a turn
may make). Checked where they are read; a bad value names the file and key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: model calls one turn may make unless ``max_steps`` says otherwise
DEFAULT_MAX_STEPS = 50
#: the most ``max_steps`` may say (a larger number is surely a typo)
MOST_STEPS = 10_000


def parse_max_steps(path: Path, value: Any) -> int:
    """``max_steps`` from ``path``: a whole number from 1 to :data:`MOST_STEPS`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MOST_STEPS:
        raise ValueError(f"{path}: max_steps: a whole number from 1 to {MOST_STEPS}, not {value!r}")
    return value


def parse_context(path: Path, table: Any) -> tuple[str, ...]:
    """``[context]`` from ``path``: its ``rules``, names of registered rules in order."""
    if not isinstance(table, dict):
        raise ValueError(f"{path}: context must be a table")
    for key in table:
        if key != "rules":
            raise ValueError(f"{path}: unknown key context.{key} (known: rules)")
    rules = table.get("rules", [])
    if not isinstance(rules, list) or not all(isinstance(r, str) and r for r in rules):
        raise ValueError(f"{path}: context.rules: must be a list of rule names")
    if len(set(rules)) != len(rules):
        twice = sorted({r for r in rules if rules.count(r) > 1})
        raise ValueError(f"{path}: context.rules: named twice: {', '.join(twice)}")
    return tuple(rules)

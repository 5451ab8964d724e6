"""``ast.parse`` for the tests that read the package's source.

CPython 3.11 can raise a spurious ``SystemError: AST constructor recursion
depth mismatch`` when another thread builds an AST at the same time (an import
compiling source in a server's thread; python/cpython#106905, fixed in 3.12).
Such an error says nothing about the file, so the parse is tried again; a real
syntax error is raised at once."""

from __future__ import annotations

import ast
from typing import Any

TRIES = 5


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, tried again after that spurious error."""
    for _ in range(TRIES - 1):
        try:
            return ast.parse(source, filename)
        except SystemError:
            continue
    return ast.parse(source, filename)


def guard_ast_parse() -> None:
    """Make every ``ast.parse`` in the test process (``inspect.getsource``, which
    hypothesis calls to name a state machine, included) try that spurious error
    again: the error comes from another thread's work, not from the source."""
    if getattr(ast.parse, "retries_spurious_errors", False):
        return
    original = ast.parse

    def parse_again(source: Any, *args: Any, **kwargs: Any) -> Any:
        for _ in range(TRIES - 1):
            try:
                return original(source, *args, **kwargs)
            except SystemError as exc:
                if "recursion depth mismatch" not in str(exc):
                    raise
        return original(source, *args, **kwargs)

    parse_again.retries_spurious_errors = True  # type: ignore[attr-defined]
    ast.parse = parse_again

"""``ast.parse`` for the tests that read the package's source.

CPython 3.11 can raise a spurious ``SystemError: AST constructor recursion
depth mismatch`` when another thread builds an AST at the same time (an import
compiling source in a server's thread; python/cpython#106905, fixed in 3.12).
Such an error says nothing about the file, so the parse is tried again; a real
syntax error is raised at once."""

from __future__ import annotations

import ast

TRIES = 5


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, tried again after that spurious error."""
    for _ in range(TRIES - 1):
        try:
            return ast.parse(source, filename)
        except SystemError:
            continue
    return ast.parse(source, filename)

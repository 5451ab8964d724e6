"""The exception tree drawn in ``infai.errors`` is the tree the code defines.

Every module is imported, every subclass of :class:`~infai.errors.InfaiError`
collected; the drawing must name each of them once, under its real base class,
and name nothing else. A new error class that is not drawn, or drawn under the
wrong parent, fails here.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import infai
from infai.errors import InfaiError

BRANCH = re.compile(r"^(?P<indent>[ │]*)[├└]── (?P<name>\w+)")


def _defined() -> dict[str, type[BaseException]]:
    for module in pkgutil.walk_packages(infai.__path__, "infai."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: dict[str, type[BaseException]] = {}
    pending: list[type[BaseException]] = [InfaiError]
    while pending:
        cls = pending.pop()
        assert cls.__name__ not in found or found[cls.__name__] is cls, cls.__name__
        found[cls.__name__] = cls
        pending += cls.__subclasses__()
    return found


def _drawn(doc: str) -> dict[str, str]:
    """Each drawn class name and the name of the class it is drawn under."""
    lines = doc.split("::\n", 1)[1].splitlines()
    root = next(line.strip() for line in lines if line.strip())
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = [(-1, root)]
    for line in lines:
        match = BRANCH.match(line.strip("\n")[4:])  # the block is indented 4
        if not match:
            continue
        depth = len(match["indent"]) // 4
        while stack[-1][0] >= depth:
            stack.pop()
        parents[match["name"]] = stack[-1][1]
        stack.append((depth, match["name"]))
    return parents


def test_the_drawn_tree_is_the_defined_tree() -> None:
    import infai.errors

    defined = _defined()
    drawn = _drawn(infai.errors.__doc__ or "")
    # A private subclass is a module's own control flow: it is caught, or
    # reaches callers as its drawn public base, so it is not drawn.
    public = {name for name in defined if not name.startswith("_")}
    assert sorted(drawn) == sorted(public - {"InfaiError"})
    wrong = {
        name: parent
        for name, parent in drawn.items()
        if parent not in {base.__name__ for base in defined[name].__bases__}
    }
    assert wrong == {}


def test_the_tree_reader_sees_nesting() -> None:
    doc = "x\n::\n\n    A\n    ├── B   text\n    │   └── C\n    └── D\n"
    assert _drawn(doc) == {"B": "A", "C": "B", "D": "A"}

"""Every public package says what it exports, completely and in order (as httpx checks).

A name a package's ``__init__`` binds without a leading underscore is public and
must be in ``__all__``; everything in ``__all__`` must resolve (lazily loaded
names included); ``__all__`` is sorted (as ruff's RUF022 sorts it), so a diff
shows what an API change adds.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import astparse

SRC = Path(__file__).resolve().parent.parent / "src" / "infai"
PUBLIC = [
    *("infai", "infai.errors", "infai.store", "infai.imports", "infai.llm", "infai.tools"),
    "infai.checkpoints",
    "infai.agent",
]


def _bound_names(path: Path) -> set[str]:
    """Names the module binds at top level by import, definition or assignment."""
    names: set[str] = set()
    for node in astparse.parse(path.read_text()).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions."""
    if name.isupper():
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


def _source(package: str) -> Path:
    rel = Path(*package.split(".")[1:])
    init = SRC / rel / "__init__.py"
    return init if init.is_file() else (SRC / rel).with_suffix(".py")


@pytest.mark.parametrize("package", PUBLIC)
def test_all_is_complete_sorted_and_resolves(package: str) -> None:
    module = importlib.import_module(package)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key), f"{package}.__all__ is not sorted"
    assert len(exported) == len(set(exported)), f"{package}.__all__ repeats a name"
    missing = [name for name in exported if getattr(module, name, None) is None]
    assert missing == [], f"{package}.__all__ names what it does not have"
    submodules = {p.stem for p in _source(package).parent.glob("*.py")} | {
        p.name for p in _source(package).parent.iterdir() if (p / "__init__.py").is_file()
    }
    public = {
        name
        for name in _bound_names(_source(package))
        if not name.startswith("_")
        and name not in submodules
        and name not in {"annotations", "TYPE_CHECKING"}
    }
    assert sorted(public - set(exported)) == [], f"{package} binds public names not in __all__"


def test_the_check_sees_an_unlisted_name(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text("from .x import Thing, other as _hidden\nVALUE = 1\n__all__ = ['Thing']\n")
    assert _bound_names(init) - {"__all__"} == {"Thing", "_hidden", "VALUE"}

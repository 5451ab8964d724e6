"""Every module infai imports comes from the standard library or a declared dependency.

A package that only arrives with the dev extras (pathspec came with mypy) makes a
user's `pip install .` fail at the first command; this finds it without a network.
`.ci/run` also proves it for real with a fresh venv (`.ci/user-install`).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions, requires
from pathlib import Path

import astparse

ROOT = Path(__file__).resolve().parent.parent


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"]
    names = {_normal(re.split(r"[\s\[<>=!~;]", dep, maxsplit=1)[0]) for dep in deps}
    # What a declared dependency itself requires arrives with it (mcp brings mcp-types).
    for name in list(names):
        for req in requires(name) or []:
            if "extra ==" not in req:
                names.add(_normal(re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0]))
    return names


def _imported_top_levels() -> dict[str, str]:
    """Top-level module name -> the first file that imports it (absolute imports only)."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "src" / "infai").rglob("*.py")):
        for node in ast.walk(astparse.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency() -> None:
    declared = _declared()
    dists = packages_distributions()
    missing = []
    for top, where in sorted(_imported_top_levels().items()):
        if top in sys.stdlib_module_names or top in ("infai", "__future__"):
            continue
        providers = {_normal(d) for d in dists.get(top, [])}
        if not providers & declared:
            source = sorted(providers) or "nothing installed"
            missing.append(f"{top} (imported by {where}; from {source})")
    assert not missing, "imported but not in [project.dependencies]: " + "; ".join(missing)

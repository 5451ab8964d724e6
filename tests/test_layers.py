"""Imports point only downward: store <- llm <- tools <- agent <- shells."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "infai"
LAYERS = ["store", "llm", "tools", "agent", "shells"]


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "infai" or len(parts) < 2:
        return None
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def _imports(path: Path, package: str | None = None) -> list[str]:
    """Absolute names of the modules ``path`` imports (relative ones resolved)."""
    if package is None:
        package = ".".join(("infai", *path.relative_to(SRC).parent.parts))
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                names.append(".".join([*base, node.module] if node.module else base))
            elif node.module:
                names.append(node.module)
    return names


def test_every_import_points_downward() -> None:
    checked = 0
    violations = []
    for path in SRC.rglob("*.py"):
        module = ".".join(("infai", *path.relative_to(SRC).with_suffix("").parts))
        own = _layer(module)
        if own is None:
            continue
        for name in _imports(path):
            target = _layer(name)
            checked += 1
            if target is not None and target > own:
                violations.append(f"{module} imports {name}")
    assert checked > 20
    assert violations == []


def test_layer_checker_catches_an_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from infai.agent import loop\nfrom ..shells import cli\n")
    # Resolve as if the file lived in infai/store/.
    names = _imports(bad, "infai.store")
    assert [_layer(n) for n in names] == [3, 4]


def test_store_commands_import_no_heavy_stack() -> None:
    code = (
        "import sys, infai.shells.cli\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('openai', 'anthropic', 'textual', 'starlette', 'uvicorn', 'httpx', 'rich')]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

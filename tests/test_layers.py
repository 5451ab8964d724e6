"""The shape of the package, enforced: layers, sibling backends, public seams, no cycles.

- Imports point only downward: store <- imports <- llm <- tools <- checkpoints <- agent <- shells
  (``infai.errors``, the root of the exception tree, sits below them all).
- The two store backends, ``store/file`` and ``store/pg``, never import each
  other; only ``store/open.py`` loads both (the package's lazy names for them
  are type hints and ``__getattr__``, not imports).
- Shells reach a lower layer only through its public package (``infai.store``,
  ``infai.agent``...), never past it into a module.
- Production code never imports the test fakes (``infai.llm.fakes``).
- No import cycle anywhere, counting every import a module makes when it or one
  of its functions runs (imports under ``if TYPE_CHECKING:`` are type hints only
  and are left out).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import astparse

SRC = Path(__file__).resolve().parent.parent / "src" / "infai"
LAYERS = ["store", "imports", "llm", "tools", "checkpoints", "agent", "shells"]
LOWER_PUBLIC = {"infai.errors", *(f"infai.{layer}" for layer in LAYERS[:-1])}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "infai" or len(parts) < 2:
        return None
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def _module_of(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("infai", *parts))


def _package_of(path: Path) -> str:
    return ".".join(("infai", *path.relative_to(SRC).parent.parts))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, skipping the bodies of ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                yield from _import_nodes(ast.Module(body=[child], type_ignores=[]))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _import_nodes(node)


def _exists(module: str) -> bool:
    rel = Path(*module.split(".")[1:]) if "." in module else Path()
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


def _imports(path: Path, package: str | None = None, *, all_nodes: bool = False) -> list[str]:
    """Absolute names of the modules ``path`` imports (relative ones resolved).

    ``from pkg import name`` counts as an import of ``pkg.name`` when that is a
    module of ours, else of ``pkg``.
    """
    if package is None:
        package = _package_of(path)
    tree = astparse.parse(path.read_text())
    nodes = (
        [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        if all_nodes
        else list(_import_nodes(tree))
    )
    names: list[str] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, node.module] if node.module else base)
        else:
            module = node.module or ""
        subs = [f"{module}.{a.name}" for a in node.names if module.startswith("infai")]
        found = [sub for sub in subs if _exists(sub)]
        names += found or [module]
        if found and len(found) < len(subs):
            names.append(module)
    return names


def _sources() -> Iterator[tuple[str, Path]]:
    for path in sorted(SRC.rglob("*.py")):
        yield _module_of(path), path


def test_every_import_points_downward() -> None:
    checked = 0
    violations = []
    for module, path in _sources():
        own = _layer(module)
        if own is None:
            continue
        for name in _imports(path, all_nodes=True):
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
    assert [_layer(n) for n in names] == [LAYERS.index("agent"), LAYERS.index("shells")]


def test_the_store_backends_never_import_each_other() -> None:
    violations = []
    for module, path in _sources():
        for backend, other in (("file", "pg"), ("pg", "file")):
            if module.startswith(f"infai.store.{backend}"):
                violations += [
                    f"{module} imports {name}"
                    for name in _imports(path, all_nodes=True)
                    if name.startswith(f"infai.store.{other}")
                ]
    assert violations == []


def test_only_store_open_knows_both_backends() -> None:
    knowing = []
    for module, path in _sources():
        names = _imports(path)  # what runs; the package's type hints may name both
        if all(any(n.startswith(f"infai.store.{b}") for n in names) for b in ("file", "pg")):
            knowing.append(module)
    assert knowing == ["infai.store.open"]


def test_shells_reach_lower_layers_only_through_their_public_package() -> None:
    violations = []
    for module, path in _sources():
        if not module.startswith("infai.shells"):
            continue
        for name in _imports(path, all_nodes=True):
            lower = _layer(name)
            below = lower is not None and lower < LAYERS.index("shells")
            if name.startswith("infai.") and below and name not in LOWER_PUBLIC:
                violations.append(f"{module} imports {name}")
    assert violations == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in _sources():
        targets = {n for n in _imports(path) if n.startswith("infai") and n != module}
        # A package's own __init__ is loaded before any of its modules: importing a
        # parent package is not an edge a cycle can run through.
        graph[module] = {t for t in targets if not module.startswith(t + ".")}
    return graph


def test_no_import_cycles_anywhere() -> None:
    assert _cycles(_graph()) == []


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_production_code_never_imports_the_fakes() -> None:
    importing = [
        module
        for module, path in _sources()
        if module != "infai.llm.fakes" and "infai.llm.fakes" in _imports(path, all_nodes=True)
    ]
    assert importing == []


def test_store_commands_import_no_heavy_stack() -> None:
    code = (
        "import sys, infai.shells.cli\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('openai', 'anthropic', 'textual', 'starlette', 'uvicorn', 'httpx', 'rich')]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

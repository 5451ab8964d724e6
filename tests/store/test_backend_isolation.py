"""The two backends are siblings: neither imports the other, and only store/open.py
knows both, so loading the database backend never loads the directory store's
write, recovery or check paths (nor the reverse)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import astparse
import infai.store

STORE = Path(infai.store.__file__).resolve().parent


def _imported(path: Path) -> set[str]:
    """Absolute names of the infai.store modules ``path`` imports (relative ones resolved)."""
    package = ".".join(("infai", "store", *path.relative_to(STORE).parent.parts))
    package_parts = package.split(".")
    names: set[str] = set()
    for node in ast.walk(astparse.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return {n for n in names if n.startswith("infai.store")}


def _touches(names: set[str], backend: str) -> bool:
    prefix = f"infai.store.{backend}"
    return any(n == prefix or n.startswith(prefix + ".") for n in names)


def test_file_and_pg_never_import_each_other() -> None:
    for backend, other in (("file", "pg"), ("pg", "file")):
        for path in sorted((STORE / backend).glob("*.py")):
            assert not _touches(_imported(path), other), f"{path} imports infai.store.{other}"


def test_only_open_knows_both_backends() -> None:
    both = []
    for path in sorted(STORE.glob("*.py")):
        names = _imported(path)
        if path.name == "__init__.py":
            continue  # loads backend names lazily, by string (checked below)
        if _touches(names, "file") or _touches(names, "pg"):
            both.append(path.name)
    assert both == ["open.py"]


def test_the_core_imports_no_backend() -> None:
    """Besides open.py, core modules name neither backend (transfer, contract, ...)."""
    for path in sorted(STORE.glob("*.py")):
        if path.name in ("open.py", "__init__.py"):
            continue
        names = _imported(path)
        assert not _touches(names, "file") and not _touches(names, "pg"), path


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return {line for line in out.splitlines() if line.startswith("infai.store")}


def test_importing_pg_loads_nothing_of_the_file_store() -> None:
    loaded = _loaded_after("import infai.store.pg")
    assert "infai.store.pg.backend" in loaded
    assert not {m for m in loaded if m.startswith("infai.store.file")}, loaded


def test_importing_the_package_loads_neither_backend() -> None:
    loaded = _loaded_after("import infai.store")
    assert not {m for m in loaded if m.startswith(("infai.store.file", "infai.store.pg"))}


def test_a_reader_never_loads_the_write_path() -> None:
    loaded = _loaded_after("from infai.store import Store, SessionReader")
    assert "infai.store.file.store" in loaded
    assert not loaded & {"infai.store.file.writer", "infai.store.file.fsck", "infai.store.pg"}


def test_a_reader_never_loads_salvage_or_dataclasses() -> None:
    """A resume's memory is part of a target (store_bench peak RSS): salvage and the
    ``dataclasses`` module it needs (with inspect, ast, dis...) load only when used."""
    code = (
        "import sys; from infai.store import Store, SessionReader; "
        "print('dataclasses' in sys.modules, 'infai.store.salvage' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert out == ["False", "False"]


def test_a_reader_never_loads_typing_hashlib_or_the_contract() -> None:
    """Peak RSS of a resume is a target too (store_bench): the contract's protocols (and
    ``typing`` with them), the check reports and ``open_store`` are for the layers above,
    and ``hashlib`` would probe every algorithm it knows; a reader needs none of them."""
    heavy = ("typing", "hashlib", "infai.store.contract", "infai.store.report", "infai.store.open")
    code = (
        "import sys; from infai.store import Store, SessionReader; "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert out == "[]"


def test_the_lazy_names_still_resolve() -> None:
    """What a reader no longer loads is still there for whoever asks for it by name."""
    from infai.store import REMOVED, FsckReport, SessionStore, is_database_url, open_store
    from infai.store.contract import REMOVED as CONTRACT_REMOVED

    assert REMOVED == CONTRACT_REMOVED
    assert FsckReport.__name__ == "FsckReport" and SessionStore.__name__ == "SessionStore"
    assert is_database_url("postgresql://x/y") and callable(open_store)

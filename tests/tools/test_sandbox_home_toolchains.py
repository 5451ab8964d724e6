"""Real toolchains under ``sandbox.home = "hidden"``: the measurement behind the default.

A tiny project is built and tested inside the sandbox with git, make, Python
(pytest, pip, a module from the user's site-packages), npm, cargo and go, twice:
with a fresh ``$HOME`` populated by really using those tools (``git config
--global``, a user site module, npm's ``~/.npm``, a cargo alias in
``~/.cargo/config.toml``, rustup's home linked in where the machine's cargo is
rustup's), where every step must
pass; and with the machine's real ``$HOME`` (only read: the sandbox mounts it
read-only), where each step must do with the home hidden what it does with it
visible. Go's build cache lives in ``~/.cache``, which no command may write
unless the user's ``writable`` names it (these runs do). Slow (cargo, npm, go):
``make crash``. CI installs cargo, npm and go (``.ci/run``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext
from infai.tools.shell import Bash

pytestmark = [
    pytest.mark.crash,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

PY = sys.executable
#: the interpreter the venv was made from: it reads the user's site-packages
BASE_PY = str(Path(sys.base_prefix) / "bin" / "python3")
STEPS = (
    "git init -q . && git add -A && git commit -qm first && git log --format=%an",
    "make -s",
    f"{PY} -m pytest -q -p no:cacheprovider test_x.py | tail -1 | cut -d' ' -f1-2",
    f"{PY} -m pip --version | cut -d' ' -f1",
    f"{BASE_PY} -c 'import homemod; print(homemod.WHO)'",
    "npm --version >/dev/null && npm init -y >/dev/null && "
    "npm pkg set scripts.hi='echo npm-ran' && npm run -s hi",
    "cargo new -q --vcs none hello && cd hello && cargo build -q --offline && cargo hi",
    "mkdir gohello && cd gohello && printf 'module hello\\n\\ngo 1.19\\n' > go.mod && "
    'printf \'package main\\n\\nimport "fmt"\\n\\nfunc main() { fmt.Println("go-ran") }\\n\''
    " > main.go && go build -o hi . && ./hi",
)
EXPECTED = (
    "Tool Chain",
    "make-ran",
    "1 passed",
    "pip",
    "user-site",
    "npm-ran",
    "Hello, world!",
    "go-ran",
)


def _project(base: Path) -> Path:
    wd = Path(tempfile.mkdtemp(prefix="proj-", dir=base)).resolve()
    (wd / "Makefile").write_text("all:\n\t@echo make-ran\n")
    (wd / "test_x.py").write_text("def test_x() -> None:\n    assert True\n")
    return wd


def _run_steps(wd: Path, home: str) -> list[tuple[bool, str]]:
    """Each step's success and last output line, run in the sandbox with ``home``."""
    settings = SandboxSettings(home=home, writable=("~/.cache",))  # type: ignore[arg-type]
    tool = Bash(sandbox=Sandbox(settings))
    out = []
    for step in STEPS:
        got = asyncio.run(tool.run({"command": step, "timeout": 120}, ToolContext(wd, "s")))
        lines = got.content.strip().splitlines()
        out.append((not got.is_error, lines[-1] if lines else ""))
    return out


def _populate(home: Path, real_home: Path) -> None:
    """Make a fresh home look used: by the tools themselves where they can do it offline."""
    env = {**os.environ, "HOME": str(home)}
    git = ["git", "config", "--global"]
    subprocess.run([*git, "user.name", "Tool Chain"], env=env, check=True)
    subprocess.run([*git, "user.email", "tc@example.com"], env=env, check=True)
    site = subprocess.run(
        [BASE_PY, "-c", "import site; print(site.getusersitepackages())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site).mkdir(parents=True)
    (Path(site) / "homemod.py").write_text("WHO = 'user-site'\n")
    if (real_home / ".rustup").is_dir():  # the machine's cargo is rustup's proxy
        (home / ".rustup").symlink_to(real_home / ".rustup")
    (home / ".cargo").mkdir()  # an alias of the user's: read from ~/.cargo/config.toml
    (home / ".cargo" / "config.toml").write_text('[alias]\nhi = "run -q --offline"\n')
    with tempfile.TemporaryDirectory() as scratch:  # npm makes its ~/.npm
        subprocess.run(["npm", "init", "-y"], cwd=scratch, env=env, capture_output=True)
        subprocess.run(
            ["cargo", "new", "-q", "--vcs", "none", "warm"], cwd=scratch, env=env, check=True
        )
        # go makes its build cache (~/.cache/go-build) on first use
        subprocess.run(["go", "env", "GOCACHE"], env=env, capture_output=True, check=True)
        (home / ".cache" / "go-build").mkdir(parents=True, exist_ok=True)


@pytest.fixture
def fresh_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    real = Path.home()
    root = Path(tempfile.mkdtemp(prefix="infai-tc-home-", dir="/var/tmp")).resolve()
    (root / ".bashrc").write_text("export ANTHROPIC_API_KEY=MARKER-tc-bashrc\n")
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")  # the test-wide guard: git uses ~/.gitconfig here
    monkeypatch.delenv("XDG_CONFIG_HOME")
    _populate(root, real)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_the_toolchains_are_here() -> None:
    missing = [t for t in ("git", "make", "npm", "cargo", "go") if shutil.which(t) is None]
    assert not missing, f"install {', '.join(missing)} (.ci/run does) to measure them"


def test_toolchains_work_with_a_used_home_hidden(fresh_home: Path) -> None:
    for wd in (_project(fresh_home), _project(Path("/var/tmp"))):
        try:
            results = _run_steps(wd, "hidden")
            for step, (ok, last), want in zip(STEPS, results, EXPECTED, strict=True):
                assert ok and want in last, (step, last)
            leak = asyncio.run(
                Bash(sandbox=Sandbox()).run(
                    {"command": "cat ~/.bashrc; true"}, ToolContext(wd, "s")
                )
            )
            assert "MARKER-tc-bashrc" not in leak.content
        finally:
            shutil.rmtree(wd, ignore_errors=True)


def test_the_real_home_hidden_does_what_it_does_visible() -> None:
    wd = _project(Path("/var/tmp"))
    try:
        hidden = _run_steps(wd, "hidden")
        shutil.rmtree(wd)
        wd = _project(Path("/var/tmp"))
        visible = _run_steps(wd, "visible")
    finally:
        shutil.rmtree(wd, ignore_errors=True)
    assert hidden == visible

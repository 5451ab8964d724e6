"""The benchmark scripts run end to end (smoke sizes), so the README's numbers stay reproducible."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["store_bench.py", "--quick", "--sessions", "50", "--reps", "1"],
        ["agent_bench.py", "--turns", "3"],
        ["server_bench.py", "--quick"],
        ["backend_bench.py", "--quick", "--reps", "1"],
        ["search_bench.py", "--quick", "--sessions", "12", "--list", "100", "--reps", "1"],
        ["startup_bench.py", "--quick"],
    ],
    ids=["store", "agent", "server", "backends", "search", "startup"],
)
def test_benchmark_script_runs(args: list[str], tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip(), "a benchmark prints its results"

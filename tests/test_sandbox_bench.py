"""The sandbox benchmark runs end to end (a smoke run), so its README number stays reproducible."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "sandbox_bench.py"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_sandbox_benchmark_runs(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "sandbox cost:" in out.stdout and "target < 15 ms" in out.stdout
    out = subprocess.run(
        [sys.executable, str(BENCH), "--calls", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    result = json.loads(out.stdout)
    assert result["calls"] == 3 and result["confined_ms"] > 0 and result["ratio"] > 0

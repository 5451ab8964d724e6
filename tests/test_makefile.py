"""The first `make run` shows its setup's progress (issue 13): pip is not silenced
for the install itself, and the make file says what it is doing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_first_run_says_what_it_installs() -> None:
    make = shutil.which("make")
    assert make is not None, "make is needed to run the project (see README)"
    planned = subprocess.run(
        [make, "-n", "-B", ".venv/bin/infai"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "setting up .venv" in planned
    [install] = [line for line in planned.splitlines() if "install" in line and "[dev]" in line]
    assert " -q" not in install and "--progress-bar on" in install

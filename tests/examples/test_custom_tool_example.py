"""``examples/custom_tool.py`` runs as a user runs it: a process, its own store and
config; its decorated tool is called in a session and answers, and the read
rules of the user's config bind it as they bind ``read_file``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_tool.py"


def run_example(tmp_path: Path, config: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "config.toml").write_text(config)
    env = {**os.environ, "INFAI_CONFIG": str(tmp_path / "config.toml")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--demo", "--home", str(tmp_path / "home")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_the_custom_tool_runs_in_a_session_behind_the_policy(tmp_path: Path) -> None:
    done = run_example(tmp_path, "")
    assert done.stdout.splitlines() == [
        'Let me count.[calls word_count {"path": "notes.txt"}]',
        "[word_count says: notes.txt: 9 words]",
        "notes.txt has 9 words.",
    ]
    denied = run_example(tmp_path, '[permissions]\ndeny = ["read_file notes.txt"]\n')
    assert (
        "[word_count says: permission denied by rule 'deny read_file notes.txt']"
        in denied.stdout.splitlines()
    )

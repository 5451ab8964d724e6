"""What the git red-team tests (``tests/tools/test_gitsec_*.py``) share: a git
that reads no user or system config, the bash tool with the sandbox off, the
marker files a tricked program leaves, and the same command run without infai
(the control that shows the hole is real)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from infai.tools import Sandbox, ToolContext, ToolOutput
from infai.tools.shell import Bash


def _clean_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> None:
    """``git ARGS`` in ``repo`` with no user or system config (``HOME`` is ``repo``)."""
    subprocess.run(["git", *args], cwd=repo, env=_clean_env(repo), check=True, capture_output=True)


def unconfined(command: str, wd: Path) -> ToolOutput:
    """``command`` through infai's bash tool with the sandbox off."""
    tool = Bash(sandbox=Sandbox.off())
    return asyncio.run(tool.run({"command": command}, ToolContext(wd, "s")))


def ran(marks: Path) -> list[str]:
    """The markers (``ran-*``) a tricked program left in ``marks``."""
    return sorted(p.name for p in marks.iterdir() if p.name.startswith("ran-"))


def control(command: str, wd: Path) -> None:
    """The same command without infai's overrides."""
    subprocess.run(
        ["bash", "-c", command],
        cwd=wd,
        env=_clean_env(wd),
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )

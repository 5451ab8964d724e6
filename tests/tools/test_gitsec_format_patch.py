"""Red team (gitsec): a repository's own ``format.outputDirectory`` (with
``format.suffix``) makes ``git format-patch`` write its patches anywhere: with
the sandbox off, ``0001-….fish`` landed in a directory outside the working
directory (a shell's ``conf.d``, which sources every file there at its next
start: the commit's body as commands).

Judged by effect: the directory outside, after the command."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from gitattack import git
from infai.tools import Sandbox, ToolContext
from infai.tools.shell import Bash


def test_format_patch_writes_no_patch_where_the_repository_says(tmp_path: Path) -> None:
    outside = tmp_path / "home" / ".config" / "fish" / "conf.d"
    outside.mkdir(parents=True)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "f.txt").write_text("one\n")
    git(repo, "add", "f.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", "-m", "id")
    git(repo, "config", "format.outputDirectory", str(outside))
    git(repo, "config", "format.suffix", ".fish")
    command = "git format-patch -1"
    out = asyncio.run(Bash(sandbox=Sandbox.off()).run({"command": command}, ToolContext(repo, "s")))
    assert list(outside.iterdir()) == [], out.content
    assert (repo / "0001-one.fish").exists(), out.content  # where git writes by default
    # the control: the same command without infai's overrides writes it there
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["sh", "-c", command], cwd=repo, env=env, capture_output=True)
    assert [p.name for p in outside.iterdir()] == ["0001-one.fish"]

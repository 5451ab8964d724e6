"""Red team (gitsec): a repository reached over git's file transport (a remote
whose url is a path, ``git push ../other``, ``git archive --remote=../other``)
runs *its* hooks and drivers: git starts receive-pack or upload-archive in it
and clears the ``GIT_CONFIG_*`` variables for that side (git's
``local_repo_env``), so none of infai's overrides reach it. With the sandbox off
its ``pre-receive`` hook, or the ``tar.<fmt>.command`` its config names, ran.

Judged by effect: the marker the program leaves."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from infai.tools import Sandbox, ToolContext, ToolOutput
from infai.tools.shell import Bash


def _git(repo: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _setup(root: Path) -> tuple[Path, Path, Path]:
    """A repository with one commit, a bare clone of it beside (``other``) and a
    script that leaves ``marks/ran-ARG``."""
    repo, other, marks = root / "repo", root / "other.git", root / "marks"
    repo.mkdir()
    marks.mkdir()
    script = marks / "evil.sh"
    script.write_text(f'#!/bin/sh\ntouch "{marks}/ran-$1"\ncat >/dev/null\n')
    script.chmod(0o755)
    _git(repo, "init", "-q")
    for key, value in {"user.name": "t", "user.email": "t@t.example"}.items():
        _git(repo, "config", key, value)
    (repo / "f.txt").write_text("one\n")
    _git(repo, "add", "f.txt")
    _git(repo, "commit", "-qm", "one")
    _git(root, "clone", "-q", "--bare", str(repo), str(other))
    return repo, other, script


def _run(command: str, wd: Path) -> ToolOutput:
    tool = Bash(sandbox=Sandbox.off())
    return asyncio.run(tool.run({"command": command}, ToolContext(wd, "s")))


def _ran(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "marks").iterdir() if p.name.startswith("ran-"))


def _control(command: str, wd: Path) -> None:
    """The same command without infai's overrides."""
    env = {"PATH": os.environ["PATH"], "HOME": str(wd), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(
        ["bash", "-c", command], cwd=wd, env=env, capture_output=True, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize(
    "command",
    [
        "git push -q origin HEAD:refs/heads/new",  # the remote the config names
        "git push -q ../other.git HEAD:refs/heads/new",  # a path in the text
        "git push -q file://{other} HEAD:refs/heads/new",
    ],
)
def test_a_local_remotes_hook_does_not_run(tmp_path: Path, command: str) -> None:
    repo, other, script = _setup(tmp_path)
    _git(repo, "remote", "add", "origin", "../other.git")
    hook = other / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\n{script} hook\n")
    hook.chmod(0o755)
    out = _run(command.format(other=other), repo)
    assert _ran(tmp_path) == [], out.content
    # git's "transport 'file' not allowed" says neither why nor what to do: infai does
    assert "infai: git's file transport was refused" in out.content, out.content
    assert "run the command yourself if you trust" in out.content
    _control(command.format(other=other), repo)
    assert _ran(tmp_path) == ["ran-hook"]


@pytest.mark.parametrize("how", ["insteadOf", "pushInsteadOf", "included"])
def test_a_local_remote_behind_a_rewrite_or_an_include_runs_no_hook(
    tmp_path: Path, how: str
) -> None:
    """The remote's url is rewritten to the local path (``url.<path>.insteadOf``)
    or set in a config file the repository's includes."""
    repo, other, script = _setup(tmp_path)
    hook = other / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\n{script} hook\n")
    hook.chmod(0o755)
    if how == "included":
        (repo / ".git" / "remote.cfg").write_text('[remote "origin"]\n\turl = ../other.git\n')
        _git(repo, "config", "include.path", "remote.cfg")
    else:
        _git(repo, "remote", "add", "origin", "https://example.invalid/x")
        _git(repo, "config", f"url.{other}.{how}", "https://example.invalid/x")
    command = "git push -q origin HEAD:refs/heads/new"
    out = _run(command, repo)
    assert _ran(tmp_path) == [], out.content
    _control(command, repo)
    assert _ran(tmp_path) == ["ran-hook"]


def test_a_local_remotes_archiver_does_not_run(tmp_path: Path) -> None:
    repo, other, script = _setup(tmp_path)
    _git(other, "config", "tar.evil.command", f"{script} tar")
    _git(other, "config", "tar.evil.remote", "true")
    command = "git archive --remote=../other.git --format=evil HEAD > /dev/null"
    out = _run(command, repo)
    assert _ran(tmp_path) == [], out.content
    _control(command, repo)
    assert _ran(tmp_path) == ["ran-tar"]


def test_a_local_remote_that_runs_nothing_is_still_reached(tmp_path: Path) -> None:
    """A plain local remote (sample hooks only, no program in its config) is
    pushed to and fetched from as before."""
    repo, _, _ = _setup(tmp_path)
    _git(repo, "remote", "add", "origin", "../other.git")
    out = _run("git push -q origin HEAD:refs/heads/new && git fetch -q origin && echo done", repo)
    assert "done" in out.content, out.content

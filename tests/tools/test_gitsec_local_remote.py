"""Red team (gitsec): a repository reached over git's file transport (a remote
whose url is a path, ``git push ../other``, ``git archive --remote=../other``)
runs *its* hooks and drivers: git starts receive-pack or upload-archive in it
and clears the ``GIT_CONFIG_*`` variables for that side (git's
``local_repo_env``), so none of infai's overrides reach it. With the sandbox off
its ``pre-receive`` hook, or the ``tar.<fmt>.command`` its config names, ran.

Judged by effect: the marker the program leaves."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitattack import control, git, ran, unconfined


def _setup(root: Path) -> tuple[Path, Path, Path]:
    """A repository with one commit, a bare clone of it beside (``other``) and a
    script that leaves ``marks/ran-ARG``."""
    repo, other, marks = root / "repo", root / "other.git", root / "marks"
    repo.mkdir()
    marks.mkdir()
    script = marks / "evil.sh"
    script.write_text(f'#!/bin/sh\ntouch "{marks}/ran-$1"\ncat >/dev/null\n')
    script.chmod(0o755)
    git(repo, "init", "-q")
    for key, value in {"user.name": "t", "user.email": "t@t.example"}.items():
        git(repo, "config", key, value)
    (repo / "f.txt").write_text("one\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-qm", "one")
    git(root, "clone", "-q", "--bare", str(repo), str(other))
    return repo, other, script


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
    git(repo, "remote", "add", "origin", "../other.git")
    hook = other / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\n{script} hook\n")
    hook.chmod(0o755)
    out = unconfined(command.format(other=other), repo)
    assert ran(tmp_path / "marks") == [], out.content
    # git's "transport 'file' not allowed" says neither why nor what to do: infai does
    assert "infai: git's file transport was refused" in out.content, out.content
    assert "run the command yourself if you trust" in out.content
    control(command.format(other=other), repo)
    assert ran(tmp_path / "marks") == ["ran-hook"]


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
        git(repo, "config", "include.path", "remote.cfg")
    else:
        git(repo, "remote", "add", "origin", "https://example.invalid/x")
        git(repo, "config", f"url.{other}.{how}", "https://example.invalid/x")
    command = "git push -q origin HEAD:refs/heads/new"
    out = unconfined(command, repo)
    assert ran(tmp_path / "marks") == [], out.content
    control(command, repo)
    assert ran(tmp_path / "marks") == ["ran-hook"]


def test_a_local_remotes_archiver_does_not_run(tmp_path: Path) -> None:
    repo, other, script = _setup(tmp_path)
    git(other, "config", "tar.evil.command", f"{script} tar")
    git(other, "config", "tar.evil.remote", "true")
    command = "git archive --remote=../other.git --format=evil HEAD > /dev/null"
    out = unconfined(command, repo)
    assert ran(tmp_path / "marks") == [], out.content
    control(command, repo)
    assert ran(tmp_path / "marks") == ["ran-tar"]


def test_a_local_remote_that_runs_nothing_is_still_reached(tmp_path: Path) -> None:
    """A plain local remote (sample hooks only, no program in its config) is
    pushed to and fetched from as before."""
    repo, _, _ = _setup(tmp_path)
    git(repo, "remote", "add", "origin", "../other.git")
    out = unconfined(
        "git push -q origin HEAD:refs/heads/new && git fetch -q origin && echo done", repo
    )
    assert "done" in out.content, out.content

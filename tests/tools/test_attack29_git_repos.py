"""Red team: git config of a repository *other* than the working directory's, with
the sandbox off (nothing else confines what git runs or cleans).

- A nested repository's (or one the command names) own ``diff.external``,
  textconv or alias ran: the overrides were read only for the repository seen
  from the working directory, while ``cd sub && git diff``, ``git
  --git-dir=... diff`` or a script that runs git in a nested checkout open
  another one.
- ``core.worktree`` in a repository's own config points ``git clean`` at
  ``$HOME``: no ``GIT_CONFIG_*`` override moves it (git reads it from the
  repository's file alone), so the command is refused, and the file outside
  survives.

Judged by effect: a marker the configured program would leave, a file outside.
"""

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


def _evil_repo(repo: Path, marks: Path) -> Path:
    """A repository with a changed file whose own config runs ``evil.sh`` on diff
    (``diff.external``), on a textconv driver and as an alias; returns the script."""
    repo.mkdir(parents=True)
    marks.mkdir(parents=True, exist_ok=True)
    script = marks / "evil.sh"
    script.write_text(f'#!/bin/sh\ntouch "{marks}/ran-$1"\n')
    script.chmod(0o755)
    _git(repo, "init", "-q")
    (repo / "f.txt").write_text("one\n")
    (repo / ".gitattributes").write_text("f.txt diff=conv\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    (repo / "f.txt").write_text("two\n")
    _git(repo, "config", "diff.external", f"{script} external")
    _git(repo, "config", "diff.conv.textconv", f"{script} textconv")
    _git(repo, "config", "alias.st", f"!{script} alias")
    return script


def _run(command: str, wd: Path) -> ToolOutput:
    tool = Bash(sandbox=Sandbox.off())
    return asyncio.run(tool.run({"command": command}, ToolContext(wd, "s")))


def _ran(marks: Path) -> list[str]:
    return sorted(p.name for p in marks.iterdir() if p.name.startswith("ran-"))


@pytest.fixture
def top(tmp_path: Path) -> Path:
    top = tmp_path / "top"
    top.mkdir()
    _git(top, "init", "-q")
    return top


@pytest.mark.parametrize(
    "command",
    [
        "cd vendor/lib && git diff; git st",
        "cd vendor && cd lib && git diff --no-ext-diff -p f.txt",
        "sh ./run-git.sh",  # named nowhere in the text: found beneath
        "git --git-dir=vendor/lib/.git --work-tree=vendor/lib diff",
    ],
)
def test_a_nested_repositorys_own_programs_do_not_run(top: Path, command: str) -> None:
    marks = top.parent / "marks"
    _evil_repo(top / "vendor" / "lib", marks)
    (top / "run-git.sh").write_text("cd vendor/lib && git diff && git st\n")
    out = _run(command, top)
    assert _ran(marks) == [], out.content
    # the control: the same command without infai's overrides runs the programs
    env = {"PATH": os.environ["PATH"], "HOME": str(top.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["bash", "-c", command], cwd=top, env=env, capture_output=True)
    assert _ran(marks) != []


def test_a_repository_named_outside_the_working_directory_runs_nothing(
    tmp_path: Path, top: Path
) -> None:
    """``git -C`` (or ``--git-dir``) to a repository elsewhere: not beneath, so only
    the command's text names it."""
    marks = tmp_path / "marks"
    elsewhere = tmp_path / "elsewhere"
    _evil_repo(elsewhere, marks)
    out = _run(f"git -C {elsewhere} diff; git --git-dir={elsewhere}/.git st", top)
    assert _ran(marks) == [], out.content


def test_core_worktree_pointing_at_home_cleans_nothing_there(
    tmp_path: Path, top: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    precious = home / "thesis.tex"
    precious.write_text("three years of work\n")
    monkeypatch.setenv("HOME", str(home))
    (top / "build.o").write_text("junk\n")
    _git(top, "config", "core.worktree", str(home))
    out = _run("git clean -fdx", top)
    assert precious.read_text() == "three years of work\n", out.content
    assert out.is_error and "core.worktree" in out.content and "nothing ran" in out.content
    # a nested repository's core.worktree is refused too (a script may clean there)
    _git(top, "config", "--unset", "core.worktree")
    nested = top / "sub"
    nested.mkdir()
    _git(nested, "init", "-q")
    _git(nested, "config", "core.worktree", "../../../home")
    out = _run("cd sub && git clean -fdx", top)
    assert precious.exists() and out.is_error and str(nested) in out.content
    # the control: git itself follows the setting and cleans the home directory
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "clean", "-fdx"], cwd=nested, env=env, capture_output=True)
    assert not precious.exists()


def test_a_work_tree_set_to_the_repositorys_own_top_still_runs(tmp_path: Path) -> None:
    """A submodule's git directory names its checkout as ``core.worktree`` (and a
    repository may name its own top): neither is refused."""
    source = tmp_path / "source"
    _evil_repo(source, tmp_path / "marks")
    top = tmp_path / "top"
    top.mkdir()
    _git(top, "init", "-q")
    _git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source), "sub")
    _git(top, "config", "core.worktree", str(top))
    out = _run("git status --short && cd sub && git status --short", top)
    assert not out.is_error and "nothing ran" not in out.content, out.content
    assert _ran(tmp_path / "marks") == []


def test_a_git_dir_assigned_with_a_space_in_its_path_runs_nothing(
    tmp_path: Path, top: Path
) -> None:
    """``GIT_DIR="a b/.git"``: the assignment's path is one word, space included
    (read as ``a`` it named no repository, and the one there ran its program)."""
    marks = tmp_path / "marks"
    elsewhere = tmp_path / "else where"
    _evil_repo(elsewhere, marks)
    out = _run(f'GIT_DIR="{elsewhere}/.git" GIT_WORK_TREE="{elsewhere}" git diff', top)
    assert _ran(marks) == [], out.content
    env = {"PATH": os.environ["PATH"], "HOME": str(top.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    plain = f'GIT_DIR="{elsewhere}/.git" GIT_WORK_TREE="{elsewhere}" git diff'
    subprocess.run(["bash", "-c", plain], cwd=top, env=env, capture_output=True)
    assert _ran(marks) != []  # the control: plainly, the program runs

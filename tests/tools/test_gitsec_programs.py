"""Red team (gitsec): more settings of a repository's own config that make git run
a program of its choosing, which infai's hardening did not override:

- ``instaweb.httpd`` (``git instaweb`` starts it as the web server) and
  ``instaweb.modulePath`` (where apache loads its modules from);
- ``remote.<name>.vcs`` with a slash: git runs ``git-remote-<vcs>`` as a path
  (``x/../../evil``: relative to the working directory, where a command can make
  the ``git-remote-x`` directory), not as a helper found on ``PATH``;
- ``rebase.instructionFormat`` with a line break (``%n``, ``%b``, ``%w()``):
  each commit's line of ``git rebase -i``'s todo list became two, the second an
  ``exec`` line, run once infai's ``sequence.editor`` (``:``) left the list as is;
- ``diff.tool``/``merge.tool`` (and ``guitool``) with a slash: ``git difftool``
  and ``git mergetool`` *source* the file of that name in git's ``mergetools``
  directory, and ``../../..`` leads anywhere;

Each runs with the sandbox off, where nothing else confines it. Judged by
effect: the marker the program leaves."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitattack import control, git, ran, unconfined


def _repo(root: Path) -> tuple[Path, Path]:
    """A repository with one commit and a changed file, and a script that leaves
    ``marks/ran-ARG`` when run (or ``marks/ran-sourced`` when sourced)."""
    repo, marks = root / "repo", root / "marks"
    repo.mkdir()
    marks.mkdir()
    script = marks / "evil.sh"
    script.write_text(f'#!/bin/sh\ntouch "{marks}/ran-${{1:-sourced}}"\n')
    script.chmod(0o755)
    git(repo, "init", "-q")
    for key, value in {"user.name": "t", "user.email": "t@t.example"}.items():
        git(repo, "config", key, value)
    (repo / "f.txt").write_text("one\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-qm", "one")
    (repo / "f.txt").write_text("two\n")
    return repo, script


def test_git_instaweb_starts_no_web_server_the_repository_names(tmp_path: Path) -> None:
    repo, script = _repo(tmp_path)
    git(repo, "config", "instaweb.httpd", f"{script} httpd")
    git(repo, "config", "instaweb.local", "true")
    command = "git instaweb --start; git instaweb --stop"
    out = unconfined(command, repo)
    assert ran(tmp_path / "marks") == [], out.content
    control(command, repo)
    assert ran(tmp_path / "marks") == ["ran-httpd"]


def test_a_remotes_vcs_names_no_program_by_path(tmp_path: Path) -> None:
    repo, script = _repo(tmp_path)
    (repo / "git-remote-x").mkdir()
    git(repo, "config", "remote.o.url", "somewhere")
    git(repo, "config", "remote.o.vcs", f"x/../../marks/{script.name}")
    command = "git fetch o"
    out = unconfined(command, repo)
    assert ran(tmp_path / "marks") == [], out.content
    control(command, repo)
    assert ran(tmp_path / "marks") == ["ran-o"]


@pytest.mark.parametrize(
    ("key", "command"),
    [
        ("diff.tool", "git difftool -y f.txt"),
        ("diff.guitool", "git difftool -y -g f.txt"),
        ("merge.tool", "git difftool -y f.txt"),  # (difftool falls back to merge.tool)
        ("merge.guitool", "git difftool -y -g f.txt"),
    ],
)
def test_a_diff_or_merge_tool_sources_no_file_by_path(
    tmp_path: Path, key: str, command: str
) -> None:
    repo, _ = _repo(tmp_path)
    sourced = tmp_path / "marks" / "tool.sh"
    sourced.write_text(f'touch "{tmp_path}/marks/ran-sourced"\n')
    done = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True)
    tools = Path(done.stdout.strip()) / "mergetools"
    git(repo, "config", key, os.path.relpath(sourced, tools))
    out = unconfined(command, repo)
    assert ran(tmp_path / "marks") == [], out.content
    control(command, repo)
    assert ran(tmp_path / "marks") == ["ran-sourced"]


@pytest.mark.parametrize("command", ["git -C {w} status", "cp {w} b", "git push {w}"])
def test_a_word_too_long_to_name_a_file_does_not_break_the_command(
    tmp_path: Path, command: str
) -> None:
    """Looking for the repositories a command's words name, pathlib raised on a
    name too long for the system (``ENAMETOOLONG``; a directory not searchable,
    ``EACCES``, likewise), and the command never ran: the tool call crashed."""
    repo, _ = _repo(tmp_path)
    out = unconfined(command.format(w="a" * 5000) + "; echo ran", repo)
    assert out.content.rstrip().endswith("ran"), out.content


@pytest.mark.parametrize("fmt", ["%s%nexec {evil} rebase", "%s%x0a%b"])
def test_a_rebase_todo_list_gets_no_exec_line_from_the_repository(tmp_path: Path, fmt: str) -> None:
    repo, script = _repo(tmp_path)
    git(repo, "commit", "-qam", "two", "-m", f"exec {script} rebase")  # a body line
    git(repo, "config", "rebase.instructionFormat", fmt.format(evil=script))
    out = unconfined("git rebase -i HEAD~1", repo)
    assert ran(tmp_path / "marks") == [], out.content
    # the control: the same rebase, with only infai's editor (a no-op) kept
    control("git -c sequence.editor=: rebase -i HEAD~1", repo)
    assert ran(tmp_path / "marks") == ["ran-rebase"]

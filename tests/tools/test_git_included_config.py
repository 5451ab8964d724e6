"""Git config included from the working tree is git config: guarded like ``.git/``.

Finding (issue 28, medium): ``.git/config`` may include a file of the working
tree (``include.path = ../.gitconfig.project``, a common pattern). It is an
ordinary file a command or a write tool could change, and the user's own ``git
status`` later ran its ``core.fsmonitor``, outside any sandbox. Judged by
effect: the user's plain git, run afterwards, leaves no marker.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from infai.tools import (
    Policy,
    Rule,
    Sandbox,
    SandboxSettings,
    ToolContext,
    ToolOutput,
    builtin_tools,
)
from infai.tools.git_hardening import included_config_files
from infai.tools.shell import Bash

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)
HOOK = "[core]\n\tfsmonitor = touch {marker}\n"


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(repo.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".gitconfig.project").write_text("[user]\n\tname = project\n")
    (repo / "sub").mkdir()
    with (repo / ".git" / "config").open("a") as config:
        config.write("[include]\n\tpath = ../.gitconfig.project\n")
        config.write('[includeIf "onbranch:never"]\n\tpath = "../sub/later.cfg"  # not yet\n')
    return repo


def bash(repo: Path, command: str) -> ToolOutput:
    tool = Bash(sandbox=Sandbox(SandboxSettings()))
    return asyncio.run(tool.run({"command": command}, ToolContext(repo, "s")))


def test_the_included_files_are_found_without_running_git(repo: Path) -> None:
    assert set(included_config_files(repo / "sub")) == {
        (repo / ".gitconfig.project").resolve(),
        (repo / "sub" / "later.cfg").resolve(),
    }
    assert included_config_files(repo.parent) == ()


@needs_bwrap
def test_a_command_cannot_change_an_included_config(repo: Path) -> None:
    marker = repo.parent / "ran-fsmonitor"
    hook = HOOK.format(marker=marker)
    out = bash(
        repo,
        f"printf '{hook}' >> .gitconfig.project; printf '{hook}' > sub/later.cfg; "
        "mv .gitconfig.project moved.cfg",
    )
    assert "Read-only file system" in out.content or "Device or resource busy" in out.content
    assert (repo / ".gitconfig.project").read_text() == "[user]\n\tname = project\n"
    assert (repo / "sub" / "later.cfg").read_text() == ""  # made empty, read-only
    _git(repo, "status")  # the user's own git, later, unconfined
    assert not marker.exists()
    # the control: the same change made outside the sandbox is run by the user's git
    with (repo / ".gitconfig.project").open("a") as config:
        config.write(hook)
    _git(repo, "status")
    assert marker.exists()


def test_the_write_tools_need_a_rule_naming_the_exact_path(repo: Path) -> None:
    wide = Policy([Rule.parse("allow", "write_file *"), Rule.parse("allow", "edit_file *")])
    context = ToolContext(repo, "s")
    tools = {t.spec.name: t for t in builtin_tools()}
    hook = HOOK.format(marker=repo.parent / "ran")
    for tool, arguments in (
        ("write_file", {"path": ".gitconfig.project", "content": hook}),
        ("edit_file", {"path": ".gitconfig.project", "old_text": "[user]", "new_text": hook}),
        ("write_file", {"path": "sub/later.cfg", "content": hook}),
    ):
        decision = asyncio.run(wide.decide(tool, arguments, context))
        assert not decision.allowed, arguments
        assert "git's included config" in decision.reason
    assert (repo / ".gitconfig.project").read_text() == "[user]\n\tname = project\n"
    # an ordinary file under the same rule is written
    args: dict[str, Any] = {"path": "notes.txt", "content": "x"}
    assert asyncio.run(wide.decide("write_file", args, context)).allowed
    assert not asyncio.run(tools["write_file"].run(args, context)).is_error


@needs_bwrap
def test_an_included_config_in_a_directory_not_made_yet_is_guarded(repo: Path) -> None:
    """gitsec: an include whose directory did not exist was neither made nor
    mounted read-only, so a command made the directory and wrote the config there
    (a FIFO too, which it could keep feeding once the file was mounted)."""
    with (repo / ".git" / "config").open("a") as config:
        config.write("[include]\n\tpath = ../conf/d/extra.cfg\n")
    marker = repo.parent / "ran-fsmonitor"
    hook = HOOK.format(marker=marker)
    out = bash(repo, f"mkdir -p conf/d; printf '{hook}' > conf/d/extra.cfg")
    assert (repo / "conf" / "d" / "extra.cfg").read_text() == "", out.content
    _git(repo, "status")  # the user's own git, later, unconfined
    assert not marker.exists()

"""Red team: repositories whose config the hardening did not read (sandbox off).

- A conditional include (``includeIf "onbranch:x"``, ``hasconfig:remote.*.url``)
  that does not hold when infai reads the config, and that the command itself
  makes hold (``git checkout x``, ``git remote add``) before its ``git diff``:
  the driver the included file names ran.
- ``env -C DIR git diff`` (``--chdir``), ``make -C DIR``: git opened DIR's
  repository, which the text names only as the wrapper's directory.
- A repository the command copies or links (``cp -r``, ``ln -s``) from one its
  text names: that one is read. Not fixed (strict xfail): one unpacked from an
  archive (or otherwise made from what names no repository) cannot be read before.

Judged by effect: the marker the configured program leaves.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from infai.tools import Sandbox, ToolContext, ToolOutput
from infai.tools.shell import Bash


def _git(repo: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _repo(repo: Path, marks: Path) -> Path:
    """A repository with a changed file and a branch ``other``; returns a script
    that leaves ``marks/ran-ARG`` when run."""
    repo.mkdir(parents=True)
    marks.mkdir(parents=True, exist_ok=True)
    script = marks / "evil.sh"
    script.write_text(f'#!/bin/sh\ntouch "{marks}/ran-$1"\n')
    script.chmod(0o755)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "f.txt").write_text("one\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    _git(repo, "branch", "other")
    (repo / "f.txt").write_text("two\n")
    return script


def _run(command: str, wd: Path) -> ToolOutput:
    tool = Bash(sandbox=Sandbox.off())
    return asyncio.run(tool.run({"command": command}, ToolContext(wd, "s")))


def _ran(marks: Path) -> list[str]:
    return sorted(p.name for p in marks.iterdir() if p.name.startswith("ran-"))


def _control(command: str, wd: Path) -> None:
    """The same command without infai's overrides."""
    env = {"PATH": os.environ["PATH"], "HOME": str(wd), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["bash", "-c", command], cwd=wd, env=env, capture_output=True)


@pytest.mark.parametrize(
    ("condition", "command"),
    [
        ("onbranch:other", "git checkout -q other && git diff"),
        (
            "hasconfig:remote.*.url:https://example.org/**",
            "git remote add o https://example.org/x && git diff",
        ),
    ],
)
def test_an_include_the_command_makes_active_names_no_driver_that_runs(
    tmp_path: Path, condition: str, command: str
) -> None:
    marks = tmp_path / "marks"
    repo = tmp_path / "repo"
    script = _repo(repo, marks)
    (repo / ".git" / "evil.cfg").write_text(f"[diff]\n\texternal = {script} included\n")
    _git(repo, "config", f"includeIf.{condition}.path", "evil.cfg")
    out = _run(command, repo)
    assert _ran(marks) == [], out.content
    _run("git checkout -q main; git remote remove o", repo)
    _control(command, repo)
    assert _ran(marks) == ["ran-included"]


@pytest.mark.parametrize(
    "command",
    ["env -C {r} git diff", "env --chdir={r} git diff", "env --chdir {r} git st", "make -sC {r}"],
)
def test_a_wrappers_directory_is_a_repository_the_command_opens(
    tmp_path: Path, command: str
) -> None:
    if command.startswith("make") and shutil.which("make") is None:
        pytest.skip("make is not installed")
    marks = tmp_path / "marks"
    elsewhere = tmp_path / "elsewhere"
    script = _repo(elsewhere, marks)
    _git(elsewhere, "config", "diff.external", f"{script} external")
    _git(elsewhere, "config", "alias.st", f"!{script} alias")
    (elsewhere / "Makefile").write_text("all:\n\tgit diff\n")
    top = tmp_path / "top"
    top.mkdir()
    _git(top, "init", "-q")
    out = _run(command.format(r=elsewhere), top)
    assert _ran(marks) == [], out.content
    _control(command.format(r=elsewhere), top)
    assert _ran(marks) != []


@pytest.mark.parametrize(
    "command", ["cp -r {r} copy && git -C copy diff", "ln -s {r} l && cd l && git diff"]
)
def test_a_repository_copied_or_linked_by_the_command_runs_no_driver(
    tmp_path: Path, command: str
) -> None:
    """gitsec: the copy (or link) of a repository the text names (``cp -r``'s
    source) was not read before the command made it; each word that names an
    existing repository is read now, and its drivers are overridden by name."""
    marks = tmp_path / "marks"
    elsewhere = tmp_path / "elsewhere"
    script = _repo(elsewhere, marks)
    _git(elsewhere, "config", "diff.external", f"{script} external")
    top = tmp_path / "top"
    top.mkdir()
    _git(top, "init", "-q")
    out = _run(command.format(r=elsewhere), top)
    assert _ran(marks) == [], out.content
    shutil.rmtree(top / "copy", ignore_errors=True)
    (top / "l").unlink(missing_ok=True)
    _control(command.format(r=elsewhere), top)
    assert _ran(marks) == ["ran-external"]


@pytest.mark.xfail(
    strict=True,
    reason="a repository that appears while the command runs from what names none "
    "(an archive unpacked) is not there to be read before it starts; env overrides "
    "are by exact name and a repository's drivers cannot be named before it exists",
)
def test_a_repository_unpacked_by_the_command_runs_no_driver(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    elsewhere = tmp_path / "elsewhere"
    script = _repo(elsewhere, marks)
    _git(elsewhere, "config", "diff.external", f"{script} external")
    archive = tmp_path / "repo.tar"
    subprocess.run(["tar", "-C", str(tmp_path), "-cf", str(archive), "elsewhere"], check=True)
    top = tmp_path / "top"
    top.mkdir()
    _git(top, "init", "-q")
    out = _run(f"tar xf {archive} && git -C elsewhere diff", top)
    assert _ran(marks) == [], out.content


def _perl_add_interactive() -> bool:
    """Whether this git still has the script ``git add -p`` runs with
    ``add.interactive.useBuiltin = false`` (git < 2.40): it pipes its diff
    through ``interactive.diffFilter`` without a terminal."""
    done = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True)
    return (Path(done.stdout.strip()) / "git-add--interactive").exists()


@pytest.mark.parametrize(
    ("settings", "command"),
    [
        ({"trailer.y.command": "trailer"}, "git commit -qam m --trailer 'Reviewed-by: a'"),
        ({"trailer.x.cmd": "trailer"}, "echo msg | git interpret-trailers --trailer x=1"),
        (
            {
                "interactive.diffFilter": "filter",
                "add.interactive.useBuiltin": "false",
                "color.ui": "always",
            },
            "git add -p; git checkout -p",
        ),
    ],
)
def test_trailer_commands_and_diff_filters_of_a_repository_do_not_run(
    tmp_path: Path, settings: dict[str, str], command: str
) -> None:
    marks = tmp_path / "marks"
    repo = tmp_path / "repo"
    script = _repo(repo, marks)
    _git(repo, "config", "user.name", "t")
    _git(repo, "config", "user.email", "t@t")
    for key, value in settings.items():
        _git(repo, "config", key, f"{script} {value}" if value in ("trailer", "filter") else value)
    out = _run(command, repo)
    assert _ran(marks) == [], out.content
    if "trailer" in command or _perl_add_interactive():
        _control(command, repo)
        assert _ran(marks) != []


def test_an_include_that_is_a_fifo_does_not_hide_the_repositorys_drivers(tmp_path: Path) -> None:
    """The repository's config includes a FIFO in its work tree: git reading the
    config waited on it until infai gave up (after 10 s) with no setting read, so
    nothing was overridden, and the command, feeding the FIFO itself, ran the
    driver. Read without git waiting, the drivers are overridden."""
    marks = tmp_path / "marks"
    repo = tmp_path / "repo"
    script = _repo(repo, marks)
    os.mkfifo(repo / "extra.cfg")
    _git(repo, "config", "diff.external", f"{script} external")
    _git(repo, "config", "include.path", "../extra.cfg")
    out = _run("(while :; do echo >> extra.cfg; done) & git diff; kill $!", repo)
    assert _ran(marks) == [], out.content


@pytest.mark.parametrize("fifo", ["sub/.git", "top-include.cfg", "sub/.git/commondir"])
def test_a_fifo_where_infai_reads_git_config_does_not_hang_it(tmp_path: Path, fifo: str) -> None:
    """A command may make a FIFO in the working tree: as a nested repository's
    ``.git`` (a file naming the git directory), its ``commondir`` or an include
    of an inactive condition. Opened to be read, each waited for a writer, and
    infai with it, forever, before any command (sandbox off: nested repositories
    are read)."""
    top = tmp_path / "top"
    _repo(top, tmp_path / "marks")
    _git(top, "config", "includeIf.onbranch:elsewhere.path", "../top-include.cfg")
    (top / "sub").mkdir()
    if fifo.endswith("commondir"):
        _git(top / "sub", "init", "-q")
        _git(top / "sub", "config", "diff.x.textconv", "cat")
    os.mkfifo(top / fifo)
    said: list[str] = []
    # in a thread of its own: one that hangs is left behind, and the test fails
    running = threading.Thread(
        target=lambda: said.append(_run("echo ran", top).content), daemon=True
    )  # (echo: a git of the command's own would wait on such a FIFO)
    running.start()
    running.join(30)
    assert said and "ran" in said[0], "infai hung before the command"

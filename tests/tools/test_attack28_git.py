"""Red team (attack28): git settings a repository's own config names that run a
program, beyond the ones issue 28 covered: ``core.gitProxy`` (git keeps the
*first* value, so the ``GIT_CONFIG_*`` override came too late), ``tar.<fmt>.command``
(``git archive``), ``man.<tool>.cmd`` (``git help``), ``difftool.<tool>.cmd``
(``git difftool``) and ``browser.<tool>.cmd`` (``git web--browse``).

Each runs with the sandbox off (the README: every command, sandboxed or not, runs
no code a repository configured) and confined; the script leaves a marker in the
working directory (writable either way)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)

#: (config key, value's argument, the command that would run it)
ATTACKS = (
    ("core.gitProxy", "", "git ls-remote git://example.invalid/x"),
    ("tar.tgz.command", "tar", "git archive --format=tgz -o /dev/null HEAD"),
    ("man.viewer", "", "git help log"),
    ("difftool.evil.cmd", "difftool", "git difftool -y --tool=evil f.txt"),
    ("browser.evil.cmd", "browser", "git web--browse --browser=evil x"),
    ("imap.tunnel", "imap", "git format-patch -1 --stdout | git imap-send"),
)


def _repo(root: Path) -> tuple[Path, Path]:
    repo = root / "repo"
    marks = repo / "marks"
    marks.mkdir(parents=True)
    script = marks / "evil.sh"
    script.write_text(f'#!/bin/sh\ntouch "{marks}/ran-$1"\n')
    script.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    git("init", "-q")
    (repo / "f.txt").write_text("one\n")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    (repo / "f.txt").write_text("two\n")
    git("config", "core.gitProxy", str(script))  # run as `script host port`: ran-example.invalid
    git("config", "tar.tgz.command", f"{script} tar")
    git("config", "man.viewer", "evil")
    git("config", "man.evil.cmd", f"{script} man")
    git("config", "difftool.evil.cmd", f"{script} difftool")
    git("config", "browser.evil.cmd", f"{script} browser")
    git("config", "imap.folder", "INBOX")
    git("config", "imap.tunnel", f"{script} imap")
    return repo, marks


def _run(repo: Path, sandbox: Sandbox) -> str:
    commands = "; ".join(c for _, _, c in ATTACKS if c)
    tool = Bash(sandbox=sandbox)
    out = asyncio.run(tool.run({"command": commands}, ToolContext(repo, "s")))
    return out.content


@pytest.mark.parametrize("mode", ["required", "off"])
def test_git_runs_no_repository_configured_proxy_archiver_viewer_or_tool(
    tmp_path: Path, mode: str
) -> None:
    repo, marks = _repo(tmp_path)
    out = _run(repo, Sandbox(SandboxSettings(mode=mode)))  # type: ignore[arg-type]
    assert sorted(p.name for p in marks.iterdir()) == ["evil.sh"], out
    # the control: the same commands, with infai's overrides taken away, run each one
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    commands = "; ".join(c for _, _, c in ATTACKS if c)
    subprocess.run(
        ["sh", "-c", commands], cwd=repo, env=env, capture_output=True, stdin=subprocess.DEVNULL
    )
    ran = {p.name for p in marks.iterdir()}
    assert {
        "ran-example.invalid",
        "ran-tar",
        "ran-man",
        "ran-difftool",
        "ran-browser",
        "ran-imap",
    } <= ran


def test_a_users_own_tool_settings_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only what the repository itself names is emptied: a difftool of the user's
    global config is not listed (nor is a global one looked at)."""
    repo, _ = _repo(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text('[difftool "mine"]\n\tcmd = meld "$LOCAL" "$REMOTE"\n')
    monkeypatch.setenv("HOME", str(home))
    env = Sandbox().environment(working_dir=repo)
    given = {env[k]: env[k.replace("KEY", "VALUE")] for k in env if k.startswith("GIT_CONFIG_KEY_")}
    assert given["difftool.evil.cmd"] == "" and given["tar.tgz.command"] == ""
    assert "difftool.mine.cmd" not in given
    assert env["GIT_PROXY_COMMAND"] == ""


def test_a_nested_repositorys_drivers_do_not_run(tmp_path: Path) -> None:
    """attack28: overrides were read only for the repository seen from the working
    directory; a nested repository's own ``diff.external`` ran under ``git -C``."""
    top, _ = _repo(tmp_path)
    sub = top / "vendor" / "lib"
    nested, marks = _repo(sub)
    subprocess.run(
        ["git", "config", "diff.external", f"{marks / 'evil.sh'} external"],
        cwd=nested,
        check=True,
    )
    tool = Bash(sandbox=Sandbox.off())
    asyncio.run(tool.run({"command": f"git -C {nested} diff"}, ToolContext(top, "s")))
    assert not (marks / "ran-external").exists()
    # the control: the same git with infai's overrides taken away runs it
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-C", str(nested), "diff"], cwd=top, env=env, capture_output=True)
    assert (marks / "ran-external").exists()

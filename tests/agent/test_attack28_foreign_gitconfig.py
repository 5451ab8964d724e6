"""Red team (attack28): an imported session's checkout wrote a git config file
the repository includes.

``.git/`` is never restored and an imported session never writes ``.infai/``,
but a repository may include a config file from its working tree
(``[include] path = ../.gitconfig.project``): git config as much as
``.git/config``, guarded so for commands and write tools (issue 28). An
imported snapshot holding that file with a ``core.fsmonitor`` of its choosing
was checked out over it, and the user's own next ``git status`` ran the
program. Judged by the effect: the marker the program would leave.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.checkpoints import Checkpoints
from infai.shells.cli import main
from infai.store import Store

EVIL = "[core]\n\tfsmonitor = touch ran-fsmonitor; false #\n"


def infai(home: Path, *args: str) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


def git(cwd: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def test_checking_out_an_imported_session_never_writes_included_git_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "project"
    work.mkdir()
    git(work, "init", "-q")
    git(work, "config", "include.path", "../.gitconfig.project")
    (work / ".gitconfig.project").write_text("[core]\n\tautocrlf = false\n")
    (work / "README").write_text("mine\n")
    # the attacker's directory, snapshot and export
    theirs, store_home = tmp_path / "attacker-dir", tmp_path / "attacker-store"
    theirs.mkdir()
    (theirs / ".gitconfig.project").write_text(EVIL)
    (theirs / "README").write_text("nice project\n")
    store = Store(store_home)
    cp = Checkpoints(store.objects, theirs, store.home, watch=False)
    snap = cp.snapshot()
    cp.close()
    sid = store.create_session(working_dir=str(theirs)).id
    with store.open_writer(sid) as writer:
        event = writer.append(snap.record("turn start"), "system").id
    export = tmp_path / "shared.jsonl"
    infai(store_home, "session", "export", sid, "-o", str(export))
    # the user imports it and checks it out in the project
    home = tmp_path / "home"
    monkeypatch.chdir(work)
    infai(home, "session", "import", str(export))
    done = infai(home, "session", "checkout", "--force", "--json", sid, event)
    assert (work / "README").read_text() == "nice project\n"  # the rest is restored
    assert (work / ".gitconfig.project").read_text() != EVIL
    refused = json.loads(done.stdout)["plan"]["not_restorable"]
    assert ".gitconfig.project" in refused
    git(work, "status")  # the user's own git, unconfined
    assert not (work / "ran-fsmonitor").exists()
    # the control: that file, so written, makes the user's git status run the program
    (work / ".gitconfig.project").write_text(EVIL)
    git(work, "status")
    assert (work / "ran-fsmonitor").exists()

"""Red team (gitsec): ``git send-email`` runs programs a repository's own config
names: ``sendemail.sendmailCmd`` (the mail goes through it), ``sendemail.toCmd``
and ``ccCmd`` (each run on every patch for more recipients), ``smtpServer`` as an
absolute path (run as sendmail), and each of them per identity
(``sendemail.<id>.toCmd``, chosen by ``sendemail.identity`` or ``--identity``),
which send-email takes before the plain one. None was overridden: the repository's
program ran, with the sandbox off unconfined.

Judged by effect: the marker the configured program leaves."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gitattack import git, ran
from infai.tools import Sandbox, SandboxSettings, ToolContext
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)

#: send-email's options: no prompt, and (--dry-run) no mail sent where the
#: case is only about computing recipients
SEND = "git send-email --confirm=never --no-validate --to=a@b.example --from=t@t.example -1"


def _repo(root: Path, settings: dict[str, str]) -> tuple[Path, Path]:
    """A repository with one commit and ``settings`` (a value ``{evil}`` is the
    marker script); returns it and where the markers go."""
    repo, marks = root / "repo", root / "repo" / "marks"
    marks.mkdir(parents=True)
    script = marks / "evil.sh"
    script.write_text(f'#!/bin/sh\ntouch "{marks}/ran-$1"\ncat >/dev/null\n')
    script.chmod(0o755)
    git(repo, "init", "-q")
    (repo / "f.txt").write_text("one\n")
    git(repo, "add", "f.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t.example", "commit", "-qm", "one")
    for key, value in {"user.name": "t", "user.email": "t@t.example", **settings}.items():
        git(repo, "config", key, value.format(evil=script))
    return repo, marks


#: (settings, command, sandbox mode): unconfined each, and confined once
CASES = [
    ({"sendemail.sendmailCmd": "{evil} sendmail"}, SEND, "off"),
    ({"sendemail.smtpServer": "{evil}"}, SEND, "off"),
    ({"sendemail.toCmd": "{evil} to"}, SEND + " --dry-run", "off"),
    ({"sendemail.ccCmd": "{evil} cc"}, SEND + " --dry-run", "off"),
    ({"sendemail.identity": "x", "sendemail.x.sendmailCmd": "{evil} id"}, SEND, "off"),
    ({"sendemail.x.smtpServer": "{evil}"}, SEND + " --identity=x", "off"),
    ({"sendemail.x.toCmd": "{evil} idto"}, SEND + " --identity=x --dry-run", "off"),
    ({"sendemail.identity": "x", "sendemail.x.ccCmd": "{evil} id"}, SEND, "required"),
]


@pytest.mark.parametrize(
    ("settings", "command", "mode"), CASES, ids=[" ".join(c[0]) + f" {c[2]}" for c in CASES]
)
def test_send_email_runs_no_program_the_repository_names(
    tmp_path: Path, settings: dict[str, str], command: str, mode: str
) -> None:
    repo, marks = _repo(tmp_path, settings)
    sandbox = Sandbox(SandboxSettings(mode=mode))  # type: ignore[arg-type]
    out = asyncio.run(Bash(sandbox=sandbox).run({"command": command}, ToolContext(repo, "s")))
    assert ran(marks) == [], out.content
    # the control: the same command with infai's overrides taken away runs it
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(
        ["sh", "-c", command], cwd=repo, env=env, capture_output=True, stdin=subprocess.DEVNULL
    )
    assert ran(marks) != []


def test_a_users_own_send_email_settings_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only what the repository sets is overridden: a user's global sendmail
    program, or a repository's SMTP host by name, is left as it is."""
    repo, _ = _repo(tmp_path, {"sendemail.smtpServer": "smtp.example.org"})
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[sendemail]\n\tsendmailCmd = msmtp\n")
    monkeypatch.setenv("HOME", str(home))
    env = Sandbox().environment(working_dir=repo)
    given = [env[k] for k in env if k.startswith("GIT_CONFIG_KEY_")]
    assert not [k for k in given if k.lower().startswith("sendemail.")]

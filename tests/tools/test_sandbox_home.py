"""``sandbox.home = "hidden"``: reads that stay home, attacked for real under bubblewrap.

``$HOME`` is a fresh directory outside ``/tmp`` (which the sandbox replaces)
holding what a real one holds: another project's ``.env``, a ``~/.bashrc``
exporting a key, shell history, and toolchain directories. Each attack runs
through the ``bash`` tool and is judged by its output; each has a control,
``home = "visible"``, that reads the markers, so the check would see it succeed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext, ToolOutput, parse_sandbox
from infai.tools.sandbox_home import home_report
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)

ENV = "MARKER-env-51aa"
BASHRC = "MARKER-bashrc-0c7e"
HISTORY = "MARKER-history-9d13"
CARGO_TOKEN = "MARKER-cargo-token-2b6f"
STORE = "MARKER-store-77e0"
MARKERS = (ENV, BASHRC, HISTORY)
ATTACK = (
    "cat ~/other-project/.env ~/.bashrc ~/.bash_history; grep -r MARKER ~; "
    "find ~ -type f -exec cat {} +; ls -A ~; true"
)
HIDDEN = SandboxSettings(home="hidden")
VISIBLE = SandboxSettings(home="visible")


def bash(wd: Path, command: str, sandbox: Sandbox, **args: Any) -> ToolOutput:
    tool = Bash(sandbox=sandbox)
    return asyncio.run(tool.run({"command": command, **args}, ToolContext(wd, "s")))


def _scratch(prefix: str) -> Path:
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base)).resolve()


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = _scratch("infai-home-test-")
    (root / "other-project").mkdir()
    (root / "other-project" / ".env").write_text(f"OPENAI_API_KEY={ENV}\n")
    (root / ".bashrc").write_text(f"export ANTHROPIC_API_KEY={BASHRC}\n")
    (root / ".bash_history").write_text(f"curl -H 'token: {HISTORY}'\n")
    (root / ".cargo").mkdir()
    (root / ".cargo" / "config.toml").write_text("[build]\njobs = 1 # TOOLCHAIN-CONFIG\n")
    (root / ".cargo" / "credentials.toml").write_text(f'[registry]\ntoken = "{CARGO_TOKEN}"\n')
    (root / ".gitconfig").write_text("[user]\n\tname = Home Test\n\temail = h@example.com\n")
    (root / "proj" / ".infai").mkdir(parents=True)  # what a first command makes
    monkeypatch.setenv("HOME", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def outside() -> Iterator[Path]:
    wd = _scratch("infai-home-wd-")
    yield wd
    shutil.rmtree(wd, ignore_errors=True)


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_other_projects_dotfiles_and_history_read_nothing(
    home: Path, outside: Path, where: str
) -> None:
    wd = home / "proj" if where == "inside" else outside
    (wd / "mine.txt").write_text("MINE")
    out = bash(wd, ATTACK + "; cat mine.txt; echo new > made.txt", Sandbox(HIDDEN))
    assert not any(m in out.content for m in MARKERS), out.content
    assert "MINE" in out.content and (wd / "made.txt").read_text() == "new\n"
    # control: the home directory visible, the same reads find every marker
    shown = bash(wd, ATTACK, Sandbox(VISIBLE))
    assert all(m in shown.content for m in MARKERS), shown.content


def test_toolchains_stay_readable_their_credentials_do_not(home: Path, outside: Path) -> None:
    store = home / ".cache" / "infai"
    store.mkdir(parents=True)
    (store / "token").write_text(STORE)
    (home / ".cache" / "huggingface").mkdir()
    (home / ".cache" / "huggingface" / "token").write_text(CARGO_TOKEN)
    sandbox = Sandbox(HIDDEN, private=(store,))
    command = (
        "cat ~/.cargo/config.toml ~/.cargo/credentials.toml ~/.cache/infai/token "
        "~/.cache/huggingface/token; "
        "git config user.name; echo x > ~/planted; echo x > ~/.cargo/planted; true"
    )
    for wd in (home / "proj", outside):
        before = sorted(str(p) for p in home.rglob("*"))
        out = bash(wd, command, sandbox)
        assert "TOOLCHAIN-CONFIG" in out.content and "Home Test" in out.content, out.content
        assert CARGO_TOKEN not in out.content and STORE not in out.content, out.content
        assert "Read-only file system" in out.content
        assert sorted(str(p) for p in home.rglob("*")) == before
    shown = bash(outside, command, Sandbox(VISIBLE, private=()))
    assert STORE in shown.content  # control: without `private`, the store reads


def test_symlinked_entries_lead_where_they_point_and_no_further(home: Path, outside: Path) -> None:
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    (home / ".gitconfig").unlink()
    (dotfiles / "gitconfig").write_text("[user]\n\tname = Linked Name\n")
    (dotfiles / "secret.env").write_text(ENV)
    (home / ".gitconfig").symlink_to(dotfiles / "gitconfig")
    (outside / "rustup").mkdir()
    (outside / "rustup" / "settings.toml").write_text("RUSTUP-SETTINGS")
    (home / ".rustup").symlink_to(outside / "rustup")
    out = bash(
        home / "proj",
        "git config user.name; cat ~/.rustup/settings.toml; cat ~/dotfiles/secret.env; true",
        Sandbox(HIDDEN),
    )
    assert "Linked Name" in out.content and "RUSTUP-SETTINGS" in out.content, out.content
    assert ENV not in out.content


def test_working_in_home_hides_nothing_more(home: Path) -> None:
    """The working directory is never hidden: run in ``$HOME``, all of it is the
    work, and only the hidden list (credentials) still reads as empty."""
    out = bash(home, "cat .bashrc ~/.cargo/credentials.toml; true", Sandbox(HIDDEN))
    assert BASHRC in out.content and CARGO_TOKEN not in out.content, out.content
    assert home_report("hidden", (), str(home))["hidden"] is False


def test_unhide_brings_a_home_path_back(home: Path, outside: Path) -> None:
    settings, _ = parse_sandbox({"unhide": ["~/other-project"]}, HIDDEN, project=False)
    out = bash(outside, "cat ~/other-project/.env ~/.bashrc; true", Sandbox(settings))
    assert ENV in out.content and BASHRC not in out.content, out.content
    report = home_report("hidden", settings.home_unhide, str(outside))
    assert report["hidden"] and "~/other-project" in report["readable"]
    assert "~/.cargo" in report["readable"] and "~/.bashrc" not in report["readable"]


def test_the_setting_and_who_may_set_it(home: Path) -> None:
    assert SandboxSettings().home == "hidden"
    mine, notices = parse_sandbox({"home": "visible"}, SandboxSettings(), project=False)
    assert mine.home == "visible" and not notices
    theirs, notices = parse_sandbox({"home": "visible"}, HIDDEN, project=True)
    assert theirs.home == "hidden" and "home ignored" in notices[0]
    tighter, notices = parse_sandbox({"home": "hidden"}, VISIBLE, project=True)
    assert tighter.home == "hidden" and not notices
    with pytest.raises(ValueError, match=r"sandbox\.home: must be one of hidden, visible"):
        parse_sandbox({"home": "some"}, HIDDEN, project=False)
    with pytest.raises(ValueError, match=r"sandbox\.unhide: '~' is the home directory"):
        parse_sandbox({"unhide": ["~"]}, HIDDEN, project=False)
    with pytest.raises(ValueError, match=r"sandbox\.unhide: '~/no-such' is not a hidden path"):
        parse_sandbox({"unhide": ["~/no-such"]}, HIDDEN, project=False)


def test_the_model_is_told(home: Path) -> None:
    told = Bash(sandbox=Sandbox(HIDDEN)).spec.description
    assert "missing in the sandbox, by the user's policy (sandbox.home)" in told
    assert "sandbox.home" not in Bash(sandbox=Sandbox(VISIBLE)).spec.description


def test_a_program_started_from_an_argv_sees_the_same_home(home: Path, outside: Path) -> None:
    """An MCP stdio server (:meth:`Sandbox.launch_argv`) kept in ``~/tools`` is out
    of sight until ``unhide`` names it."""
    (home / "tools").mkdir()
    (home / "tools" / "server.py").write_text("print('server-ran')\n")
    argv = [sys.executable, str(home / "tools" / "server.py")]
    unhidden, _ = parse_sandbox({"unhide": ["~/tools"]}, HIDDEN, project=False)
    ran = []
    for settings in (HIDDEN, unhidden):
        launch = Sandbox(settings).launch_argv(argv, outside)
        try:
            done = subprocess.run(
                launch.argv, env=launch.env, pass_fds=launch.fds, capture_output=True, text=True
            )
        finally:
            launch.close()
        ran.append("server-ran" in done.stdout)
    assert ran == [False, True]

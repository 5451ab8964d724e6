"""A hidden or protected path inside a writable directory cannot be carried away by
renaming its parent.

Run in ``$HOME``, a command could ``mv ~/.config ~/c``: ``~/.config/gh`` (hidden)
would then sit at ``~/c/gh``, readable by the next command, and ``~/.config/infai``
(infai's own config, protected) could be made anew and written, turning the
sandbox off for the next start. The directories between a writable root and such
a path are mount points in the sandbox, so they cannot be renamed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext, ToolOutput
from infai.tools.sandbox_hide import pin_args
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)

GH = "MARKER-gh-51aa"
KEYRING = "MARKER-keyring-c3d9"
SSH = "MARKER-ssh-0b7e"
CONFIG = 'model = "mine"\n'


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A ``$HOME`` outside /tmp (which the sandbox replaces) with nested hidden
    paths and infai's config two levels down."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    root = Path(tempfile.mkdtemp(prefix="infai-pin-test-", dir=base)).resolve()
    (root / ".config" / "gh").mkdir(parents=True)
    (root / ".config" / "gh" / "hosts.yml").write_text(GH)
    (root / ".config" / "infai").mkdir()
    (root / ".config" / "infai" / "config.toml").write_text(CONFIG)
    (root / ".local" / "share" / "keyrings").mkdir(parents=True)
    (root / ".local" / "share" / "keyrings" / "login.keyring").write_text(KEYRING)
    monkeypatch.setenv("HOME", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def bash(wd: Path, command: str, sandbox: Sandbox) -> ToolOutput:
    return asyncio.run(Bash(sandbox=sandbox).run({"command": command}, ToolContext(wd, "s")))


def infai_sandbox(home: Path, writable: tuple[str, ...] = ()) -> Sandbox:
    config = home / ".config" / "infai"
    return Sandbox(SandboxSettings(writable=writable), protected=(config,), private=(config,))


MOVE_AWAY = (
    "mv .config c2; mv .local/share .local/s2; mv .local l2; "
    "mkdir -p .config/infai; echo 'sandbox = \"off\"' > .config/infai/config.toml; "
    "echo fine > .config/new.txt; true"
)
READ_MOVED = (
    "cat c2/gh/hosts.yml c2/infai/config.toml .local/s2/keyrings/* "
    "l2/share/keyrings/* l2/s2/keyrings/*; true"
)


def test_run_in_home_the_parents_of_hidden_paths_stay_put(home: Path) -> None:
    sandbox = infai_sandbox(home)
    moved = bash(home, MOVE_AWAY, sandbox)
    assert moved.content.count("Device or resource busy") == 3, moved.content
    read = bash(home, READ_MOVED, sandbox)
    assert GH not in read.content and KEYRING not in read.content
    # on the host: nothing moved, infai's config unchanged, other writes still work
    assert (home / ".config" / "gh" / "hosts.yml").read_text() == GH
    assert (home / ".config" / "infai" / "config.toml").read_text() == CONFIG
    assert (home / ".local" / "share" / "keyrings" / "login.keyring").exists()
    assert not (home / "c2").exists() and not (home / "l2").exists()
    assert (home / ".config" / "new.txt").read_text() == "fine\n"


def test_an_extra_writable_root_gets_the_same(home: Path) -> None:
    """``writable = ["~"]`` with the work elsewhere: the home is a root too."""
    wd = home / "proj"
    wd.mkdir()
    sandbox = infai_sandbox(home, writable=(str(home),))
    moved = bash(wd, f"cd {home} && {MOVE_AWAY}", sandbox)
    assert moved.content.count("Device or resource busy") == 3, moved.content
    assert (home / ".config" / "infai" / "config.toml").read_text() == CONFIG
    assert not (home / "c2").exists()


def test_control_unconfined_the_same_commands_move_everything(home: Path) -> None:
    """The attack is real: without the sandbox it moves the secrets and rewrites
    infai's config."""
    bash(home, MOVE_AWAY, Sandbox.off())
    read = bash(home, READ_MOVED, Sandbox.off())
    assert GH in read.content and KEYRING in read.content
    assert "off" in (home / ".config" / "infai" / "config.toml").read_text()


def test_pin_args_binds_only_the_directories_between() -> None:
    args = pin_args(["/h/.config/gh", "/h/.local/share/keyrings", "/h/.ssh", "/else/x/y"], ["/h"])
    assert args == [
        "--bind", "/h/.config", "/h/.config",
        "--bind", "/h/.local", "/h/.local",
        "--bind", "/h/.local/share", "/h/.local/share",
    ]  # fmt: skip
    assert pin_args(["/h/a/b"], ["/h", "/h/a"]) == []  # a root is bound already


def test_a_renamed_link_entry_keeps_its_target_hidden(home: Path) -> None:
    """``~/.ssh -> dotfiles/ssh``: the link is no mount point, so a command run in
    ``$HOME`` can rename it; its target stays hidden for the commands after (the
    same configured list, in this process)."""
    (home / "dotfiles" / "ssh").mkdir(parents=True)
    (home / "dotfiles" / "ssh" / "id_ed25519").write_text(SSH)
    (home / ".ssh").symlink_to("dotfiles/ssh")
    hidden = ("~/.ssh", "~/.aws")
    first = bash(home, "cat .ssh/id_ed25519; mv .ssh moved && echo moved", sandbox_of(hidden))
    assert SSH not in first.content and "moved" in first.content
    assert (home / "moved").is_symlink()  # (the rename did happen, on the host)
    after = bash(home, "cat dotfiles/ssh/id_ed25519 moved/id_ed25519; true", sandbox_of(hidden))
    assert SSH not in after.content
    # control: a list this process never hid with finds the entry gone, the key readable
    fresh = bash(home, "cat dotfiles/ssh/id_ed25519", sandbox_of(("~/.ssh", "~/.kube")))
    assert SSH in fresh.content


def sandbox_of(hidden: tuple[str, ...]) -> Sandbox:
    return Sandbox(SandboxSettings(hidden=hidden))

"""Hidden paths (``sandbox.hidden``), attacked for real under bubblewrap.

``$HOME`` is a fresh directory outside ``/tmp`` (which the sandbox replaces, so
a home there would be out of sight anyway) holding credential files with marker
secrets. Each attack runs through the ``bash`` tool and is judged by its output
(no marker) and by the host (nothing changed); each has a control, the same
command with nothing hidden (or unconfined), that shows the marker, so the
check would see the attack succeed. The home directory stays visible
(``home = "visible"``): these check the hidden list alone, and
``test_sandbox_home.py`` hiding the rest of ``$HOME``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext, ToolOutput, sandbox_hide
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)

SSH = "MARKER-ssh-4f1c"
AWS = "MARKER-aws-93b2"
NETRC = "MARKER-netrc-7d0e"
MARKERS = (SSH, AWS, NETRC)
#: every way to read a file that comes to mind, over the whole home
READ_ALL = (
    "cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.netrc; grep -r MARKER ~; "
    "find ~ -type f -exec cat {} +; tar cf - -C ~ . | grep -a MARKER; "
    "cat ~/.ssh/* ~/.aws/*; ls -la ~/.ssh ~/.aws; true"
)


VISIBLE = SandboxSettings(home="visible")


def bash(wd: Path, command: str, sandbox: Sandbox | None = None, **args: Any) -> ToolOutput:
    tool = Bash(sandbox=sandbox or Sandbox(VISIBLE))
    return asyncio.run(tool.run({"command": command, **args}, ToolContext(wd, "s")))


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under ``root`` with its content (or link target)."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            out[key] = "-> " + os.readlink(path)
        elif path.is_file():
            out[key] = path.read_bytes()
        else:
            out[key] = "dir"
    return out


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    root = Path(tempfile.mkdtemp(prefix="infai-hide-test-", dir=base)).resolve()
    (root / ".ssh").mkdir(mode=0o700)
    (root / ".ssh" / "id_ed25519").write_text(SSH)
    (root / ".aws").mkdir()
    (root / ".aws" / "credentials").write_text(AWS)
    (root / ".netrc").write_text(NETRC)
    (root / "proj").mkdir()
    monkeypatch.setenv("HOME", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_credentials_read_as_nothing_and_stay_unchanged(home: Path) -> None:
    wd = home / "proj"
    before = snapshot(home)
    out = bash(
        wd,
        f"{READ_ALL}; echo x >> ~/.netrc; echo x > ~/.ssh/planted; rm -rf ~/.ssh ~/.aws; "
        "cp -r ~/.ssh ~/.aws ~/.netrc . ; cat .netrc; tar cf home.tar -C ~ .ssh .aws .netrc",
    )
    assert not any(m in out.content for m in MARKERS), out.content
    assert not any(m.encode() in (wd / "home.tar").read_bytes() for m in MARKERS)
    after = snapshot(home)
    made = {k for k in after if k.startswith("proj/")}  # what it wrote where it may
    assert {k: v for k, v in after.items() if k not in made} == before
    assert "Read-only file system" in out.content  # the writes were stopped, and said so
    # control: nothing hidden, the same reads find every secret
    shown = bash(wd, READ_ALL, Sandbox(SandboxSettings(hidden=(), home="visible")))
    assert all(m in shown.content for m in MARKERS), shown.content


def test_a_hidden_file_reads_empty_rather_than_failing(home: Path) -> None:
    """A hidden file is an empty regular file: a tool reading its config finds it
    empty (a bound /dev/null could not even be opened: bwrap's binds are nodev)."""
    out = bash(home / "proj", "test -f ~/.netrc && wc -c < ~/.netrc && cat ~/.netrc && echo read")
    said = out.content.split("[sandbox]")[0]  # (then a note: ~/.netrc is hidden)
    assert not out.is_error and said.split()[-2:] == ["0", "read"], out.content


def test_a_symlink_in_the_working_dir_reads_nothing(home: Path) -> None:
    wd = home / "proj"
    (wd / "key").symlink_to(home / ".ssh" / "id_ed25519")
    (wd / "awsdir").symlink_to(home / ".aws")
    command = "cat key awsdir/credentials; grep -r MARKER -R .; true"
    out = bash(wd, command)
    assert SSH not in out.content and AWS not in out.content, out.content
    control = bash(wd, command, Sandbox(SandboxSettings(hidden=(), home="visible")))
    assert SSH in control.content and AWS in control.content


def test_symlinked_entries_hide_their_targets(home: Path) -> None:
    """``~/.ssh`` a link into dotfiles, ``~/.aws/credentials`` a link elsewhere:
    reading the targets by their own paths gives nothing either."""
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    shutil.move(home / ".ssh", dotfiles / "ssh")
    (home / ".ssh").symlink_to(dotfiles / "ssh")
    (home / ".aws" / "credentials").rename(dotfiles / "aws-credentials")
    (home / ".aws" / "credentials").symlink_to(dotfiles / "aws-credentials")
    command = "cat ~/.ssh/id_ed25519 ~/dotfiles/ssh/id_ed25519 ~/dotfiles/aws-credentials; true"
    out = bash(home / "proj", command)
    assert SSH not in out.content and AWS not in out.content, out.content
    control = bash(home / "proj", command, Sandbox(SandboxSettings(hidden=(), home="visible")))
    assert SSH in control.content and AWS in control.content


def test_a_working_dir_inside_a_hidden_dir_stays_usable_its_siblings_do_not(
    home: Path,
) -> None:
    """Decided: the working directory is never hidden. Inside a hidden directory,
    only the way down to it stays; everything else there is hidden."""
    wd = home / ".ssh" / "work" / "deep"
    wd.mkdir(parents=True)
    (wd / "mine.txt").write_text("visible-1")
    (home / ".ssh" / "work" / "beside.txt").write_text("MARKER-beside")
    out = bash(
        wd,
        "cat mine.txt; echo new > new.txt; cat ../beside.txt ~/.ssh/id_ed25519; "
        "grep -r MARKER ~/.ssh; true",
    )
    assert "visible-1" in out.content and (wd / "new.txt").read_text() == "new\n"
    assert SSH not in out.content and "MARKER-beside" not in out.content, out.content
    # the working directory *is* a hidden path: not hidden (the user chose to work there)
    ssh = home / ".ssh"
    out = bash(ssh, "cat id_ed25519; echo ok > made.txt")
    assert SSH in out.content and (ssh / "made.txt").read_text() == "ok\n"


def test_too_big_a_directory_around_the_working_dir_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not left readable: the command is refused, saying why and what to do."""
    monkeypatch.setattr(sandbox_hide, "MAX_SPLIT", 3)
    wd = home / ".aws" / "work"
    wd.mkdir()
    for n in range(3):
        (home / ".aws" / f"other{n}").write_text(AWS)
    out = bash(wd, "cat ../other0; echo ran > ran.txt")
    assert out.is_error and "cannot be hidden one by one" in out.content
    assert "sandbox.unhide" in out.content and AWS not in out.content
    assert not (wd / "ran.txt").exists()


def test_missing_and_nested_entries_are_fine(home: Path) -> None:
    settings = SandboxSettings(
        hidden=("~/.ssh", "~/.ssh/id_ed25519", "~/no-such-dir", "/no/such/file", "~/.netrc"),
        home="visible",
    )
    out = bash(
        home / "proj",
        "cat ~/.ssh/id_ed25519 ~/.netrc ~/.aws/credentials; echo done",
        Sandbox(settings),
    )
    assert "done" in out.content and not out.is_error
    assert SSH not in out.content and NETRC not in out.content
    assert AWS in out.content  # not in this list: readable (the list is what is hidden)


def test_unconfined_commands_are_not_affected(home: Path) -> None:
    """``mode = "off"`` and an approved ``outside_sandbox`` call hide nothing:
    hidden paths exist only in the sandbox's mount namespace."""
    out = bash(home / "proj", "cat ~/.ssh/id_ed25519", Sandbox.off())
    assert SSH in out.content
    out = bash(home / "proj", "cat ~/.ssh/id_ed25519", outside_sandbox=True)
    assert SSH in out.content


def test_a_sandboxed_mcp_server_reads_nothing_either(home: Path) -> None:
    """Stdio MCP servers start through ``launch_argv``: the same hidden paths."""
    sandbox = Sandbox(VISIBLE)
    argv = ["/bin/sh", "-c", "cat ~/.ssh/id_ed25519 ~/.netrc; echo end"]
    launch = sandbox.launch_argv(argv, home / "proj")
    try:
        done = subprocess.run(
            launch.argv, env=launch.env, pass_fds=launch.fds, capture_output=True, text=True
        )
    finally:
        launch.close()
    assert launch.confined and "end" in done.stdout
    assert SSH not in done.stdout + done.stderr and NETRC not in done.stdout


def test_private_paths_are_hidden_whatever_the_settings(home: Path) -> None:
    """infai's own store (:attr:`Sandbox.private`) stays hidden with ``hidden`` empty."""
    store = home / "store"
    (store / "sessions" / "s1").mkdir(parents=True)
    (store / "sessions" / "s1" / "events").write_text("MARKER-session")
    (store / "token").write_text("MARKER-token")
    sandbox = Sandbox(SandboxSettings(hidden=(), home="visible"), private=(store,))
    out = bash(home / "proj", "grep -r MARKER ~/store; cat ~/store/token; true", sandbox)
    assert "MARKER-session" not in out.content and "MARKER-token" not in out.content
    control = bash(
        home / "proj", "cat ~/store/token", Sandbox(SandboxSettings(hidden=(), home="visible"))
    )
    assert "MARKER-token" in control.content


def test_symlink_loops_and_dangling_links_in_hidden_dirs_are_harmless(home: Path) -> None:
    """A link back to its own directory (or a parent), a dangling one and a loop:
    the command still runs and the secrets stay hidden."""
    ssh = home / ".ssh"
    (ssh / "self").symlink_to(ssh)
    (ssh / "up").symlink_to(home)  # contains the working directory
    (ssh / "gone").symlink_to(home / "no-such-file")
    (ssh / "loop").symlink_to(ssh / "loop")
    out = bash(home / "proj", "cat ~/.ssh/id_ed25519; echo ok > here.txt; echo done")
    assert "done" in out.content and SSH not in out.content, out.content
    assert (home / "proj" / "here.txt").read_text() == "ok\n"

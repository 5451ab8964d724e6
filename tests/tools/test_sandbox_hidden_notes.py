"""What the model is told about hidden paths: the ``bash`` tool's description
names the configured ones that exist, and a command naming one gets a line
saying it read as empty by the user's policy (the model cannot tell an empty
file from a hidden one)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext, ToolOutput
from infai.tools.sandbox_hide import DEFAULT_HIDDEN, NAMED, describe, existing, mentioned
from infai.tools.shell import Bash

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh ``$HOME`` outside /tmp (the sandbox replaces /tmp) with ~/.ssh and
    ~/.netrc of the defaults, and a project directory."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    root = Path(tempfile.mkdtemp(prefix="infai-hidenote-test-", dir=base)).resolve()
    (root / ".ssh").mkdir()
    (root / ".ssh" / "config").write_text("Host x\n")
    (root / ".netrc").write_text("machine x\n")
    (root / "proj").mkdir()
    monkeypatch.setenv("HOME", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def required(hidden: tuple[str, ...] = DEFAULT_HIDDEN, **kw: Any) -> Sandbox:
    """A confining sandbox whose description is built without probing for bwrap."""
    return Sandbox(SandboxSettings(mode="required", hidden=hidden, home="visible"), **kw)


def run(wd: Path, command: str, sandbox: Sandbox, **args: Any) -> ToolOutput:
    tool = Bash(sandbox=sandbox)
    return asyncio.run(tool.run({"command": command, **args}, ToolContext(wd, "s")))


# -- the description ---------------------------------------------------------------------


def test_the_description_names_the_hidden_paths_that_exist(home: Path) -> None:
    text = Bash(sandbox=required()).spec.description
    assert "~/.ssh and ~/.netrc" in text and "user's policy" in text
    assert "~/.aws" not in text and "~/.kube" not in text  # configured, but not here
    assert "Empty there does not mean empty" in text


def test_the_description_follows_the_configuration(home: Path) -> None:
    (home / "secrets").mkdir()
    hidden = (*(e for e in DEFAULT_HIDDEN if e != "~/.ssh"), str(home / "secrets"))
    text = Bash(sandbox=required(hidden)).spec.description
    assert "~/.ssh" not in text  # the user unhid it
    assert f"~/.netrc and {home / 'secrets'}" in text


def test_the_description_names_infai_s_own_files_in_tilde_form(home: Path) -> None:
    config = home / ".config" / "infai"
    (config / "harness" / "sessions").mkdir(parents=True)
    private = (config, config / "harness", config / "harness" / "sessions")
    text = Bash(sandbox=required(private=private)).spec.description
    assert "infai's own config and store (~/.config/infai)." in text
    assert str(home) not in text


def test_many_hidden_paths_are_counted_not_listed(home: Path) -> None:
    names = [f"~/.s{n}" for n in range(NAMED + 3)]
    for name in names:
        (home / name[2:]).touch()
    text = Bash(sandbox=required(tuple(names))).spec.description
    assert ", ".join(names[:NAMED]) + " and 3 more." in text
    assert names[NAMED] not in text


def test_with_none_there_the_description_says_what_kind(home: Path) -> None:
    text = Bash(sandbox=required(("~/.aws", "~/.kube"))).spec.description
    assert "well-known credential files (~/.ssh, ~/.aws and the like)" in text


def test_an_entry_with_control_characters_is_escaped(home: Path) -> None:
    odd = home / "a\x1b[31mb"
    odd.touch()
    text = describe((str(odd),), ())
    assert "\x1b" not in text and "\\x1b" in text


def test_no_sandbox_no_word_of_hidden_paths(home: Path) -> None:
    assert "sandbox" not in Bash(sandbox=Sandbox.off()).spec.description
    assert "sandbox.hidden" not in Bash.spec.description  # the class's, machine-independent


def test_existing_leaves_out_what_another_covers(home: Path) -> None:
    assert existing(("~/.ssh/config", "~/.ssh", "~/.aws", "~/.netrc")) == ["~/.ssh", "~/.netrc"]


# -- naming a hidden path in a command ---------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "cat ~/.ssh/config",
        "cat $HOME/.netrc",
        'ls "${HOME}/.ssh"',
        "grep -r Host {home}/.ssh",
        "wc -c .netrc",  # relative to the working directory, when that is home
        "x=~/.ssh; ls $x",
    ],
)
def test_a_command_naming_a_hidden_path_is_matched(home: Path, command: str) -> None:
    wd = home if ".netrc" in command and "HOME" not in command else home / "proj"
    found = mentioned(command.replace("{home}", str(home)), DEFAULT_HIDDEN, wd)
    assert found and set(found) <= {"~/.ssh", "~/.netrc"}


@pytest.mark.parametrize(
    "command",
    [
        "cat ~/.sshx/config",  # another name
        "echo my.netrc",  # not the path
        "cat ~/.aws/credentials",  # hidden, but not there: nothing was hidden
        "ls proj",
    ],
)
def test_a_command_not_naming_one_is_not(home: Path, command: str) -> None:
    assert mentioned(command, DEFAULT_HIDDEN, home) == []


def test_the_working_directory_is_never_claimed(home: Path) -> None:
    """A hidden path that is (or holds) the working directory is not hidden whole."""
    assert mentioned(f"ls {home}", (str(home),), home / "proj") == []


@needs_bwrap
def test_the_output_says_a_named_hidden_path_read_as_empty(home: Path) -> None:
    out = run(
        home / "proj",
        "cat ~/.ssh/config; wc -c < ~/.netrc",
        Sandbox(SandboxSettings(home="visible")),
    )
    assert "Host x" not in out.content
    assert out.content.rstrip().endswith("whatever is on the machine: ~/.ssh, ~/.netrc")
    plain = run(home / "proj", "echo hello", Sandbox(SandboxSettings(home="visible")))
    assert "[sandbox]" not in plain.content


@needs_bwrap
def test_no_note_where_nothing_was_hidden(home: Path) -> None:
    """Unconfined, or the path unhidden: the command read the real file."""
    for sandbox in (Sandbox.off(), Sandbox(SandboxSettings(hidden=("~/.netrc",), home="visible"))):
        out = run(home / "proj", "cat ~/.ssh/config", sandbox)
        assert "Host x" in out.content and "[sandbox]" not in out.content

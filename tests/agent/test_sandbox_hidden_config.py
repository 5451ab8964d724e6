"""``sandbox.hidden`` from configuration to the ``bash`` a harness really gets.

A project's file may only add hidden paths (its ``unhide`` is ignored, with a
warning); the user's own file may take defaults out with ``unhide``; infai's own
config and store are hidden whatever either says, except the working directory.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.agent import Harness
from infai.agent.config import ConfigError, load_config
from infai.store import Store
from infai.tools import SandboxSettings, ToolContext, ToolOutput
from infai.tools.sandbox_hide import DEFAULT_HIDDEN, default_hidden
from infai.tools.shell import Bash


def files(tmp_path: Path, user: str, project: str = "") -> tuple[Path, Path]:
    work = tmp_path / "work"
    (work / ".infai").mkdir(parents=True)
    user_file = tmp_path / "user.toml"
    user_file.write_text(user)
    if project:
        (work / ".infai" / "config.toml").write_text(project)
    return work, user_file


def test_the_defaults_name_the_well_known_credentials(tmp_path: Path) -> None:
    work, user = files(tmp_path, "")
    hidden = load_config(work, user).sandbox.hidden
    assert hidden == default_hidden() and hidden[: len(DEFAULT_HIDDEN)] == DEFAULT_HIDDEN
    for path in ("~/.ssh", "~/.aws", "~/.gnupg", "~/.config/gh", "~/.netrc", "~/.kube"):
        assert path in hidden
    for path in ("~/.git-credentials", "~/.docker/config.json", "~/.npmrc", "~/.pypirc"):
        assert path in hidden
    assert "~/.config/gcloud" in hidden and "~/.azure" in hidden


def test_the_user_adds_and_unhides(tmp_path: Path) -> None:
    work, user = files(
        tmp_path,
        '[sandbox]\nhidden = ["~/secrets", "/srv/keys"]\nunhide = ["~/.kube/", "~/.ssh"]\n',
    )
    hidden = load_config(work, user).sandbox.hidden
    assert "~/.kube" not in hidden and "~/.ssh" not in hidden  # spelt with a slash: same path
    assert hidden[-2:] == ("~/secrets", "/srv/keys") and "~/.aws" in hidden


def test_a_project_may_hide_more_never_less(tmp_path: Path) -> None:
    work, user = files(
        tmp_path,
        '[sandbox]\nunhide = ["~/.ssh"]\n',
        '[sandbox]\nhidden = ["~/notes", "~/.aws"]\nunhide = ["~/.aws", "~/.netrc"]\n',
    )
    config = load_config(work, user)
    hidden = config.sandbox.hidden
    assert "~/.aws" in hidden and "~/.netrc" in hidden  # not un-hidden
    assert hidden.count("~/.aws") == 1 and hidden[-1] == "~/notes"  # added
    assert "~/.ssh" not in hidden  # the user's own unhide stands
    (warning,) = config.warnings
    assert "config.toml: sandbox: unhide ignored: a project's config may not loosen" in warning


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[sandbox]\nhidden = ["secrets"]', "sandbox.hidden: 'secrets': must be an absolute path"),
        ('[sandbox]\nunhide = ["x/y"]', "sandbox.unhide: 'x/y': must be an absolute path"),
        ("[sandbox]\nhidden = '~/.ssh'", "sandbox.hidden: must be a list of non-empty strings"),
    ],
)
def test_bad_hidden_settings_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    for where, (work, user) in (
        ("user", files(tmp_path / "u", text + "\n")),
        ("project", files(tmp_path / "p", "", text + "\n")),
    ):
        with pytest.raises(ConfigError) as caught:
            load_config(work, user)
        assert message in str(caught.value), where


def test_unhiding_what_is_not_hidden_is_an_error(tmp_path: Path) -> None:
    """A typo would leave the user believing a path is readable (or, later, hidden)."""
    work, user = files(tmp_path, '[sandbox]\nunhide = ["~/.sssh"]\n')
    with pytest.raises(
        ConfigError, match=r"user\.toml: sandbox\.unhide: '~/\.sssh' is not a hidden"
    ):
        load_config(work, user)


# -- the harness's bash --------------------------------------------------------------


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home outside /tmp (the sandbox's /tmp is its own) with two secrets."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    root = Path(tempfile.mkdtemp(prefix="infai-hide-cfg-", dir=base)).resolve()
    for name, secret in ((".ssh/id_ed25519", "MARKER-ssh"), (".aws/credentials", "MARKER-aws")):
        (root / name).parent.mkdir(parents=True)
        (root / name).write_text(secret)
    (root / "notes").mkdir()
    (root / "notes" / "n.txt").write_text("MARKER-notes")
    monkeypatch.setenv("HOME", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _bash(space: Harness, wd: Path, command: str) -> ToolOutput:
    tool = space.toolbox(space.model, space.policy()).get("bash")
    assert isinstance(tool, Bash)
    result: ToolOutput = asyncio.run(tool.run({"command": command}, ToolContext(wd, "s")))
    return result


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_the_workspace_hides_configured_paths_and_infais_own(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = home / "infai.toml"
    user.write_text('[sandbox]\nunhide = ["~/.ssh"]\n')
    monkeypatch.setenv("INFAI_CONFIG", str(user))
    wd = home / "proj"
    (wd / ".infai").mkdir(parents=True)
    (wd / ".infai" / "config.toml").write_text(
        '[sandbox]\nhidden = ["~/notes"]\nunhide = ["~/.aws"]\n'
    )
    store = Store(home / "store")
    (home / "store" / "sessions" / "other").mkdir(parents=True)
    (home / "store" / "sessions" / "other" / "events").write_text("MARKER-session")
    space = Harness(store, wd)
    try:
        assert space.sandbox.settings != SandboxSettings()
        out = _bash(
            space,
            wd,
            "cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/notes/n.txt ~/infai.toml; "
            "grep -r MARKER ~/store; true",
        )
        assert "MARKER-ssh" in out.content  # the user unhid it
        assert "MARKER-aws" not in out.content  # the project could not
        assert "MARKER-notes" not in out.content  # the project hid it
        assert "MARKER-session" not in out.content and "unhide" not in out.content
        # control: the same reads outside the sandbox see everything
        control = asyncio.run(
            Bash(sandbox=space.sandbox).run(
                {"command": "cat ~/.aws/credentials ~/notes/n.txt", "outside_sandbox": True},
                ToolContext(wd, "s"),
            )
        )
        assert "MARKER-aws" in control.content and "MARKER-notes" in control.content
    finally:
        asyncio.run(space.aclose())
        store.close()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_working_inside_the_store_home_hides_its_sessions_not_the_work(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFAI_CONFIG", str(home / "none.toml"))
    store = Store(home / "store")
    (home / "store" / "sessions" / "other").mkdir(parents=True)
    (home / "store" / "sessions" / "other" / "events").write_text("MARKER-session")
    wd = home / "store" / "proj"
    wd.mkdir()
    (wd / "mine.txt").write_text("visible-1")
    space = Harness(store, wd)
    try:
        out = _bash(space, wd, "cat mine.txt; echo x > new.txt; grep -r MARKER ~/store; true")
        assert "visible-1" in out.content and (wd / "new.txt").exists()
        assert "MARKER-session" not in out.content, out.content
    finally:
        asyncio.run(space.aclose())
    # run in the store's home itself: the home is the working directory (visible),
    # its sessions and objects are not
    (home / "store" / "objects").mkdir(exist_ok=True)
    (home / "store" / "objects" / "blob").write_text("MARKER-object")
    space = Harness(store, home / "store")
    try:
        out = _bash(space, home / "store", "ls; grep -r MARKER .; echo x > mine.txt; true")
        assert "proj" in out.content and (home / "store" / "mine.txt").exists()
        assert "MARKER-session" not in out.content and "MARKER-object" not in out.content
    finally:
        asyncio.run(space.aclose())
        store.close()

"""Other agents' and tools' credentials, and those the environment moves, read as
nothing in the sandbox (issue 28).

``$HOME`` is a fresh directory outside ``/tmp`` holding the files Claude Code,
Codex, podman and docker keep their tokens in, and credential files at the
places ``$KUBECONFIG``, ``$AWS_SHARED_CREDENTIALS_FILE``, ``$XDG_CONFIG_HOME``
and their kin name. Each is read through the ``bash`` tool under bubblewrap and
judged by the output (no marker); the control reads them with the defaults
``unhide``-d and sees every marker.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.agent.config import load_config
from infai.tools import Sandbox, SandboxSettings, ToolContext
from infai.tools.sandbox_hide import DEFAULT_HIDDEN, default_hidden, followed
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)

#: files under the home directory, by the default entry that hides them
AT_HOME = {
    ".claude/.credentials.json": "MARKER-claude",
    ".codex/auth.json": "MARKER-codex",
    ".config/containers/auth.json": "MARKER-podman",
    ".docker/config.json": "MARKER-docker",
}
#: (variable, value under the test's root, file under it, marker)
MOVED = (
    ("KUBECONFIG", "kube/a:{root}/kube/b", "kube/b", "MARKER-kube-b"),
    ("AWS_SHARED_CREDENTIALS_FILE", "aws/creds", "aws/creds", "MARKER-aws-creds"),
    ("AWS_CONFIG_FILE", "aws/config", "aws/config", "MARKER-aws-config"),
    ("XDG_CONFIG_HOME", "xdg", "xdg/gh/hosts.yml", "MARKER-xdg-gh"),
    ("XDG_RUNTIME_DIR", "run", "run/containers/auth.json", "MARKER-podman-run"),
    ("DOCKER_CONFIG", "dock", "dock/config.json", "MARKER-docker-moved"),
    ("GH_CONFIG_DIR", "ghdir", "ghdir/hosts.yml", "MARKER-gh-dir"),
    ("CLOUDSDK_CONFIG", "gcloud", "gcloud/credentials.db", "MARKER-gcloud"),
    ("CODEX_HOME", "codex", "codex/auth.json", "MARKER-codex-home"),
    ("CLAUDE_CONFIG_DIR", "claude", "claude/.credentials.json", "MARKER-claude-dir"),
)


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    root = Path(tempfile.mkdtemp(prefix="infai-creds-test-", dir=base)).resolve()
    for name, marker in AT_HOME.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(marker)
    (root / "proj").mkdir()
    monkeypatch.setenv("HOME", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def moved(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Credentials where the environment says, outside the home directory."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    root = Path(tempfile.mkdtemp(prefix="infai-moved-test-", dir=base)).resolve()
    (root / "kube").mkdir()
    (root / "kube" / "a").write_text("MARKER-kube-a")
    for name, value, file, marker in MOVED:
        (root / file).parent.mkdir(parents=True, exist_ok=True)
        (root / file).write_text(marker)
        monkeypatch.setenv(name, ":".join(str(root / v) for v in value.split(":{root}/")))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def cat(wd: Path, paths: list[Path], sandbox: Sandbox) -> str:
    command = "cat " + " ".join(f"'{p}'" for p in paths) + " 2>&1; true"
    tool = Bash(sandbox=sandbox)
    return asyncio.run(tool.run({"command": command}, ToolContext(wd, "s"))).content


def test_other_agents_and_registries_tokens_read_as_nothing(home: Path) -> None:
    paths = [home / name for name in AT_HOME]
    out = cat(home / "proj", paths, Sandbox())
    assert not any(marker in out for marker in AT_HOME.values()), out
    for name in AT_HOME:
        assert f"~/{name}" in DEFAULT_HIDDEN
    # control: with them unhidden (the user's own choice) the same command reads them
    unhide = "".join(f'"~/{name}", ' for name in AT_HOME)
    config = home / "user.toml"
    config.write_text(f"[sandbox]\nunhide = [{unhide}]\n")
    settings = load_config(home / "proj", config).sandbox
    out = cat(home / "proj", paths, Sandbox(settings))
    assert all(marker in out for marker in AT_HOME.values()), out


def test_credentials_the_environment_moves_read_as_nothing(home: Path, moved: Path) -> None:
    paths = [moved / "kube" / "a", *(moved / file for _, _, file, _ in MOVED)]
    markers = ["MARKER-kube-a", *(marker for *_, marker in MOVED)]
    out = cat(home / "proj", paths, Sandbox())  # the settings read the environment now
    assert not any(marker in out for marker in markers), out
    # control: the defaults alone (the environment not followed) leave them readable,
    # but for podman's file in $XDG_RUNTIME_DIR, which is hidden whole with the
    # sockets there (infai.tools.sandbox_sockets) whatever the credential rules say
    out = cat(home / "proj", paths, Sandbox(SandboxSettings(hidden=DEFAULT_HIDDEN)))
    runtime = [marker for name, _, _, marker in MOVED if name == "XDG_RUNTIME_DIR"]
    assert runtime and not any(marker in out for marker in runtime), out
    assert all(marker in out for marker in markers if marker not in runtime), out


def test_what_the_environment_names_is_followed_and_can_be_unhidden(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        "KUBECONFIG": f"{home}/.kube/work::relative/conf:{home}/other",
        "XDG_CONFIG_HOME": f"{home}/cfg",
        "CODEX_HOME": "~/codex",
        "GH_CONFIG_DIR": str(home),  # the home itself: never hidden whole
        "AWS_CONFIG_FILE": "/",
        "DOCKER_CONFIG": "",
    }
    found = followed(env)
    assert found[:3] == ("~/cfg/gh", "~/cfg/hub", "~/cfg/git/credentials")
    assert "~/.kube/work" in found and "~/other" in found and "~/codex/auth.json" in found
    assert not any(e in found for e in ("~", "/", "relative/conf")) and len(found) == 8
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert default_hidden()[: len(DEFAULT_HIDDEN)] == DEFAULT_HIDDEN
    config = home / "user.toml"
    config.write_text('[sandbox]\nunhide = ["~/.kube", "~/codex/auth.json"]\n')
    hidden = load_config(home / "proj", config).sandbox.hidden
    assert "~/.kube/work" not in hidden and "~/.kube" not in hidden  # inside it: out too
    assert "~/codex/auth.json" not in hidden and "~/other" in hidden

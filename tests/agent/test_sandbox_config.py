"""The sandbox from configuration to the ``bash`` tool a session really gets.

The ``[sandbox]`` settings are read from the user's file only (a project's file
may not loosen them); the harness's toolbox runs ``bash`` under them with
infai's own directories protected; where bwrap is missing (hidden from PATH
here) the documented fallback holds: ``auto`` runs unconfined and says so once,
``required`` runs nothing.
"""

from __future__ import annotations

import asyncio
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from infai.agent import Harness
from infai.agent.config import ConfigError, load_config
from infai.llm import close_model
from infai.store import Store
from infai.tools import Sandbox, SandboxSettings, ToolContext, ToolOutput
from infai.tools.shell import Bash

HAVE_BWRAP = shutil.which("bwrap") is not None


def files(tmp_path: Path, user: str, project: str = "") -> tuple[Path, Path]:
    work = tmp_path / "work"
    (work / ".infai").mkdir(parents=True)
    user_file = tmp_path / "user.toml"
    user_file.write_text(user)
    if project:
        (work / ".infai" / "config.toml").write_text(project)
    return work, user_file


def test_the_sandbox_table_and_its_shorthand(tmp_path: Path) -> None:
    work, user = files(
        tmp_path,
        '[sandbox]\nmode = "required"\nnetwork = true\npass_env = ["CARGO_*"]\n'
        'secret_env = ["DB_URL"]\nwritable = [".git", "~/.cache"]\n',
    )
    got = load_config(work, user).sandbox
    assert got == SandboxSettings("required", True, ("CARGO_*",), ("DB_URL",), (".git", "~/.cache"))
    work, user = files(tmp_path / "b", 'sandbox = "off"\n')
    assert load_config(work, user).sandbox.mode == "off"
    work, user = files(tmp_path / "c", "")
    assert load_config(work, user).sandbox == SandboxSettings()  # default: auto, no network


def test_a_project_cannot_loosen_the_sandbox(tmp_path: Path) -> None:
    work, user = files(
        tmp_path,
        '[sandbox]\nsecret_env = ["MINE"]\n',
        '[sandbox]\nmode = "off"\nnetwork = true\npass_env = ["X"]\nwritable = [".git"]\n'
        'secret_env = ["THEIRS"]\n',
    )
    config = load_config(work, user)
    assert config.sandbox == SandboxSettings(secret_env=("MINE", "THEIRS"))  # only tightened
    (warning,) = config.warnings
    assert "config.toml: sandbox: mode, network, pass_env, writable ignored" in warning


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('sandbox = "sometimes"', "sandbox: must be one of auto, required, off, not 'sometimes'"),
        ("sandbox = 1", "sandbox: must be a mode (auto, required, off) or a table"),
        ('[sandbox]\nnetwork = "yes"', "sandbox.network: must be true or false, not 'yes'"),
        ("[sandbox]\npass_env = 'HOME'", "sandbox.pass_env: must be a list of non-empty strings"),
        ('[sandbox]\npass_env = ["GH_TOKEN"]', "sandbox.pass_env: 'GH_TOKEN' looks like a secret"),
        ('[sandbox]\nwritable = ["src"]', "sandbox.writable: 'src': a relative entry must be"),
        ("[sandbox]\nnetwrok = true", "sandbox: unknown key 'netwrok'"),
    ],
)
def test_bad_sandbox_settings_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    work, user = files(tmp_path, text + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(work, user)
    assert str(caught.value).startswith(f"{user}: ")
    assert message in str(caught.value)
    # a project's bad value is an error too (it is validated before being ignored)
    work, user = files(tmp_path / "p", "", text + "\n")
    with pytest.raises(ConfigError, match=r"config\.toml: sandbox"):
        load_config(work, user)


def _bash_of(space: Harness) -> Any:
    toolbox = space.toolbox(space.model, space.policy())
    tool = toolbox.get("bash")
    assert isinstance(tool, Bash)
    return tool


def _run(tool: Any, wd: Path, command: str) -> ToolOutput:
    result: ToolOutput = asyncio.run(tool.run({"command": command}, ToolContext(wd, "s")))
    return result


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed (CI installs it)")
def test_the_workspace_bash_is_confined_and_protects_infais_own_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The production path: running in a directory that holds infai's store and
    config (as when run in $HOME), a command can write the working dir but not them."""
    work = tmp_path / "home"
    config_dir = work / ".config" / "infai"
    config_dir.mkdir(parents=True)
    (config_dir / "config.toml").write_text("")
    monkeypatch.delenv("INFAI_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(work / ".config"))
    monkeypatch.setenv("HOME", str(work))
    store = Store(work / ".infai-home")
    space = Harness(store, work)
    assert space.sandbox.available and space.sandbox.notice is None
    bash = _bash_of(space)
    out = _run(
        bash,
        work,
        "echo x > ok.txt; echo 'trusted_projects = [\"/\"]' >> .config/infai/config.toml; "
        "echo x > .infai-home/planted",
    )
    assert (work / "ok.txt").exists()
    assert (config_dir / "config.toml").read_text() == ""
    assert not (work / ".infai-home" / "planted").exists(), out.content
    # subagents get the same confined bash
    task = space.toolbox(space.model, space.policy()).get("task")
    assert bash.sandbox is not None and task is not None
    assert {t.spec.name: t for t in task.tools}["bash"].sandbox is bash.sandbox  # type: ignore[attr-defined]
    asyncio.run(space.aclose())
    store.close()


def _hide_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: str | None = None) -> None:
    """PATH without bwrap (a directory with only what the commands need), or with a
    fake ``bwrap`` that fails as one does without user namespaces."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sh", "touch", "cat", "git"):
        found = shutil.which(name)
        if found:
            (bin_dir / name).symlink_to(found)
    if fake is not None:
        (bin_dir / "bwrap").write_text(fake)
        (bin_dir / "bwrap").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", str(bin_dir))


@pytest.mark.parametrize("how", ["missing", "broken"])
def test_without_bwrap_auto_falls_back_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    fake = "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    _hide_bwrap(tmp_path, monkeypatch, fake if how == "broken" else None)
    work = tmp_path / "work"
    work.mkdir()
    sandbox = Sandbox(SandboxSettings(mode="auto"))
    assert not sandbox.available and not sandbox.confined
    why = {"missing": "bwrap is not on PATH", "broken": "No permissions to create new namespace"}
    assert why[how] in sandbox.reason
    assert sandbox.notice is not None and "every shell command will be asked" in sandbox.notice
    # the model is not told of a sandbox there is not (nor offered to leave it)
    spec = Bash(sandbox=sandbox).spec
    assert "sandbox:" not in spec.description and "No sandbox works" in spec.description
    assert "outside_sandbox" not in spec.parameters["properties"]
    # the fallback: commands run, unconfined (the policy asks first), env still scrubbed
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback-1")
    out = _run(Bash(sandbox=sandbox), work, f"touch {tmp_path}/outside.txt; cat /proc/self/environ")
    assert (tmp_path / "outside.txt").exists()
    assert "sk-fallback-1" not in out.content


def test_without_bwrap_required_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide_bwrap(tmp_path, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    sandbox = Sandbox(SandboxSettings(mode="required"))
    assert sandbox.notice is not None and "will be refused" in sandbox.notice
    out = _run(Bash(sandbox=sandbox), work, "touch ran.txt")
    assert out.is_error and "bwrap is not on PATH" in out.content and "nothing ran" in out.content
    assert not (work / "ran.txt").exists()


def test_mode_off_says_nothing_and_confines_nothing(tmp_path: Path) -> None:
    sandbox = Sandbox.off()
    assert not sandbox.available and sandbox.notice is None
    assert "off" in sandbox.reason


def test_the_workspace_notice_without_bwrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide_bwrap(tmp_path, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "none.toml"))
    store = Store(tmp_path / "store")
    space = Harness(store, work)
    assert space.sandbox.notice is not None and "not available" in space.sandbox.notice
    asyncio.run(space.aclose())
    store.close()


def test_switching_model_keeps_the_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``/model`` rebuilds the toolbox: it must still be the harness's sandboxed one."""
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "none.toml"))
    work = tmp_path / "work"
    work.mkdir()
    store = Store(tmp_path / "store")
    space = Harness(store, work)
    session = space.open()
    try:
        asyncio.run(close_model(space.use_model(session, "offline")))
        bash = session.toolbox.get("bash")
        assert isinstance(bash, Bash) and bash.sandbox is space.sandbox
    finally:
        session.close()
        asyncio.run(space.aclose())
        store.close()

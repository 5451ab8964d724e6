"""``sandbox.write_budget`` from the configuration file to the ``bash`` a session gets.

Sizes are bytes or strings with a unit; a bad one is an error naming the file
and the key; a project's file may not set it (a larger budget would loosen the
sandbox); the harness's confined ``bash`` holds to the user's value.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from infai.agent import Harness
from infai.agent.config import ConfigError, load_config
from infai.store import Store
from infai.tools import ToolContext
from infai.tools.shell import Bash


def files(tmp_path: Path, user: str, project: str = "") -> tuple[Path, Path]:
    work = tmp_path / "work"
    (work / ".infai").mkdir(parents=True)
    user_file = tmp_path / "user.toml"
    user_file.write_text(user)
    if project:
        (work / ".infai" / "config.toml").write_text(project)
    return work, user_file


@pytest.mark.parametrize(
    ("value", "budget"),
    [
        ('"50MiB"', 50 << 20),
        ('"1.5 GiB"', 3 << 29),
        ('"500MB"', 500_000_000),
        ('"2tib"', 2 << 40),
        ("1073741824", 1 << 30),
        ('"off"', None),
    ],
)
def test_write_budget_values(tmp_path: Path, value: str, budget: int | None) -> None:
    work, user = files(tmp_path, f"[sandbox]\nwrite_budget = {value}\n")
    assert load_config(work, user).sandbox.write_budget == budget


def test_the_default_is_eight_gib(tmp_path: Path) -> None:
    work, user = files(tmp_path, "")
    assert load_config(work, user).sandbox.write_budget == 8 << 30


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"lots"', "sandbox.write_budget: must be a size in bytes or a string like"),
        ('"10 parsecs"', "not '10 parsecs'"),
        ("true", "not True"),
        ("-5", "sandbox.write_budget: -5 is less than 1MiB"),
        ("[1]", "not [1]"),
        ("0", "sandbox.write_budget: 0 is less than 1MiB"),
        ('"512KiB"', "sandbox.write_budget: '512KiB' is less than 1MiB"),
    ],
)
def test_a_bad_write_budget_names_file_and_key(tmp_path: Path, value: str, message: str) -> None:
    work, user = files(tmp_path, f"[sandbox]\nwrite_budget = {value}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(work, user)
    assert str(caught.value).startswith(f"{user}: ")
    assert message in str(caught.value)


def test_a_project_cannot_set_the_write_budget(tmp_path: Path) -> None:
    work, user = files(
        tmp_path, '[sandbox]\nwrite_budget = "1GiB"\n', '[sandbox]\nwrite_budget = "off"\n'
    )
    config = load_config(work, user)
    assert config.sandbox.write_budget == 1 << 30
    (warning,) = config.warnings
    assert "config.toml: sandbox: write_budget ignored" in warning


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_the_workspace_bash_holds_to_the_users_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, user = files(tmp_path, '[sandbox]\nwrite_budget = "4MiB"\n')
    monkeypatch.setenv("INFAI_CONFIG", str(user))
    store = Store(tmp_path / "store")
    space = Harness(store, work)
    try:
        bash = space.toolbox(space.model, space.policy()).get("bash")
        assert isinstance(bash, Bash)
        out = asyncio.run(
            bash.run({"command": "dd if=/dev/zero of=big bs=1M count=64"}, ToolContext(work, "s"))
        )
        assert (work / "big").stat().st_size == 4 << 20
        assert "no file a command writes may grow past 4 MiB" in out.content
    finally:
        asyncio.run(space.aclose())
        store.close()

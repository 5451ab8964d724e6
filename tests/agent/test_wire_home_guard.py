"""Files are not snapshotted in the user's home directory or /: a first snapshot
there would read every file the user has."""

from __future__ import annotations

from pathlib import Path

import pytest

from infai.agent import Harness
from infai.store.file import Store


def test_no_snapshots_in_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "me"
    project = home / "project"
    project.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    config_file = tmp_path / "config.toml"
    config_file.write_text("[checkpoints]\nenabled = true\n")
    monkeypatch.setenv("INFAI_CONFIG", str(config_file))
    space = Harness(Store(tmp_path / "store"), project)
    config = space.config_for(project)
    assert space.files_for(config, str(project)) is not None  # a project: yes
    assert space.files_for(config, str(home)) is None  # the home directory: no
    assert space.files_for(config, "/") is None
    [notice, *_] = [n for n in space.take_notices() if "not snapshotted" in n]
    assert str(home) in notice

"""``infai doctor`` says what holds of ``sandbox.write_budget`` here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from infai.shells.cli import main

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.mark.parametrize(
    ("config", "line", "budget"),
    [
        ("", "write budget:    8 GiB (sandbox.write_budget)", 8 << 30),
        ('[sandbox]\nwrite_budget = "64MiB"\n', "write budget:    64 MiB", 64 << 20),
        ('[sandbox]\nwrite_budget = "off"\n', "write budget:    off", None),
    ],
)
def test_doctor_reports_the_write_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, line: str, budget: int | None
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "user.toml").write_text(config)
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "user.toml"))
    result = CliRunner().invoke(main, ["doctor"])
    assert line in result.output, result.output
    report = json.loads(CliRunner().invoke(main, ["doctor", "--json"]).output)
    assert report["write_budget"] == budget
    # CI's bubblewrap knows --size: /tmp and /dev/shm are sized (not with the budget off)
    assert report["memory_fs_sized"] is (budget is not None)
    assert report["disk_writes_counted"]  # the kernel has /proc/PID/io here

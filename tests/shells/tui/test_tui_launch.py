"""Starting the TUI from the command line: plain ``infai`` takes the TUI's options.

Driven by Textual's pilot at 80x24 and at a small 60x20 (helpers: tests/support/tui_pilot.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infai.shells.tui import InfaiApp
from infai.store import Store


def test_plain_infai_takes_the_tui_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from infai.shells import agent_cli  # noqa: F401  (registers tui)
    from infai.shells.cli import main

    opened: list[InfaiApp] = []
    monkeypatch.setattr(InfaiApp, "run", lambda self: opened.append(self))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    home = str(tmp_path / "home")
    sid = Store(tmp_path / "home").create_session(working_dir=str(tmp_path / "work")).id
    runner = CliRunner()
    done = runner.invoke(main, ["--home", home, "--model", "offline", "--allow", "bash ls*"])
    assert done.exit_code == 0, done.output
    done = runner.invoke(main, ["--home", home, "--continue"])
    assert done.exit_code == 0, done.output
    first, second = opened
    assert first.workspace.model.name == "offline" and first._initial is None
    assert any(rule.pattern == "ls*" for rule in first.workspace.rules)
    assert second._initial == sid
    wrong = runner.invoke(main, ["--home", home, "--model", "offline", "session", "ls"])
    assert wrong.exit_code == 2 and "for the TUI only" in wrong.output

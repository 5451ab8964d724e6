"""``infai tui`` and plain ``infai``: the TUI's options, and no UI without a terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from infai.agent import Harness
from infai.shells.cli import main
from infai.shells.tui import InfaiApp
from infai.store import Store


def test_plain_infai_takes_the_tui_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # CliRunner's standard input is no terminal; here it stands for one
    monkeypatch.setattr("infai.shells.cli.tui.stdin_is_terminal", lambda: True)
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
    assert first.harness.model.name == "offline" and first._initial is None
    assert isinstance(first.harness, Harness)  # a local one: its rules are the shell's
    assert any(rule.pattern == "ls*" for rule in first.harness.rules)
    assert second._initial == sid
    wrong = runner.invoke(main, ["--home", home, "--model", "offline", "session", "ls"])
    assert wrong.exit_code == 2 and "for the TUI only" in wrong.output


# the command line in a child whose standard input is /dev/null; it reports, on
# its way out, whether textual was ever imported
CHILD = (
    "import sys\n"
    "from infai.shells.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:], prog_name='infai')\n"
    "finally:\n"
    "    print('textual loaded:', any(m.split('.')[0] == 'textual' for m in sys.modules),\n"
    "          file=sys.stderr)\n"
)


@pytest.mark.parametrize("command", [[], ["tui"]], ids=["plain", "tui"])
def test_the_tui_refuses_to_start_without_a_terminal(tmp_path: Path, command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("INFAI_STORE", "INFAI_HOME")}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "--home", str(tmp_path / "home"), *command],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,  # before the fix the UI spun here forever
        cwd=tmp_path,
        env={**env, "TERM": "xterm-256color"},
    )
    assert done.returncode == 2, done.stderr
    assert "needs a terminal" in done.stderr and "infai run" in done.stderr
    assert "textual loaded: False" in done.stderr
    assert "\x1b" not in done.stdout and done.stdout == ""

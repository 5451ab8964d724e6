"""Issue 13, "resume is obvious" and "scripts": `run --json` names its session; `chat`
shows a prompt marker, answers /help and /quit itself, and says how to come back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main
from infai.store import Store


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def infai(home: Path, *args: str, code: int = 0, stdin: str | None = None) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args], input=stdin)
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def _previews(home: Path, session_id: str) -> list[str]:
    """The conversation's previews (the files snapshots between turns left out)."""
    with Store(home).open_reader(session_id) as reader:
        return [entry.preview for entry in reader.entries() if entry.kind == "message"]


def test_run_json_lines_name_their_session(home: Path, work: Path) -> None:
    lines = [json.loads(line) for line in infai(home, "run", "--json", "hi").stdout.splitlines()]
    [info] = Store(home).list_sessions()
    assert {line["type"] for line in lines} >= {"saved", "end"}
    assert all(line["session"] == info.id for line in lines)
    again = infai(home, "run", "--json", "--continue", "more").stdout.splitlines()
    assert {json.loads(line)["session"] for line in again} == {info.id}


def test_chat_answers_help_and_quit_itself(home: Path, work: Path) -> None:
    out = infai(home, "chat", stdin="/help\nhello\n/frobnicate\n/quit\nnot sent\n")
    assert "/quit, /exit" in out.stderr and "/help" in out.stderr
    assert "unknown command /frobnicate" in out.stderr
    assert out.stdout.count("offline model: you said") == 1
    [info] = Store(home).list_sessions()
    previews = _previews(home, info.id)
    assert previews[0] == "hello"
    assert not [p for p in previews if p.startswith("/") or "not sent" in p]
    assert "> " not in out.stderr  # no marker when standard input is not a terminal


def test_chat_prints_the_exact_command_to_come_back(home: Path, work: Path) -> None:
    out = infai(home, "chat", stdin="hello\n")
    [info] = Store(home).list_sessions()
    command = f"infai --home {home} chat --session {info.id}"
    assert command in out.stderr
    # that command, run, reopens the same session: the next prompt lands there
    args = command.split()[1:]
    back = CliRunner().invoke(main, args, input="again\n/quit\n")
    assert back.exit_code == 0, back.stderr
    assert [i.id for i in Store(home).list_sessions()] == [info.id]
    assert _previews(home, info.id)[2] == "again"


def test_chat_shows_a_prompt_marker_on_a_terminal(home: Path, work: Path) -> None:
    """A real terminal on standard input: the marker comes before each prompt."""
    primary, secondary = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "infai", "--home", str(home), "chat"],
            stdin=secondary,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=work,
        )
        os.close(secondary)
        os.write(primary, b"hello\n/quit\n")
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(primary)
    assert proc.returncode == 0, err
    text = err.decode()
    assert text.count("> ") >= 2  # before "hello" and before "/quit"
    assert "come back with: infai --home" in text

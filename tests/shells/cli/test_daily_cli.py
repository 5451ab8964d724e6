"""Issue 13's command-line bugs: nothing created before input is checked, resolved dirs."""

from __future__ import annotations

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


def _ids(home: Path) -> list[str]:
    return [info.id for info in Store(home).list_sessions()] if home.exists() else []


def _first_session(home: Path, work: Path) -> tuple[str, str]:
    """A session with one finished turn: its id and the first event's id."""
    out = infai(home, "run", "first")
    sid = out.stderr.strip().splitlines()[-1].removeprefix("session ")
    with Store(home).open_reader(sid) as reader:
        return sid, next(reader.entries()).id


@pytest.mark.parametrize("event", ["nope", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"])
def test_a_failed_from_creates_no_session(home: Path, work: Path, event: str) -> None:
    sid, _ = _first_session(home, work)
    out = infai(home, "run", "--from", event, "again", code=2)
    assert event in out.stderr
    assert _ids(home) == [sid]  # nothing created ...
    again = infai(home, "run", "--continue", "and on")  # ... so --continue finds the real one
    assert again.stderr.strip().endswith(sid)


def test_from_alone_finds_the_events_session(home: Path, work: Path) -> None:
    sid, first = _first_session(home, work)
    infai(home, "run", "second")  # another session of this directory, newer
    out = infai(home, "run", "--from", first, "a branch")
    assert out.stderr.strip().endswith(sid)
    with Store(home).open_reader(sid) as reader:
        branch = [e for e in reader.entries() if e.parent_id == first]
    assert len(branch) == 2  # the old reply, and the new prompt continuing from it


def test_from_with_a_wrong_session_is_bad_input(home: Path, work: Path) -> None:
    _, first = _first_session(home, work)
    other = Store(home).create_session(working_dir=str(work)).id
    infai(home, "run", "--session", other, "--from", first, "x", code=2)
    with Store(home).open_reader(other) as reader:
        assert reader.count == 0


def test_chat_with_no_input_leaves_no_session(home: Path, work: Path) -> None:
    out = infai(home, "chat", stdin="")
    assert "removed" in out.stderr
    assert _ids(home) == []


def test_chat_says_how_to_come_back(home: Path, work: Path) -> None:
    out = infai(home, "chat", stdin="hello\n")
    [sid] = _ids(home)
    assert f"infai chat --session {sid}" in out.stderr


def test_run_reads_the_prompt_from_standard_input(home: Path, work: Path) -> None:
    out = infai(home, "run", stdin="a prompt from a pipe\n")
    assert "a prompt from a pipe" in out.stdout
    out = infai(home, "run", "-", stdin="dash too")
    assert "dash too" in out.stdout


@pytest.mark.parametrize("args", [["run", ""], ["run", "   "], ["run"]])
def test_an_empty_prompt_is_refused_and_creates_nothing(
    home: Path, work: Path, args: list[str]
) -> None:
    out = infai(home, *args, code=2, stdin="")
    assert "prompt" in out.stderr
    assert _ids(home) == []


def test_session_new_stores_the_resolved_working_dir(
    home: Path, work: Path, tmp_path: Path
) -> None:
    (work / "sub").mkdir()
    sid = infai(home, "session", "new", "--working-dir", "sub/..").stdout.strip()
    assert Store(home).info(sid).working_dir == str(work)
    out = infai(home, "run", "--continue", "hi")  # found from this directory
    assert out.stderr.strip().endswith(sid)


def test_session_new_refuses_a_missing_working_dir(home: Path, work: Path) -> None:
    out = infai(home, "session", "new", "--working-dir", "/nonexistent/dir", code=2)
    assert "/nonexistent/dir" in out.stderr
    assert _ids(home) == []

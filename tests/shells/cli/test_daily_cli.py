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
    assert f"infai --home {home} chat --session {sid}" in out.stderr  # the store typed, too


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


def test_tui_continue_with_nothing_to_continue_says_so(
    home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.shells.tui import InfaiApp

    monkeypatch.setattr("infai.shells.cli.tui.stdin_is_terminal", lambda: True)
    opened: list[InfaiApp] = []
    monkeypatch.setattr(InfaiApp, "run", lambda self: opened.append(self))
    out = infai(home, "--continue", code=2)
    assert "no session to continue" in out.stderr and opened == []


def test_store_copy_of_an_unknown_session_is_bad_input(home: Path, tmp_path: Path) -> None:
    kept = Store(home).create_session().id
    target = str(tmp_path / "other")
    out = infai(home, "store", "copy", "--from", str(home), "--to", target, kept, "nope", code=2)
    assert "nope" in out.stderr
    missing = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    out = infai(home, "store", "copy", "--from", str(home), "--to", target, missing, code=2)
    assert missing in out.stderr
    assert not Store(tmp_path / "other").exists(kept)  # checked before anything was copied


def test_store_copy_and_compact_take_json(home: Path, work: Path, tmp_path: Path) -> None:
    import json

    out = infai(home, "run", "hello")
    sid = out.stderr.strip().splitlines()[-1].removeprefix("session ")
    copied = json.loads(
        infai(home, "store", "copy", "--json", "--from", str(home), "--to",
              str(tmp_path / "other"), sid).stdout
    )  # fmt: skip
    assert copied == [
        {"session": sid, "outcome": "copied", "detail": copied[0]["detail"], "events": 3}
    ]  # fmt: skip  (a files snapshot, the prompt, the answer)
    summary = json.dumps({"summary": "said hello"})
    script = work / "summary.json"
    script.write_text(json.dumps([summary]))
    event = json.loads(
        infai(home, "compact", sid, "--model", f"scripted:{script}", "--json").stdout
    )
    assert event["kind"] == "compaction" and event["record"]["summary"] == "said hello"


def test_a_headless_tool_error_is_shown_whole(home: Path, work: Path) -> None:
    import json

    long_name = "d" * 300
    call = {"id": "c1", "name": "read_file", "arguments": {"path": f"{long_name}/missing.txt"}}
    script = work / "script.json"
    script.write_text(
        json.dumps([{"role": "assistant", "content": "", "tool_calls": [call]}, "ok"])
    )
    out = infai(home, "run", "--model", f"scripted:{script}", "read it")
    [line] = [x for x in out.stderr.splitlines() if x.startswith("[read_file error]")]
    assert f"{long_name}/missing.txt" in line


def test_a_message_role_no_model_takes_is_refused_not_sent_as_user(home: Path, work: Path) -> None:
    import json

    sid = infai(home, "session", "new", "--working-dir", str(work)).stdout.strip()
    infai(
        home,
        "session",
        "append",
        sid,
        "--kind",
        "message",
        "--role",
        "wizard",
        "--content",
        "abracadabra",
    )  # fmt: skip  (the store itself takes any role)
    script = work / "script.json"
    script.write_text(json.dumps(["never asked"]))
    out = infai(home, "run", "--session", sid, "--model", f"scripted:{script}", "hi", code=1)
    assert "role 'wizard'" in out.stderr and "never asked" not in out.stdout


def test_a_wait_for_another_writer_is_said_at_once(home: Path, work: Path) -> None:
    import time

    store = Store(home)
    sid = store.create_session().id
    args = ("session", "append", sid, "--kind", "message", "--role", "user", "--content", "x")
    with store.open_writer(sid):  # another writer holds the session
        started = time.monotonic()
        out = infai(home, "--lock-timeout", "0.5", *args, code=1)
    assert time.monotonic() - started < 5
    waiting, gave_up = out.stderr.splitlines()[:2]
    assert "is being written by another process" in waiting and "waiting up to 0.5s" in waiting
    assert f"(pid {__import__('os').getpid()})" in waiting
    assert "gave up after 0.5s" in gave_up


def test_a_mistyped_store_directory_is_said(home: Path, tmp_path: Path) -> None:
    typo = str(tmp_path / "no-such-store")
    out = CliRunner().invoke(main, ["--store", typo, "session", "ls"])
    assert out.exit_code == 2 and "no such directory" in out.stderr
    assert not Path(typo).exists()
    made = CliRunner().invoke(main, ["--store", typo, "session", "new"])
    assert made.exit_code == 0 and Path(typo).is_dir()  # a command that writes makes it


def test_tools_never_write_infais_own_store_or_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent run in $HOME: the store and config beneath it stay out of reach."""
    import json

    monkeypatch.chdir(tmp_path)
    home = tmp_path / "store"
    config = tmp_path / "infai.toml"
    config.write_text("")
    monkeypatch.setenv("INFAI_CONFIG", str(config))
    sid = Store(home).create_session(working_dir=str(tmp_path)).id
    target = f"store/sessions/{sid}/session.json"
    calls = [
        {"id": "c1", "name": "write_file", "arguments": {"path": target, "content": "{}"}},
        {"id": "c2", "name": "write_file", "arguments": {"path": "infai.toml", "content": "x"}},
        {"id": "c3", "name": "write_file", "arguments": {"path": "fine.txt", "content": "ok"}},
    ]
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps([{"role": "assistant", "content": "", "tool_calls": calls}, "done"])
    )
    before = (home / "sessions" / sid / "session.json").read_bytes()
    infai(home, "run", "--session", sid, "--model", f"scripted:{script}", "--allow", "write_file",
          "go")  # fmt: skip
    assert (home / "sessions" / sid / "session.json").read_bytes() != b"{}"
    assert config.read_text() == ""
    assert (tmp_path / "fine.txt").read_text() == "ok"
    assert before  # the session's own metadata is the store's to change


def test_the_readmes_scripted_example_runs_as_described(home: Path, work: Path) -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "scripted-demo.json"
    (work / "hello.txt").write_text("hi")
    out = infai(home, "run", "--model", f"scripted:{example}", "what is here?")
    assert "[list_files ok] hello.txt" in out.stderr
    assert "I listed the top of the repository" in out.stdout
    chat = infai(home, "chat", "--model", f"scripted:{example}", stdin="what is here?\nmore\n")
    assert "overloaded" in chat.stderr

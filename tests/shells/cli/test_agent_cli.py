"""`infai run` and `infai chat` with the offline and scripted models."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main
from infai.store import MessageRecord, Store


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


def script(work: Path, *replies: object) -> str:
    path = work / "script.json"
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


def test_run_with_the_offline_model(home: Path, work: Path) -> None:
    out = infai(home, "run", "what is this repo?")
    assert out.stdout.startswith("offline model: you said 'what is this repo?'")
    sid = out.stderr.strip().splitlines()[-1].removeprefix("session ")
    info = Store(home).info(sid)
    assert info.working_dir == str(work) and info.model == "offline"
    again = infai(home, "run", "--continue", "and now?")
    assert "(3 messages in context)" in again.stdout
    assert again.stderr.strip().endswith(sid)


def test_run_json_events(home: Path, work: Path) -> None:
    lines = [json.loads(x) for x in infai(home, "run", "--json", "hi").stdout.splitlines()]
    files, lines = lines[0]["event"], lines[1:]  # a turn starts by recording the files
    assert files["kind"] == "snapshot" and files["record"]["reason"] == "turn start"
    prompt = {"content": "hi", "metadata": {"turn": True}}  # a turn answers it
    assert lines[0]["type"] == "saved" and lines[0]["event"]["record"] == prompt
    assert {x["type"] for x in lines[1:-2]} == {"stream"}
    assert lines[-2]["type"] == "saved" and lines[-2]["event"]["role"] == "assistant"
    sid = lines[0]["session"]  # every line names its session (issue 13)
    assert lines[-1] == {"type": "end", "outcome": "done", "error": None, "session": sid}


def test_run_tools_are_denied_headless_unless_allowed(home: Path, work: Path) -> None:
    write = {
        "content": "writing",
        "tool_calls": [
            {"id": "c1", "name": "write_file", "arguments": {"path": "out.txt", "content": "hi"}}
        ],
    }
    model = script(work, write, "done")
    denied = infai(home, "run", "--model", model, "write it")
    assert "[write_file error] permission denied" in denied.stderr
    assert not (work / "out.txt").exists()
    allowed = infai(home, "run", "--model", model, "--allow", "write_file out.txt", "write it")
    assert "[write_file ok] wrote 2 characters to out.txt" in allowed.stderr
    assert (work / "out.txt").read_text() == "hi"
    assert allowed.stdout == "writing\ndone\n"


def test_run_fails_with_exit_1_on_a_provider_error(home: Path, work: Path) -> None:
    model = script(work, {"error": "rate limited", "status": 429})
    out = infai(home, "run", "--model", model, "hi", code=1)
    assert "infai: rate limited" in out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "openai:gpt-4.1"], "needs an API key: set OPENAI_API_KEY"),
        (["--model", "nope"], "unknown model 'nope'"),
        (["--model", "scripted:/nonexistent.json"], "cannot read model script"),
        (["--continue"], "no session to continue"),
        (["--allow", " "], "empty allow rule"),
        (["--session", "not-a-uuid"], "not a UUID"),
    ],
)
def test_run_bad_input_is_exit_2(home: Path, work: Path, args: list[str], message: str) -> None:
    out = infai(home, "run", *args, "hi", code=2)
    assert message in out.stderr


def test_run_from_an_older_event_branches(home: Path, work: Path) -> None:
    first = [json.loads(line) for line in infai(home, "run", "--json", "one").stdout.splitlines()]
    user_event = next(
        x["event"]["id"] for x in first if x.get("event", {}).get("kind") == "message"
    )
    infai(home, "run", "--continue", "two")
    branch = infai(home, "run", "--continue", "--from", user_event, "--json", "instead")
    saved = json.loads(branch.stdout.splitlines()[0])["event"]
    assert saved["parent_id"] == user_event and saved["branch_from"] == user_event
    sid = Store(home).list_sessions()[0].id
    with Store(home).open_reader(sid) as reader:
        assert [e.preview for e in reader.path() if e.kind == "message"][:2] == ["one", "instead"]
        assert len(reader.leaves()) == 2


def test_chat_reads_prompts_line_by_line(home: Path, work: Path) -> None:
    out = infai(home, "chat", stdin="first\n\nsecond\n/exit\nnot sent\n")
    assert out.stdout.count("offline model: you said") == 2
    assert "not sent" not in out.stdout


def test_run_offers_the_task_tool_for_subagents(home: Path, work: Path) -> None:
    call = {"id": "t1", "name": "task", "arguments": {"prompt": "count the files"}}
    model = script(work, {"tool_calls": [call]}, "three files", "The subagent counted three.")
    out = infai(home, "run", "--model", model, "how many files?")
    assert "[task ok] three files" in out.stderr
    assert out.stdout.endswith("The subagent counted three.\n")
    sessions = {i.id: i for i in Store(home).list_sessions()}
    [child] = [i for i in sessions.values() if i.parent_session]
    assert child.parent_session in sessions


def test_continue_skips_a_subagents_child_session(home: Path, work: Path) -> None:
    first = infai(home, "run", "parent")
    sid = first.stderr.strip().splitlines()[-1].removeprefix("session ")
    store = Store(home)
    child = store.create_session(working_dir=str(work), parent_session=sid).id
    with store.open_writer(child) as writer:  # the child is the newest session here
        writer.append(MessageRecord(content="a subagent's work"), "user")
    again = infai(home, "run", "--continue", "and now?")
    assert again.stderr.strip().endswith(sid)


def test_a_misspelt_allow_rule_is_refused(home: Path, work: Path) -> None:
    out = infai(home, "run", "--allow", "bsh ls", "hi", code=2)
    assert "unknown tool 'bsh'" in out.output + out.stderr


def test_a_session_run_from_elsewhere_follows_its_own_projects_rules(
    home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (work / ".infai").mkdir()
    (work / ".infai" / "config.toml").write_text('[permissions]\ndeny = ["read_file *"]\n')
    (work / "notes.txt").write_text("private\n")
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}],
    }
    model = script(work, call, "done")
    first = infai(home, "run", "--model", model, "read it")
    sid = first.stderr.strip().splitlines()[-1].removeprefix("session ")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    model = script(work, call, "done")
    infai(home, "run", "--session", sid, "--model", model, "again")
    with Store(home).open_reader(sid) as reader:
        results = [e.record for e in reader.context().events if e.kind == "tool_result"]
    assert len(results) == 2
    assert all(r.is_error and "denied" in r.content for r in results)  # type: ignore[union-attr]


def test_run_json_lines_are_the_agents_one_json_form(
    home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each line of ``run --json`` is :func:`event_to_obj` of the agent event the
    turn yielded, in order: the form the server sends, not one of the CLI's own."""
    from infai.agent import AgentSession, event_to_obj

    seen: list[Any] = []
    real = AgentSession.prompt

    async def recording(self: AgentSession, text: str) -> AsyncIterator[Any]:
        async for event in real(self, text):
            seen.append(event)
            yield event

    monkeypatch.setattr(AgentSession, "prompt", recording)
    call = {"id": "c1", "name": "list_files", "arguments": {"path": "."}}
    model = script(work, {"content": "looking", "tool_calls": [call]}, "found it")
    lines = [
        json.loads(x)
        for x in infai(home, "run", "--json", "--model", model, "hi").stdout.splitlines()
    ]
    assert len(seen) == len(lines) > 5
    sid = lines[0]["session"]  # the one form, with the session's id added (issue 13)
    assert lines == [json.loads(json.dumps({**event_to_obj(e), "session": sid})) for e in seen]
    kinds = [(x["type"], x.get("kind") or x.get("event", {}).get("kind")) for x in lines]
    assert ("saved", "tool_call") in kinds and ("saved", "tool_result") in kinds
    saved = [x["event"] for x in lines if x["type"] == "saved"]
    assert [e["seq"] for e in saved] == list(range(len(saved)))  # its place in the log
    assert saved[0]["kind"] == "snapshot" and saved[1]["preview"] == "hi"  # files, then the prompt
    text = next(x for x in lines if x["type"] == "stream" and x["kind"] == "text")
    assert set(text) == {"type", "kind", "text", "session"}


class CountingModel:
    """An offline model that counts how often it is closed."""

    closed: ClassVar[list[str]] = []

    def __init__(self, name: str) -> None:
        from infai.llm import OfflineModel

        self._inner = OfflineModel()
        self.name = name
        self.context_window = self._inner.context_window

    def stream(self, request: Any) -> Any:
        return self._inner.stream(request)

    async def aclose(self) -> None:
        self.closed.append(self.name)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from infai.agent import Harness

    CountingModel.closed = []
    monkeypatch.setattr(Harness, "build_model", lambda self, name: CountingModel(name))
    return CountingModel.closed


def test_each_model_the_cli_builds_is_closed_once(
    home: Path, work: Path, counted: list[str]
) -> None:
    infai(home, "run", "--model", "m1", "hi")
    assert counted == ["m1"]
    infai(home, "chat", "--model", "m2", stdin="one\ntwo\n")
    assert counted == ["m1", "m2"]
    sid = Store(home).list_sessions()[0].id
    infai(home, "compact", sid, "--model", "m3")
    assert counted == ["m1", "m2", "m3"]


def test_a_session_that_cannot_be_opened_closes_the_model_built_for_it(
    home: Path, work: Path, counted: list[str]
) -> None:
    missing = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    out = infai(home, "run", "--model", "m1", "--session", missing, "hi", code=2)
    assert "no session" in out.stderr
    assert counted == ["m1"]  # it used to be left open (an SDK client's connections)

"""The SDK's example programs (``examples/``), each run as a real process, as a user runs it.

Each test scripts the model (``scripted:FILE``), runs the program with
``sys.executable`` in a working directory of its own and a store of its own
(``$INFAI_HOME``), feeds its standard input where a person would type, and
checks the effect: the files the agent wrote, the sessions and branches in the
store, and the permission decisions recorded there. The chat front end talks to
a real ``infai serve``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.store import Store, ToolResultRecord

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOKEN = "sdk-example-token-0123456789"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The programs' environment: a store of the test's own, no server token."""
    base = {k: v for k, v in os.environ.items() if k not in ("INFAI_STORE", "INFAI_SERVER_TOKEN")}
    return {**base, "INFAI_HOME": str(tmp_path / "home")}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


def script(tmp_path: Path, *replies: object) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted reply that calls one tool."""
    return {"content": "", "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def example(
    name: str, *args: str, env: dict[str, str], stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


def results(home: Path, session_id: str) -> list[ToolResultRecord]:
    """The session's tool results, in order, as stored."""
    with Store(home).open_reader(session_id) as view:
        events = [view.event(entry.id, resolve=True) for entry in view.entries()]
    return [e.record for e in events if isinstance(e.record, ToolResultRecord)]


def test_batch_runs_each_prompt_in_its_own_session(
    tmp_path: Path, work: Path, env: dict[str, str]
) -> None:
    model = script(
        tmp_path,
        call("c1", "write_file", path="notes/todo.md", content="- ship the SDK\n"),
        "Wrote the notes.",
        call("c2", "bash", command="make deploy"),  # asks: nobody is there, so denied
        "Could not deploy.",
        "Just an answer.",
        {"error": "overloaded", "status": 529},
    )
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("write notes\n\ndeploy\nsay hi\nfail\n")
    args = ["--dir", str(work), "--model", model, "--allow", "write_file notes/*"]
    done = example("batch.py", *args, str(prompts), env=env)
    assert done.returncode == 1, done.stderr  # the last turn failed
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["prompt"] for line in lines] == ["write notes", "deploy", "say hi", "fail"]
    assert [line["outcome"] for line in lines] == ["done", "done", "done", "error"]
    assert lines[0]["answer"] == "Wrote the notes." and lines[0]["tools"] == ["write_file"]
    assert (work / "notes" / "todo.md").read_text() == "- ship the SDK\n"
    home = Path(env["INFAI_HOME"])
    sessions = {info.id: info for info in Store(home).list_sessions()}
    assert set(sessions) == {line["session"] for line in lines}  # four sessions, each its own
    assert {info.working_dir for info in sessions.values()} == {str(work)}
    [denied] = results(home, lines[1]["session"])
    assert denied.is_error and "nobody can approve here" in denied.metadata["permission"]["reason"]


def test_the_approval_bot_allows_reads_and_asks_a_person_about_the_network(
    tmp_path: Path, work: Path, env: dict[str, str]
) -> None:
    (tmp_path / "outside.txt").write_text("next door\n")
    model = script(
        tmp_path,
        call("c1", "read_file", path="../outside.txt"),  # outside: the rules ask
        call("c2", "bash", command="curl -sS http://127.0.0.1:9/a"),
        call("c3", "bash", command="rm -rf build"),
        call("c4", "bash", command="wget -q -O- http://127.0.0.1:9/"),
        call("c5", "bash", command="git fetch origin"),
        call("c6", "bash", command="git fetch upstream"),  # "always" above: not asked
        "Done.",
    )
    typed = "n no network today\ny\na\n"  # a person's three answers, in order
    done = example(
        "approval_bot.py", "--dir", str(work), "--model", model, "fetch", env=env, stdin=typed
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("The agent wants to run: ") == 3
    sid = done.stderr.strip().splitlines()[-1].removeprefix("session ")
    verdicts = [r.metadata["permission"] for r in results(Path(env["INFAI_HOME"]), sid)]
    said = [(v["verdict"], v["by"], v["reason"]) for v in verdicts]
    assert said[0] == ("allow", "user", "allowed once")
    assert said[1] == ("deny", "user", "denied by the user: no network today")
    assert said[2][:2] == ("deny", "user") and "allows only reads" in said[2][2]
    assert said[3] == ("allow", "user", "allowed once")
    assert said[4][:2] == ("allow", "user") and "allowed always" in said[4][2]
    assert said[5][:2] == ("allow", "rule 'allow bash git fetch *'")  # kept: not asked
    kept = Store(Path(env["INFAI_HOME"])).info(sid).extra["allowed"]
    assert kept == ["bash git fetch", "bash git fetch *"]
    assert "read_file: allow" in done.stdout and not (work / "build").exists()


def test_branch_and_compare_two_approaches_from_one_event(
    tmp_path: Path, work: Path, env: dict[str, str]
) -> None:
    model = script(
        tmp_path,
        call("s1", "write_file", path="app.py", content="def add(a, b):\n    return a + b\n"),
        "Set up.",
        call("a1", "write_file", path="notes_a.txt", content="A was here\n"),
        "Approach A.",
        call("b1", "write_file", path="app.py", content="def add(a, b):\n    return b + a\n"),
        "Approach B.",
    )
    args = ["--dir", str(work), "--model", model, "--allow", "write_file *"]
    done = example("branch_compare.py", *args, "set up", "try A", "try B", env=env)
    assert done.returncode == 0, done.stderr
    # B started from the event's files: A's file was taken away before B ran
    assert not (work / "notes_a.txt").exists()
    assert (work / "app.py").read_text() == "def add(a, b):\n    return b + a\n"
    out = done.stdout.splitlines()
    assert " removed  notes_a.txt" in out and "modified  app.py" in out
    assert "-    return a + b" in out and "+    return b + a" in out
    sid = out[0].split()[1].rstrip(":")
    with Store(Path(env["INFAI_HOME"])).open_reader(sid) as view:
        assert len(view.leaves()) == 2  # both approaches stay, as two branches


@pytest.fixture
def server(tmp_path: Path, work: Path, env: dict[str, str]) -> Iterator[str]:
    """``infai serve`` for real, on a free loopback port, with a scripted model."""
    model = script(
        tmp_path,
        "Hello from the server.",
        call("w1", "write_file", path="hello.txt", content="hi\n"),
        "Wrote hello.txt.",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "infai", "serve", "--port", "0", "--model", model],
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "INFAI_SERVER_TOKEN": TOKEN},
        cwd=work,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("infai: serving http://127.0.0.1:"), line
        yield line.split()[2]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()  # type: ignore[union-attr]


def test_a_chat_front_end_on_the_http_api(
    server: str, tmp_path: Path, work: Path, env: dict[str, str]
) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    args = ["--url", server, "--token-file", str(token), "--dir", str(work)]
    typed = "hi there\nplease write hello.txt\ny\n"  # the y answers the write's question
    done = example("chat_http.py", *args, env=env, stdin=typed)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Hello from the server." in out and "[asks: write_file hello.txt]" in out
    assert "Wrote hello.txt." in out
    assert (work / "hello.txt").read_text() == "hi\n"
    sid = out.splitlines()[0].removeprefix("[session ").rstrip("]")
    [wrote] = results(Path(env["INFAI_HOME"]), sid)
    assert wrote.metadata["permission"]["by"] == "user" and not wrote.is_error

"""``infai mcp`` and ``infai run`` with MCP servers, as real processes.

The MCP server is tests/support/mcp_servers.py over stdio; the model, where
one is needed, is the fake OpenAI server (tests/support/fakeapi.py), so the
tool's name and schema go through the real SDK's wire format.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakeapi import FakeOpenAI, Reply
from infai.tools.sandbox import probe
from mcp_servers import SCRIPT


def infai(
    *args: str, cwd: Path, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infai", *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def server_table(name: str, log: Path, extra: str = "") -> str:
    args = json.dumps([str(SCRIPT), "stdio", str(log)])
    return f'[mcp.servers.{name}]\ncommand = "{sys.executable}"\nargs = {args}\n{extra}\n'


def setup(tmp_path: Path, config: str) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "work"
    work.mkdir()
    user = tmp_path / "config.toml"
    user.write_text(config)
    return work, {"INFAI_CONFIG": str(user), "INFAI_HOME": str(tmp_path / "home")}


def test_mcp_ls_lists_tools_and_says_in_one_line_what_is_wrong(tmp_path: Path) -> None:
    log = tmp_path / "work" / "log"
    config = (
        server_table("t", log)
        + '[mcp.servers.web]\nurl = "http://127.0.0.1:9/mcp"\n'
        + 'headers = { Authorization = "Bearer ${INFAI_TEST_UNSET_TOKEN}" }\n'
        + '[mcp.servers.off]\ncommand = "x"\nenabled = false\n'
        + f'[mcp.servers.bad]\ncommand = "{sys.executable}"\nargs = ["{SCRIPT}", "fail", "esc"]\n'
    )
    work, env = setup(tmp_path, config)
    out = infai("mcp", "ls", cwd=work, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("t  stdio  ready")
    assert "  mcp__t__count  (read-only)" in lines
    assert (
        "  unavailable: broken: its input schema refers to '#/$defs/missing', which is not in it"
        in lines
    )
    web = next(line for line in lines if line.startswith("web"))
    assert "down: header Authorization: ${INFAI_TEST_UNSET_TOKEN} is not set" in web
    assert any(line.startswith("off  stdio  disabled: enabled = false") for line in lines)
    # what the server said is shown in one line, and inert: its escapes cannot act
    bad = next(line for line in lines if line.startswith("bad"))
    assert "cannot reach the database" in bad and "\x1b" not in out.stdout
    assert "\x07" not in out.stdout

    shown = json.loads(infai("mcp", "ls", "--json", cwd=work, env=env).stdout)
    assert [row["name"] for row in shown] == ["t", "web", "off", "bad"]
    assert {"name": "mcp__t__echo", "remote": "echo", "read_only": False} in shown[0]["tools"]


def test_a_bad_server_table_is_an_error_naming_the_file_and_key(tmp_path: Path) -> None:
    work, env = setup(tmp_path, '[mcp.servers.gh]\ncommand = "x"\nurl = "http://h/mcp"\n')
    out = infai("mcp", "ls", cwd=work, env=env)
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert env["INFAI_CONFIG"] in line and "mcp.servers.gh: give either command" in line


def test_mcp_call_goes_through_the_policy(tmp_path: Path) -> None:
    log = tmp_path / "work" / "log"
    work, env = setup(tmp_path, server_table("t", log))
    refused = infai("mcp", "call", "t", "echo", "--args", '{"text": "hi"}', cwd=work, env=env)
    assert refused.returncode == 1
    assert "permission denied" in refused.stderr and "nobody can approve" in refused.stderr
    assert not log.exists()  # the server never saw the call
    allowed = infai(
        "mcp", "call", "t", "echo", "--args", '{"text": "hi"}', "--allow", "mcp__t__echo",
        cwd=work, env=env,
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.strip() == "echo: hi"
    assert log.read_text().splitlines() == ['call echo {"text": "hi"}']


def test_infai_run_through_the_fake_openai_server_calls_an_mcp_tool(tmp_path: Path) -> None:
    log = tmp_path / "work" / "log"
    replies = [
        Reply(tool_calls=[("call_1", "mcp__t__echo", {"text": "from the model"})]),
        Reply(text="The server said it back."),
    ]
    with FakeOpenAI(replies) as fake:
        config = (
            'model = "local"\n[models.local]\nprovider = "openai"\nmodel = "m"\n'
            f'base_url = "{fake.base_url}"\ncontext_window = 32768\n' + server_table("t", log)
        )
        work, env = setup(tmp_path, config)
        env["OPENAI_API_KEY"] = "sk-test"
        out = infai("run", "--allow", "mcp__t__echo", "use the tool", cwd=work, env=env)
    assert out.returncode == 0, out.stderr
    assert "The server said it back." in out.stdout
    first, second = fake.requests
    tools = {t["function"]["name"]: t["function"] for t in first.body["tools"]}
    assert tools["mcp__t__echo"]["parameters"]["properties"]["text"]["type"] == "string"
    answered = [m for m in second.body["messages"] if m["role"] == "tool"]
    assert answered[0]["content"] == "echo: from the model"
    assert log.read_text().splitlines() == ['call echo {"text": "from the model"}']


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        found.setdefault(ppid, []).append(int(entry))
    return found


def _descendants(pid: int) -> set[int]:
    children, found, todo = _children(), set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie runs nothing; its parent reaps it


@pytest.mark.crash  # a real SIGKILL, and a wait for every server process to go
@pytest.mark.skipif(not probe().ok, reason="bubblewrap cannot run here")
def test_no_mcp_server_outlives_a_sigkilled_infai(tmp_path: Path) -> None:
    log = tmp_path / "work" / "log"
    replies = [
        Reply(tool_calls=[("call_1", "mcp__t__spawn", {})]),  # a daemon of the server's own
        Reply(tool_calls=[("call_2", "mcp__t__hang", {})]),
        Reply(text="never"),
    ]
    with FakeOpenAI(replies) as fake:
        config = (
            'model = "local"\n[models.local]\nprovider = "openai"\nmodel = "m"\n'
            f'base_url = "{fake.base_url}"\ncontext_window = 32768\n'
            + server_table("t", log, "call_timeout = 600")
        )
        work, env = setup(tmp_path, config)
        env["OPENAI_API_KEY"] = "sk-test"
        run = subprocess.Popen(
            [sys.executable, "-m", "infai", "run", "--allow", "mcp__t__*", "wait"],
            cwd=work,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while "call hang" not in (log.read_text() if log.exists() else ""):
                assert run.poll() is None and time.monotonic() < deadline, "never called"
                time.sleep(0.1)
            servers = _descendants(run.pid)
            assert len(servers) >= 2  # the server and its daemon (in bubblewrap), running
            os.kill(run.pid, signal.SIGKILL)
            run.wait()
            deadline = time.monotonic() + 30
            while any(_alive(pid) for pid in servers) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not [pid for pid in servers if _alive(pid)], "an MCP server outlived infai"
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()


def test_mcp_call_asks_on_a_terminal(tmp_path: Path) -> None:
    import pty

    log = tmp_path / "work" / "log"
    work, env = setup(tmp_path, server_table("t", log))
    master, slave = pty.openpty()
    try:
        os.write(master, b"y\n")  # the answer, waiting in the terminal's input
        done = subprocess.run(
            [sys.executable, "-m", "infai", "mcp", "call", "t", "echo", "--args", '{"text": "ok"}'],
            cwd=work,
            env={**os.environ, **env},
            stdin=slave,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(master)
        os.close(slave)
    assert done.returncode == 0, done.stderr
    assert "mcp__t__echo wants to run" in done.stderr
    assert done.stdout.strip() == "echo: ok"
    assert log.read_text().splitlines() == ['call echo {"text": "ok"}']

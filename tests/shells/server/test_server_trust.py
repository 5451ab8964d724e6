"""The server trusts nothing from outside, and stays responsive while a tool blocks.

- Each session runs under its own working directory's ``.infai/config.toml``,
  not that of the directory the server was started in: a repository's deny rule
  holds for its sessions, and another (trusted) project's allow rules do not
  reach them.
- A request whose ``Host`` header names the server by anything but a loopback
  name and its port (DNS rebinding) is answered 421 before the token is looked
  at, unless the app accepts any Host (``infai serve --allow-remote``).
- While a turn's tool blocks (a read of a FIFO nobody writes), health, other
  sessions and ``POST /cancel`` answer at once.

Every check is judged by its effect over a real loopback connection: a file a
command would have made, the status a request gets, how long an answer takes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_server import AUTH, TOKEN, Running, harnesses

from infai.agent import Harness
from infai.llm import Message, Model, ScriptedModel, ToolCall
from infai.llm.registry import build_model
from infai.shells.server import create_app
from infai.shells.server.hosts import split_host
from infai.shells.server.run import ServerThread
from infai.store import Store, StoreOptions

#: how long an answer may take while a tool blocks: generous for a loaded machine
#: (3 s left little room); one held behind a blocked read waits for its 60 s gate
PROMPT = 10.0


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.fixture
def make(tmp_path: Path, work: Path) -> Iterator[Callable[..., Running]]:
    yield from harnesses(tmp_path / "home", work)


def bash_script(path: Path, command: str) -> str:
    """A scripted model (a file) that runs ``command``, then says done."""
    call = {"id": "c1", "name": "bash", "arguments": {"command": command}}
    path.write_text(json.dumps([{"content": "", "tool_calls": [call]}, "done"]))
    return f"scripted:{path}"


def streamed_turn(client: httpx.Client, sid: str, answer: str | None = None) -> list[str]:
    """Run one turn with ``stream: true``; answer any permission question with
    ``answer``; the frames' event names, in order."""
    names: list[str] = []
    body = {"text": "go", "stream": True}
    with client.stream("POST", f"/v1/sessions/{sid}/prompt", json=body) as response:
        assert response.status_code == 200, response.read()
        name = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
                names.append(name)
            elif line.startswith("data: ") and name == "approval":
                question = json.loads(line.removeprefix("data: "))
                reply = {"id": question["id"], "answer": answer or "deny"}
                with httpx.Client(base_url=str(client.base_url), headers=AUTH) as other:
                    other.post(f"/v1/sessions/{sid}/approvals", json=reply)
    return names


# -- each session's own project configuration ----------------------------------


def test_a_session_runs_under_its_own_directorys_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started in A (a trusted project allowing every command), the server opens a
    session in B (a repository denying ``touch``): B's deny holds, A's allow does
    not reach B's session, and A's own session still runs under A's rules."""
    here, there = tmp_path / "A", tmp_path / "B"
    for root in (here, there):
        (root / ".infai").mkdir(parents=True)
    user = tmp_path / "user.toml"
    user.write_text(f"trusted_projects = [{str(here)!r}]\n")
    monkeypatch.setenv("INFAI_CONFIG", str(user))
    (here / ".infai" / "config.toml").write_text('[permissions]\nallow = ["bash *"]\n')
    (there / ".infai" / "config.toml").write_text('[permissions]\ndeny = ["bash touch*"]\n')
    store = Store(tmp_path / "home", options=StoreOptions(lock_timeout=5))
    space = Harness(store, here)
    app = create_app(store, token=TOKEN, harness=space, approval_timeout=5)
    with (
        ServerThread(app) as server,
        httpx.Client(base_url=server.url, headers=AUTH, timeout=20) as client,
    ):

        def session(root: Path, command: str, name: str) -> str:
            model = bash_script(tmp_path / f"{name}.json", command)
            made = client.post("/v1/sessions", json={"working_dir": str(root), "model": model})
            assert made.status_code == 201, made.text
            sid: str = made.json()["id"]
            return sid

        # B's deny holds (on the server's old configuration, A's allow ran it)
        denied = session(there, "touch pwned", "b1")
        streamed_turn(client, denied)
        assert not (there / "pwned").exists()
        # A's allow does not reach B: a command B says nothing about is asked
        asked = session(there, "mkdir made", "b2")
        assert "approval" in streamed_turn(client, asked, answer="deny")
        assert not (there / "made").exists()
        # and A's own session runs under A's rules: allowed, no question
        mine = session(here, "touch mine", "a1")
        assert "approval" not in streamed_turn(client, mine)
        assert (here / "mine").exists()


def test_what_a_sessions_file_left_out_is_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    here, there = tmp_path / "A", tmp_path / "B"
    here.mkdir()
    (there / ".infai").mkdir(parents=True)
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "none.toml"))
    (there / ".infai" / "config.toml").write_text('[permissions]\nallow = ["bash *"]\n')
    store = Store(tmp_path / "home")
    app = create_app(store, token=TOKEN, harness=Harness(store, here))
    with (
        ServerThread(app) as server,
        httpx.Client(base_url=server.url, headers=AUTH, timeout=20) as client,
    ):
        for _ in range(2):
            sid = client.post("/v1/sessions", json={"working_dir": str(there)}).json()["id"]
            assert client.post(f"/v1/sessions/{sid}/prompt", json={"text": "hi"}).is_success
    said = [r.getMessage() for r in caplog.records if "allow rules were left out" in r.getMessage()]
    assert len(said) == 1 and str(there) in said[0]


# -- the Host header -----------------------------------------------------------


def raw_get(port: int, host: str | None, path: str = "/v1/health") -> tuple[int, dict[str, Any]]:
    """A GET with exactly this Host header (None: none), over a plain socket."""
    head = f"GET {path} HTTP/1.1\r\n" + (f"Host: {host}\r\n" if host is not None else "")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall((head + "Connection: close\r\n\r\n").encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    body = data.partition(b"\r\n\r\n")[2]
    return status, json.loads(body) if body.startswith(b"{") else {}


def test_a_rebound_name_is_refused_before_the_token(make: Callable[..., Running]) -> None:
    h = make()
    port = h.server.port
    for good in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
        assert raw_get(port, good)[0] == 200, good
    for bad in (
        f"evil.example:{port}",  # DNS rebinding: the attacker's name, our address
        "evil.example",
        f"localhost.evil.example:{port}",
        f"127.0.0.1:{port + 1}",  # another port: another origin
        "localhost",  # port 80 implied
        f"127.0.0.1:{port}x",
    ):
        status, body = raw_get(port, bad)
        assert status == 421, bad
        assert "not this server" in body["error"] and "--allow-remote" in body["error"]
    assert raw_get(port, None)[0] in (400, 421)  # no Host at all (HTTP/1.1 itself says 400)
    # with the token, through the API's client: still refused
    rebound = httpx.Client(base_url=h.url, headers={**AUTH, "Host": "evil.example"}, timeout=10)
    h.closing.append(rebound)
    refused = rebound.get("/v1/sessions")
    assert refused.status_code == 421 and refused.json()["error"].startswith("misdirected")


def test_any_host_is_accepted_when_the_app_allows_remote(tmp_path: Path, work: Path) -> None:
    store = Store(tmp_path / "home")
    app = create_app(store, token=TOKEN, working_dir=work, hosts=None)
    with ServerThread(app) as server:
        assert raw_get(server.port, "infai.lan:1234")[0] == 200
        assert raw_get(server.port, "evil.example", "/v1/sessions")[0] == 401  # the token


def test_split_host() -> None:
    assert split_host("LocalHost:8421") == ("localhost", 8421)
    assert split_host("[::1]:80") == ("[::1]", 80)
    assert split_host("[::1]") == ("[::1]", None)
    with pytest.raises(ValueError, match="port"):
        split_host("a:b")


# -- responsiveness while a tool blocks ----------------------------------------


READER = "reader"


def offline() -> Model:
    return build_model("offline")


def read_call(path: str) -> Message:
    call = ToolCall("c1", "read_file", {"path": path})
    return Message(role="assistant", content="reading", tool_calls=(call,))


def timed(call: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    start = time.monotonic()
    response = call()
    return response, time.monotonic() - start


def stuck_reads(monkeypatch: pytest.MonkeyPatch, work: Path) -> threading.Event:
    """Reads of the file named ``stuck`` block their worker thread until the returned
    gate is set (a FIFO no longer blocks a read: it is refused at once, see
    tests/tools/test_files_beneath.py, so the blocking read is stood in for)."""
    from infai.tools.files import ReadFile

    gate = threading.Event()
    real_read = ReadFile.read

    def read(self: ReadFile, arguments: dict[str, Any], context: Any) -> Any:
        if arguments.get("path") == "stuck":
            gate.wait(60)
        return real_read(self, arguments, context)

    monkeypatch.setattr(ReadFile, "read", read)
    (work / "stuck").write_text("finally")
    return gate


@pytest.mark.parametrize("blocked", [1, 12])
def test_health_other_sessions_and_cancel_answer_while_tools_block(
    make: Callable[..., Running], work: Path, blocked: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``blocked`` sessions each run a read that blocks its worker thread (12: more
    than the event loop's default pool of worker threads on a small machine), then:
    health, another session's requests and a turn of its own, and cancelling every
    blocked turn answer promptly (the read is :func:`stuck_reads`).
    """
    gate = stuck_reads(monkeypatch, work)
    h = make(
        lambda name: ScriptedModel([read_call("stuck"), "read"]) if name == READER else offline()
    )
    stuck = [h.new_session(model=READER) for _ in range(blocked)]
    other = h.new_session()
    try:
        turns = {sid: h.prompt(sid, "read it") for sid in stuck}
        h.wait(lambda: all(_reading(h, sid) for sid in stuck))
        health, took = timed(lambda: h.client.get("/v1/health"))
        assert health.status_code == 200 and took < PROMPT
        detail, took = timed(lambda: h.client.get(f"/v1/sessions/{other}"))
        assert detail.status_code == 200 and took < PROMPT
        response, took = timed(
            lambda: h.client.post(
                f"/v1/sessions/{other}/prompt", json={"text": "hi", "stream": True}
            )
        )
        assert response.status_code == 200 and "turn_ended" in response.text and took < PROMPT
        for sid, turn in turns.items():
            cancelled, took = timed(
                lambda sid=sid, turn=turn: h.client.post(  # type: ignore[misc]
                    f"/v1/sessions/{sid}/cancel", json={"turn": turn}
                )
            )
            assert cancelled.json() == {"turn": turn, "outcome": "cancelled"} and took < PROMPT
    finally:
        gate.set()


def _reading(h: Running, sid: str) -> bool:
    """Whether the session's tool call has been stored (its read has begun)."""
    events = h.client.get(f"/v1/sessions/{sid}/events", params={"all": "true"}).json()
    return any(e["kind"] == "tool_call" for e in events["events"])


def test_a_blocked_thread_is_not_left_waiting_on_a_cancelled_turn(
    make: Callable[..., Running], work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After cancelling a turn whose read blocks its worker thread, the session takes
    a new turn at once: its slot is free once the cancel has answered, never held
    by the thread still blocked in the read. (A cancel racing a turn that ends by
    itself: tests/shells/server/test_server_cancel_race.py.)"""
    gate = stuck_reads(monkeypatch, work)
    script: list[Message | str] = [read_call("stuck"), "then", "again"]
    h = make(lambda name: ScriptedModel(script) if name == READER else offline())
    sid = h.new_session(model=READER)
    try:
        turn = h.prompt(sid, "read")
        h.wait(lambda: _reading(h, sid))
        cancelled = h.client.post(f"/v1/sessions/{sid}/cancel", json={"turn": turn})
        assert cancelled.json() == {"turn": turn, "outcome": "cancelled"}
        again, took = timed(
            lambda: h.client.post(f"/v1/sessions/{sid}/prompt", json={"text": "go", "stream": True})
        )
        assert again.status_code == 200 and "turn_ended" in again.text and took < PROMPT
    finally:
        gate.set()


LAUNCH = "import sys\nfrom infai.shells import cli\ncli.main(sys.argv[1:], prog_name='infai')\n"


@pytest.mark.parametrize("remote", [False, True])
def test_infai_serve_says_which_hosts_it_answers(tmp_path: Path, remote: bool) -> None:
    """``infai serve`` checks Host unless ``--allow-remote``, and its start says so."""
    env = {**os.environ, "INFAI_SERVER_TOKEN": TOKEN}
    args = ["--home", str(tmp_path / "home"), "serve", "--port", "0"]
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, *args, *(["--allow-remote"] if remote else [])],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert proc.stderr is not None
        port = int(proc.stderr.readline().split()[2].removesuffix("/v1").rsplit(":", 1)[1])
        said = proc.stderr.readline()
        deadline = time.monotonic() + 10
        while True:  # the socket is bound before it is said; listening begins just after
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "the server did not start listening"
                time.sleep(0.05)
        if remote:
            assert "accepting any Host header (--allow-remote)" in said
            assert raw_get(port, "infai.lan")[0] == 200
        else:
            assert f"accepting Host localhost, 127.0.0.1 or [::1] on port {port} only" in said
            assert raw_get(port, f"evil.example:{port}")[0] == 421
            assert raw_get(port, f"localhost:{port}")[0] == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()  # type: ignore[union-attr]


def catastrophic_line(seconds: float) -> str:
    """A line on which ``(a+)+$`` backtracks for about ``seconds`` here (the cost
    doubles with each ``a``; measured on a short line, so calibrating is quick)."""
    import re

    n, took = 16, 0.0
    while took < 0.05:
        n += 1
        start = time.monotonic()
        re.search(r"(a+)+$", "a" * n + "b")
        took = time.monotonic() - start
    while took < seconds:
        n, took = n + 1, took * 2
    return "a" * n + "b"


def test_health_answers_while_a_grep_backtracks(make: Callable[..., Running], work: Path) -> None:
    """The review's attack: ``(a+)+$`` on a long line of ``a``. Its grep runs in a
    worker thread, and the match lets the loop run meanwhile (measured: this holds
    on today's code; a guard, so that it stays so whatever grep's limit becomes)."""
    (work / "input.txt").write_text(catastrophic_line(1.5) + "\n")
    call = ToolCall("g1", "grep", {"pattern": "(a+)+$", "path": "."})
    script: list[Message | str] = [Message(role="assistant", tool_calls=(call,)), "searched"]
    h = make(lambda name: ScriptedModel(script) if name == READER else offline())
    sid = h.new_session(model=READER)
    worst, done = 0.0, threading.Event()

    def ping() -> None:
        nonlocal worst
        with httpx.Client(base_url=h.url, timeout=30) as client:
            while not done.is_set():
                _, took = timed(lambda: client.get("/v1/health"))
                worst = max(worst, took)
                time.sleep(0.02)

    pinger = threading.Thread(target=ping)
    pinger.start()
    try:
        body = {"text": "search", "stream": True}
        ended = h.client.post(f"/v1/sessions/{sid}/prompt", json=body, timeout=60)
        assert ended.status_code == 200 and "turn_ended" in ended.text
    finally:
        done.set()
        pinger.join()
    assert worst < 0.75, f"health took {worst:.1f}s while grep ran"

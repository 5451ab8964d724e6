"""``infai --remote URL``: the command line against a real ``infai serve`` process.

The remote forms print what the local commands print over the same store (the
server serves the store the local commands read), a turn runs on the server with
its text streamed here, a question is answered here (on a terminal) or denied
(headless, as a local run denies it), and every refusal is a clear error.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fakeapi import FakeOpenAI, Reply
from infai.shells.cli import main
from prefix_proxy import PrefixProxy
from serveproc import SERVE, Serve

TOKEN = "remote-test-token-0123456789abcdef"


@dataclass
class Server:
    url: str
    home: Path
    work: Path
    config: Path


def _write_call(path: str) -> dict[str, object]:
    call = {"id": "w1", "name": "write_file", "arguments": {"path": path, "content": "hi\n"}}
    return {"content": "", "tool_calls": [call]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module (each test uses sessions of its own): a scripted
    model, and ``slow`` from a fake OpenAI server that streams slowly."""
    tmp = tmp_path_factory.mktemp("remote")
    home, work, config = tmp / "home", tmp / "work", tmp / "cfg" / "config.toml"
    work.mkdir()
    config.parent.mkdir()
    script = tmp / "script.json"
    script.write_text(json.dumps(["hello from the server"] * 20))
    # a word each half second: the Ctrl-C tests' cancel has seconds to arrive before
    # the end, however loaded the machine (a cancelled stream stops at once)
    words = Reply(text="one two three four five six", pieces=6, pause=0.5)
    with FakeOpenAI([words] * 4) as slow:
        config.write_text(
            f'[models.slow]\nprovider = "openai"\nmodel = "m"\nbase_url = "{slow.base_url}"\n'
        )
        model = f"scripted:{script}"
        with Serve(home, work, TOKEN, "--model", model, config=config) as url:
            yield Server(url, home, work, config)


@pytest.fixture(autouse=True)
def here(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's environment: the server's config dir (where login keeps
    tokens), no token variable, the server's directory (``session ls`` marks it)."""
    monkeypatch.setenv("INFAI_CONFIG", str(server.config))
    monkeypatch.delenv("INFAI_SERVER_TOKEN", raising=False)
    monkeypatch.chdir(server.work)


def scripted(tmp_path: Path, *replies: object) -> str:
    """A model name for a session of its own (the server builds it for that session)."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


def infai(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def remote(s: Server, *args: str, code: int = 0) -> Result:
    return infai("--remote", s.url, "--token", TOKEN, *args, code=code)


def test_the_remote_forms_print_what_the_local_commands_print(server: Server) -> None:
    ran = remote(server, "run", "hi there")
    assert ran.stdout == "hello from the server\n"
    sid = ran.stderr.strip().splitlines()[-1].removeprefix("session ")
    local = ("--home", str(server.home))
    for command in (
        ("session", "ls"),
        ("session", "ls", "--json"),
        ("session", "log", sid),
        ("session", "log", sid, "--all", "--json"),
        ("session", "tree", sid),
        ("session", "tree", sid, "--json"),
    ):
        assert remote(server, *command).stdout == infai(*local, *command).stdout, command
    first = json.loads(infai(*local, "session", "log", sid, "--json").stdout)[0]["id"]
    for show in (("session", "show", sid, first), ("session", "show", sid, first, "--json")):
        assert remote(server, *show).stdout == infai(*local, *show).stdout


def _usage_and_options(help_text: str) -> list[str]:
    """The usage line and each option with its metavar, as ``--help`` lists them."""
    return [help_text.splitlines()[0], *re.findall(r"^  (-\S+(?: \S+)?)", help_text, re.M)]


def test_remote_search_takes_the_options_of_the_local_one(server: Server) -> None:
    """One list of options for both (a shared decorator): they cannot drift apart."""
    mine = _usage_and_options(remote(server, "search", "--help").stdout)
    assert mine == _usage_and_options(infai("search", "--help").stdout)
    assert mine[0].endswith(" search [OPTIONS] [QUERY]")
    flags = [option.split()[0] for option in mine[1:]]
    assert flags == ["--session", "--dir", "--kind", "--limit", "--rebuild", "--json", "--help"]


def test_run_json_is_the_agents_json_form(server: Server, tmp_path: Path) -> None:
    model = scripted(tmp_path, "hello from the server")
    out = remote(server, "run", "--model", model, "--json", "hi").stdout
    lines = [json.loads(x) for x in out.splitlines()]
    kinds = [x["type"] for x in lines]
    assert kinds[0] == "saved" and kinds[-1] == "end" and "stream" in kinds
    assert lines[-1]["outcome"] == "done"
    assert all(x["session"] == lines[0]["session"] for x in lines)
    saved = [x["event"] for x in lines if x["type"] == "saved" and x["event"]["kind"] == "message"]
    assert saved[0]["record"]["content"] == "hi"  # the prompt, stored first
    assert saved[-1]["record"]["content"] == "hello from the server"


def test_a_headless_remote_run_denies_what_asks(server: Server, tmp_path: Path) -> None:
    model = scripted(tmp_path, _write_call("denied.txt"), "written")
    out = remote(server, "run", "--model", model, "write it")
    assert not (server.work / "denied.txt").exists()
    assert "[write_file error]" in out.stderr and "nobody can approve here" in out.stderr
    assert out.stdout.endswith("written\n")


def test_a_question_is_answered_on_the_terminal(server: Server, tmp_path: Path) -> None:
    model = scripted(tmp_path, _write_call("made.txt"), "written")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*SERVE, "--remote", server.url, "--token", TOKEN, "run", "--model", model, "write it"],
        stdin=slave,
        stderr=slave,
        stdout=subprocess.PIPE,
        cwd=server.work,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 30
    while b"allow?" not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if ready:
            seen += os.read(master, 4096)
    assert b"write_file made.txt" in seen, seen
    os.write(master, b"y\n")
    out, _ = proc.communicate(timeout=30)
    os.close(master)
    assert proc.returncode == 0
    assert (server.work / "made.txt").read_text() == "hi\n"
    assert out.decode().endswith("written\n")


def test_refusals_are_clear_errors(server: Server) -> None:
    unknown = remote(server, "session", "log", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", code=2)
    assert "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b" in unknown.output
    refused = infai(
        "--remote", server.url, "--token", "wrong-token-xxxxxxxx", "session", "ls", code=2
    )
    assert "refused the token" in refused.output
    no_token = infai("--remote", server.url, "session", "ls", code=2)
    assert "infai login" in no_token.output
    assert "does not work with --remote" in remote(server, "doctor", code=2).output
    assert "needs a terminal" in remote(server, code=2).output  # the TUI, not a script's
    assert (
        "http:// or https://"
        in infai("--remote", "ftp://x", "--token", TOKEN, "session", "ls", code=2).output
    )
    down = infai("--remote", "http://127.0.0.1:9", "--token", TOKEN, "session", "ls", code=1)
    assert "cannot reach the server" in down.output


def test_dir_is_the_remote_tuis_as_attachs(server: Server, tmp_path: Path) -> None:
    """``infai --remote URL --dir DIR`` takes ``attach``'s checks (the screen itself:
    tests/shells/tui/test_tui_remote_tmux.py); elsewhere ``--dir`` is refused by name."""
    for words, said in (
        (("--dir", "proj"), "give an absolute directory of the server"),
        (("--dir", str(tmp_path), "--continue"), "not with SESSION or --continue"),
        (("--dir", str(tmp_path), "session", "ls"), "--dir before a command is for the TUI"),
    ):
        assert said in remote(server, *words, code=2).output
        if words[-1] != "ls":
            assert said in infai("attach", server.url, "--token", TOKEN, *words, code=2).output
    local = infai("--home", str(tmp_path / "h"), "--dir", str(tmp_path), code=2).output
    assert "--dir names a directory on the server: give it with --remote" in local


def test_login_keeps_the_token_for_the_url(server: Server) -> None:
    bad = infai("login", server.url, "--token", "wrong-token-xxxxxxxx", code=2)
    assert "refused the token" in bad.output
    tokens = server.config.parent / "remotes.json"
    assert not tokens.exists()
    infai("login", server.url.removesuffix("/v1"), "--token", TOKEN)
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    assert TOKEN in tokens.read_text()
    listed = infai("--remote", server.url, "session", "ls")  # no --token: the kept one
    assert listed.stdout.startswith("no sessions") or "SESSION" in listed.stdout
    infai("logout", server.url)
    assert TOKEN not in tokens.read_text()
    infai("--remote", server.url, "session", "ls", code=2)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_ctrl_c_cancels_the_turn_on_the_server(server: Server, inherited: str) -> None:
    """Also when started with SIGINT ignored, as a shell starts a background job (and
    as a test run started that way starts it): Python then installs no handler of
    its own, and the remote run used to stream on to the end, exit 0."""
    proc = subprocess.Popen(
        [*SERVE, "--remote", server.url, "--token", TOKEN, "run", "--model", "slow", "go"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=server.work,
        preexec_fn=_ignore_sigint if inherited == "ignored" else None,
    )
    assert proc.stdout is not None
    assert proc.stdout.read(3) == b"one"  # the turn runs, its text streams here
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 130, err
    sid = err.decode().split("session ")[-1].strip(" )\n")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the server records the cancel once stopped
        log = infai("--home", str(server.home), "session", "log", sid).stdout
        if "interrupted" in log:
            break
        time.sleep(0.2)
    assert "interrupted" in log
    assert "six" not in log  # it did not run to its end


def test_behind_a_proxy_with_a_path_prefix(server: Server, tmp_path: Path) -> None:
    """A TLS proxy in front of the server serves it under ``/infai``: the client
    adds ``/v1`` after the prefix, and the stream arrives through it."""
    with PrefixProxy(server.url.removesuffix("/v1"), "/infai") as proxy:
        model = scripted(tmp_path, "through the proxy")
        ran = infai("--remote", proxy.url, "--token", TOKEN, "run", "--model", model, "hi")
        assert ran.stdout == "through the proxy\n"
        sid = ran.stderr.strip().splitlines()[-1].removeprefix("session ")
        logged = infai("--remote", proxy.url + "/", "--token", TOKEN, "session", "log", sid)
        assert "through the proxy" in logged.stdout
        local = ("--home", str(server.home))
        for command in (  # a streamed body, and a query, through the prefix
            ("session", "export", sid),
            ("search", "through proxy", "--session", sid),
        ):
            mine = infai("--remote", proxy.url, "--token", TOKEN, *command).stdout
            assert sid in mine and mine == infai(*local, *command).stdout, command


class _CutOff(BaseHTTPRequestHandler):
    """A server whose export breaks off after its first line (a dropped connection)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        return

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sid = self.path.split("/")[-2].encode()  # a header as the server's: the session's
        line = b'{"infai_export": 1, "session": {"id": "%s"}}\n' % sid
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()  # and no last chunk: the body ends early
        self.close_connection = True


def test_an_export_cut_off_leaves_no_file(server: Server, tmp_path: Path) -> None:
    cut = ThreadingHTTPServer(("127.0.0.1", 0), _CutOff)
    threading.Thread(target=cut.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{cut.server_address[1]}"
        out = tmp_path / "out.jsonl"
        out.write_text("what was there\n")
        sid = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
        args = ("--remote", url, "--token", TOKEN, "session", "export", sid)
        failed = infai(*args, "-o", str(out), code=1)
        assert "broke off" in failed.output
        assert out.read_text() == "what was there\n"  # all or nothing: left as it was
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no .tmp left
        assert "broke off" in infai(*args, code=1).output
    finally:
        cut.shutdown()
        cut.server_close()


def _project(server: Server, tmp_path: Path, *replies: object) -> tuple[str, Path]:
    """A session of its own, working in a directory of its own (made in the store the
    server serves), with two turns: ``a.txt`` changes and ``b.txt`` appears between."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("one\n")
    model = scripted(tmp_path, "first answer", "second answer", *replies)
    local = ("--home", str(server.home))
    sid = infai(*local, "session", "new", "--working-dir", str(proj), "--model", model).stdout
    sid = sid.strip()
    remote(server, "run", "--session", sid, "the first prompt")
    (proj / "a.txt").write_text("two\n")
    (proj / "b.txt").write_text("new\n")
    remote(server, "run", "--session", sid, "the second prompt")
    return sid, proj


def _snapshots(server: Server, sid: str) -> list[str]:
    log = infai("--home", str(server.home), "session", "log", sid, "--json").stdout
    return [e["id"] for e in json.loads(log) if e["kind"] == "snapshot"]


def test_files_diff_checkout_and_export_print_what_the_local_ones_print(
    server: Server, tmp_path: Path
) -> None:
    sid, proj = _project(server, tmp_path)
    first, second = _snapshots(server, sid)[:2]
    local = ("--home", str(server.home))
    for command in (
        ("session", "files", sid),
        ("session", "files", sid, first, "--json"),
        ("session", "diff", sid, first, second),
        ("session", "diff", sid, first, "--json"),
        ("session", "diff", sid, second),
        ("session", "checkout", sid, first, "--dry-run"),
        ("session", "checkout", sid, first, "--dry-run", "--json"),
        ("session", "export", sid),
        ("session", "context", sid),
        ("session", "context", sid, "--at", first, "--json"),
        ("search", "second prompt"),
        ("search", "prompt", "--session", sid, "--kind", "message", "--json"),
    ):
        mine, theirs = remote(server, *command), infai(*local, *command)
        assert (mine.stdout, mine.stderr) == (theirs.stdout, theirs.stderr), command
    assert "+two" in remote(server, "session", "diff", sid, first, second).stdout
    out = tmp_path / "out.jsonl"  # written here, on the client's machine
    exported = remote(server, "session", "export", sid, "-o", str(out))
    whole = infai(*local, "session", "export", sid).stdout_bytes
    assert out.read_bytes() == whole
    events = len(whole.splitlines()) - 1
    assert exported.stderr == f"exported {events} events to {out}\n"
    # a.txt and b.txt changed between turns, not by the agent: the restore asks first
    refused = remote(server, "session", "checkout", sid, first, code=2)
    assert refused.output == infai(*local, "session", "checkout", sid, first, code=2).output
    assert "b.txt" in refused.output and (proj / "b.txt").exists()  # nothing changed
    restored = remote(server, "session", "checkout", sid, first, "--force")  # the server's disk
    assert restored.stdout.startswith("restored 2 files: ")
    assert (proj / "a.txt").read_text() == "one\n" and not (proj / "b.txt").exists()


def test_compact_on_the_server(server: Server, tmp_path: Path) -> None:
    sid, _ = _project(server, tmp_path, *["the summary of it all"] * 2)  # asked twice: plain
    shown = remote(server, "compact", sid, "--json").stdout
    event = json.loads(shown)
    assert event["kind"] == "compaction" and "the summary of it all" in shown
    local = infai("--home", str(server.home), "session", "show", sid, event["id"], "--json")
    assert shown == local.stdout


def test_bad_input_to_the_new_forms_is_one_clear_line(server: Server, tmp_path: Path) -> None:
    sid, _ = _project(server, tmp_path)
    missing = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    for command in (
        ("session", "files", missing),
        ("session", "export", missing),
        ("session", "diff", sid, missing),
        ("session", "checkout", sid, missing),
        ("compact", missing),
    ):
        out = remote(server, *command, code=2).output
        assert missing in out and out.count("\n") == 1, (command, out)
        assert out == infai("--home", str(server.home), *command, code=2).output  # as locally
    refusals: list[tuple[tuple[str, ...], str]] = [
        (("session", "rm", sid), "`infai session rm` does not work with --remote"),
        (("search", "--rebuild"), "`infai search --rebuild` does not work with --remote"),
        (("session", "context", sid, "--explain"), "`infai session context --explain` does"),
        (("session", "share", sid), "`infai session share` does not work with --remote"),
        (("models",), "`infai models` does not work with --remote"),
    ]
    for words, named in refusals:
        assert named in remote(server, *words, code=2).output
    assert "No such command 'lss'" in remote(server, "session", "lss", code=2).output
    assert infai("--home", str(server.home), "session", "log", sid).exit_code == 0  # not removed

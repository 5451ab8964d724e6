"""``infai --remote URL`` as a hostile server and a careless user meet it.

- An id given where a SESSION or EVENT goes is checked here as the local
  command checks it, in its words, before it becomes part of a URL: ``../``
  would otherwise send the request, and its token, outside the API (to another
  application behind the same proxy); no request is made for it.
- ``session export -o FILE`` keeps FILE as it was unless the whole answer is an
  export of that session: a page that is not one, another session's export, a
  line cut off or out of order is a one-line error, and no line of it reaches
  stdout either. It writes nothing but FILE (a ``FILE.tmp`` that is a link to
  another file is not followed).
- Over a session with odd content (escape sequences, bidi overrides, a bell, a
  NUL, right-to-left text, a long line, a blob, file names with an escape or a
  newline), each remote form prints byte for byte what the local one prints,
  errors included, and nothing of it is a live control sequence.
- ``search --limit`` above what the server sends (200) shows the best 200 and
  says so, where it used to fail.
- A redirect (a proxy sending HTTP to HTTPS) or an empty answer is a one-line
  error, not a traceback.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main
from infai.store import MessageRecord, Store
from serveproc import Serve

TOKEN = "remote-test-token-0123456789abcdef"
SID = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
ODD = (
    "\x1b[31mred\x1b[0m \x1b]0;title\x07 \u202eevil\u202c \u05e9\u05dc\u05d5\u05dd \x00nul \r back"
)


def infai(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, (args, result.output, result.exception)
    return result


# -- a fake server -------------------------------------------------------------------


class _Fake(BaseHTTPRequestHandler):
    """Answers every GET with the server's ``body`` (200, JSON lines), and records
    the paths it was asked for."""

    protocol_version = "HTTP/1.1"
    server: _FakeServer

    def log_message(self, *args: object) -> None:
        return

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        body = self.server.body
        self.send_response(self.server.status)
        for name, value in self.server.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", self.server.media)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET


class _FakeServer(ThreadingHTTPServer):
    daemon_threads = True
    body = b""
    media = "application/x-ndjson"
    status = 200

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Fake)
        self.paths: list[str] = []
        self.headers: dict[str, str] = {}


@pytest.fixture
def fake() -> Iterator[_FakeServer]:
    server = _FakeServer()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _url(server: _FakeServer, prefix: str = "") -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{prefix}"


def _line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def _export(sid: str = SID) -> bytes:
    """A small export of ``sid`` as the server writes one: header, two events."""
    header = {"infai_export": 1, "session": {"id": sid}}
    one = {"id": "0190a1b2-0000-7000-8000-000000000001", "parent_id": NIL, "kind": "message"}
    two = {"id": "0190a1b2-0000-7000-8000-000000000002", "parent_id": one["id"], "kind": "message"}
    return _line(header) + _line(one) + _line(two)


NIL = "00000000-0000-0000-0000-000000000000"


# -- ids ------------------------------------------------------------------------------


def test_an_id_that_would_leave_the_api_is_refused_before_any_request(
    fake: _FakeServer,
) -> None:
    """Behind a proxy at ``/infai``, ``session export ../../../admin/x`` used to
    ask ``/admin/x/export`` with the token; now it is bad input, as locally."""
    url = _url(fake, "/infai")
    fake.body = _export()
    for bad in ("../../../admin/x", "a?b=1", "x#y", "not-a-uuid"):
        command: tuple[str, ...]
        for command in (
            ("session", "export", bad),
            ("session", "files", bad),
            ("session", "log", bad),
            ("session", "context", bad),
            ("compact", bad),
            ("search", "word", "--session", bad),
            ("run", "--session", bad, "hi"),
        ):
            out = infai("--remote", url, "--token", TOKEN, *command, code=2).output
            assert out == f"Error: session id {bad!r} is not a UUID\n", (command, out)
        for command in (
            ("session", "show", SID, bad),
            ("session", "files", SID, bad),
            ("session", "diff", SID, bad),
            ("session", "diff", SID, SID, bad),
            ("session", "checkout", SID, bad),
            ("session", "context", SID, "--at", bad),
        ):
            out = infai("--remote", url, "--token", TOKEN, *command, code=2).output
            assert out == f"Error: event id {bad!r} is not a UUID\n", (command, out)
    assert fake.paths == []  # not one request was made


def test_the_client_keeps_every_request_under_the_api() -> None:
    """Whatever builds the path (an event id a hostile server sent, say), the
    client sends no request outside the API's URL."""
    import httpx2 as httpx

    from infai.shells.remote import Remote, RemoteError

    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, json={})

    with Remote("http://box/infai", TOKEN, transport=httpx.MockTransport(answer)) as client:
        for path in ("/sessions/../../admin", "/sessions/./x", "/sessions/a?b", "/x/%2e%2e"):
            with pytest.raises(RemoteError, match="is not a path of the API") as refused:
                client.get(path)
            assert refused.value.bad_input
            with pytest.raises(RemoteError):
                list(client.lines(path))
        assert asked == []
        client.get("/sessions")
    assert asked == ["http://box/infai/v1/sessions"]


def test_a_redirect_or_an_empty_answer_is_one_line_not_a_traceback(fake: _FakeServer) -> None:
    """A proxy that sends plain HTTP to HTTPS (301, no body) used to end every
    command in a TypeError; the redirect is not followed (the token is for the
    URL given) but named."""
    fake.status, fake.headers = 301, {"Location": "https://box.example/infai/v1/sessions"}
    commands: list[tuple[str, ...]] = [
        ("session", "ls"),
        ("session", "log", SID),
        ("session", "files", SID),
        ("session", "export", SID),
        ("search", "word"),
        ("compact", SID),
        ("run", "hi"),
    ]
    for command in commands:
        out = infai("--remote", _url(fake), "--token", TOKEN, *command, code=2).output
        assert out == (
            f"Error: {_url(fake)}/v1: the server redirects to "
            "https://box.example/infai/v1/sessions: give --remote the URL it names\n"
        ), command
    fake.status, fake.headers = 200, {}
    for command in commands[:3]:
        out = infai("--remote", _url(fake), "--token", TOKEN, *command, code=1).output
        assert out == f"Error: {_url(fake)}/v1: the answer is not JSON (is this infai serve?)\n"


# -- export -o FILE ------------------------------------------------------------------

NOT_EXPORTS = {
    "a web page": b"<!doctype html><title>login</title>\n",
    "empty": b"",
    "JSON, not lines of it": b'{"sessions": []}',
    "another session's export": _export("0190a1b2-c3d4-7e5f-8a9b-000000000000"),
    "a line cut off": _export()[:-5],
    "a line that is not JSON": _export() + b"garbage\n",
    "an event before its parent": _line({"infai_export": 1, "session": {"id": SID}})
    + _export().splitlines(keepends=True)[2],
    "an object in version 1": _export() + _line({"object": "sha256:00", "data": ""}),
    "a header of no version": _line({"infai_export": "1", "session": {"id": SID}}),
}


@pytest.mark.parametrize("what", sorted(NOT_EXPORTS))
def test_an_answer_that_is_not_the_export_leaves_file_as_it_was(
    fake: _FakeServer, tmp_path: Path, what: str
) -> None:
    fake.body = NOT_EXPORTS[what]
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"what was there\n")
    args = ("--remote", _url(fake), "--token", TOKEN, "session", "export", SID)
    failed = infai(*args, "-o", str(out), code=1)
    assert "the export is not one" in failed.output and failed.output.count("\n") == 1, what
    assert out.read_bytes() == b"what was there\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temporary left
    shown = infai(*args, code=1)  # to stdout: no line that is not the export's
    assert fake.body.startswith(shown.stdout_bytes)
    assert b"garbage" not in shown.stdout_bytes and b"<!doctype" not in shown.stdout_bytes


def test_the_export_writes_nothing_but_file(fake: _FakeServer, tmp_path: Path) -> None:
    """A ``FILE.tmp`` (the old temporary name) that is a link to another file, and
    one that is the user's own file, are left alone: only FILE is written."""
    fake.body = _export()
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours\n")
    (tmp_path / "a.jsonl.tmp").symlink_to(victim)
    (tmp_path / "b.jsonl.tmp").write_text("mine\n")
    for name in ("a.jsonl", "b.jsonl"):
        out = tmp_path / name
        done = infai(
            "--remote", _url(fake), "--token", TOKEN, "session", "export", SID, "-o", str(out)
        )
        assert done.stderr == f"exported 2 events to {out}\n"
        assert out.read_bytes() == _export()
    assert victim.read_text() == "not yours\n"
    assert (tmp_path / "a.jsonl.tmp").is_symlink()
    assert (tmp_path / "b.jsonl.tmp").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.jsonl", "a.jsonl.tmp", "b.jsonl", "b.jsonl.tmp", "victim.txt",
    ]  # fmt: skip


# -- the same output as the local commands --------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """``infai serve`` over a home of its own; the URL, the home, a scratch dir."""
    tmp = tmp_path_factory.mktemp("odd")
    home, work = tmp / "home", tmp / "work"
    work.mkdir()
    config = tmp / "none.toml"
    with Serve(home, work, TOKEN, "--model", "offline", config=config) as url:
        yield url, home, tmp


def _odd_session(url: str, home: Path, tmp: Path) -> tuple[str, list[str]]:
    """A session whose text and files hold everything a terminal could take as a
    command, with two snapshots; its id and its snapshots' ids."""
    proj = tmp / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("one\n")
    (proj / f"odd {ODD[:12]}.txt").write_text(ODD + "\n")
    (proj / "new\nline.txt").write_text("x\n")
    script = tmp / "odd.json"
    script.write_text(json.dumps([ODD + " " + "L" * 5000, "y" * 40_000]))  # a long line; a blob
    local = ("--home", str(home))
    model = f"scripted:{script}"
    sid = infai(*local, "session", "new", "--working-dir", str(proj), "--model", model).stdout
    sid = sid.strip()
    remote = ("--remote", url, "--token", TOKEN)
    infai(*remote, "run", "--session", sid, "first " + ODD)
    (proj / "a.txt").write_text("two " + ODD + "\n")
    infai(*remote, "run", "--session", sid, "second")
    log = json.loads(infai(*local, "session", "log", sid, "--json").stdout)
    return sid, [e["id"] for e in log if e["kind"] == "snapshot"]


def test_odd_content_prints_as_locally_and_inert(served: tuple[str, Path, Path]) -> None:
    url, home, tmp = served
    sid, (first, last) = _odd_session(url, home, tmp)
    bad = "Not-A-UUID"
    for command in (
        ("session", "files", sid),
        ("session", "files", sid, first, "--json"),
        ("session", "diff", sid, first),
        ("session", "diff", sid, first, last, "--json"),
        ("session", "checkout", sid, first, "--dry-run"),
        ("session", "checkout", sid, first, "--dry-run", "--json"),
        ("session", "checkout", sid, first),  # refused: files changed outside the agent
        ("session", "export", sid),
        ("session", "context", sid),
        ("session", "context", sid, "--at", first, "--json"),
        ("search", "red"),
        ("search", "evil", "--json"),
        ("search", ""),
        ("search", "word", "--session", bad),
        ("session", "files", sid, bad),
        ("session", "diff", sid, first, bad),
        ("session", "checkout", sid, bad),
        ("session", "context", sid, "--at", bad),
        ("session", "show", sid, bad),
        ("session", "export", bad),
        ("compact", bad),
    ):
        mine = CliRunner().invoke(main, ["--remote", url, "--token", TOKEN, *command])
        theirs = CliRunner().invoke(main, ["--home", str(home), *command])
        assert (mine.exit_code, mine.stdout_bytes, mine.stderr_bytes) == (
            theirs.exit_code, theirs.stdout_bytes, theirs.stderr_bytes,
        ), command  # fmt: skip
        for text in (mine.stdout, mine.stderr):
            assert not set(text) & {"\x1b", "\x07", "\x00", "\r", "\u202e"}, command


def test_a_limit_above_the_servers_shows_its_best_and_says_so(
    served: tuple[str, Path, Path],
) -> None:
    url, home, _ = served
    store = Store(home)
    sid = store.create_session(name="many").id
    with store.open_writer(sid) as writer:
        for i in range(205):
            writer.append(MessageRecord(content=f"needle number {i}"), "user")
    store.close()
    args = ("search", "needle", "--session", sid, "--json", "--limit")
    mine = infai("--remote", url, "--token", TOKEN, *args, "500")
    assert len(json.loads(mine.stdout)["hits"]) == 200
    assert mine.stderr == "infai: the server sends at most 200 hits: the best 200 are shown\n"
    best = json.loads(infai("--home", str(home), *args, "200").stdout)
    assert json.loads(mine.stdout) == best  # the local command's best 200
    fewer = infai("--remote", url, "--token", TOKEN, *args, "205")
    assert len(json.loads(fewer.stdout)["hits"]) == 200
    small = infai("--remote", url, "--token", TOKEN, "search", "number 7", "--limit", "300")
    assert small.stderr == ""  # fewer hits than the server's most: nothing to say


def test_a_turn_faster_than_the_client_prints_its_whole_answer(
    served: tuple[str, Path, Path], tmp_path: Path
) -> None:
    """A model that writes faster than the client reads (here 40,000 pieces at
    once) leaves it more than the server's 10,000 frames behind: the server
    drops it (``lagged``) and the turn goes on. The client used to stop there
    (the answer cut, exit 1, "the stream ended before the turn did"); it now
    watches the session again and prints the rest from the settled answer."""
    url = served[0]
    answer = "fast words " * 30_000
    script = tmp_path / "fast.json"
    script.write_text(json.dumps([answer, answer]))
    remote = ("--remote", url, "--token", TOKEN, "run", "--model", f"scripted:{script}")
    ran = infai(*remote, "go")
    assert ran.stdout == answer + "\n"
    assert ran.stderr.startswith("session ")
    lines = [json.loads(x) for x in infai(*remote, "--json", "again").stdout.splitlines()]
    assert lines[-1]["type"] == "end" and lines[-1]["outcome"] == "done"
    said = [x for x in lines if x["type"] == "saved" and x["event"]["role"] == "assistant"]
    assert said and said[-1]["event"]["digest"]  # the answer, a blob, is there

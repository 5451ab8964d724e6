"""``infai serve``'s token kept out of the process list (issue 28).

``--token T`` on the command line is in ``/proc/PID/cmdline``, which every
local user can read: ``--token-file PATH`` (or ``-``, standard input) and
``$INFAI_SERVER_TOKEN`` give it without that, and ``--token`` draws a warning.
Judged for real: a server started with ``--token-file`` answers the token while
its command line holds no trace of it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main, serve

TOKEN = "a-server-token-of-forty-characters-000"
LAUNCH = "import sys\nfrom infai.shells import cli\ncli.main(sys.argv[1:], prog_name='infai')\n"


class Served(Exception):
    """Raised by the stand-in for the app: serve got as far as building it."""


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Stop ``serve`` where it builds its app, keeping the token it was handed."""
    seen: list[str] = []

    def build_app(store: object, space: object, secret: str, *args: object) -> None:
        seen.append(secret)
        raise Served

    monkeypatch.setattr(serve, "build_app", build_app)
    monkeypatch.chdir(tmp_path)
    return seen


def run(tmp_path: Path, *args: str, stdin: str | None = None) -> Result:
    home = str(tmp_path / "home")
    return CliRunner().invoke(
        main, ["--home", home, "serve", *args], input=stdin, env={"INFAI_SERVER_TOKEN": None}
    )


def test_a_token_on_the_command_line_draws_a_warning(tmp_path: Path, secrets: list[str]) -> None:
    done = run(tmp_path, "--token", TOKEN)
    assert isinstance(done.exception, Served) and secrets == [TOKEN]
    assert "--token puts the token in the process list" in done.stderr
    assert "--token-file" in done.stderr
    quiet = CliRunner().invoke(
        main, ["--home", str(tmp_path / "home"), "serve"], env={"INFAI_SERVER_TOKEN": TOKEN}
    )
    assert isinstance(quiet.exception, Served) and secrets[-1] == TOKEN
    assert "process list" not in quiet.stderr  # the variable is not in the process list


def test_the_token_from_a_file_or_standard_input(tmp_path: Path, secrets: list[str]) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    done = run(tmp_path, "--token-file", str(path))
    assert isinstance(done.exception, Served) and secrets == [TOKEN], done.output
    assert "warning" not in done.stderr
    done = run(tmp_path, "--token-file", "-", stdin=TOKEN + "\n")
    assert isinstance(done.exception, Served) and secrets[-1] == TOKEN, done.output


def test_a_bad_token_file_is_refused_naming_it(tmp_path: Path, secrets: list[str]) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN)
    path.chmod(0o644)
    for args, said in [
        (("--token-file", str(path)), f"--token-file {path}: readable by others (mode 644)"),
        (("--token-file", str(tmp_path / "nope")), f"--token-file {tmp_path / 'nope'}: cannot"),
        (("--token", TOKEN, "--token-file", str(path)), "by --token or by --token-file, not both"),
    ]:
        done = run(tmp_path, *args)
        assert done.exit_code == 2 and said in done.output, done.output
    path.chmod(0o600)
    path.write_text("short")
    done = run(tmp_path, "--token-file", str(path))
    assert done.exit_code == 2 and "at least 16" in done.output
    assert secrets == []


def test_a_server_given_a_token_file_keeps_it_out_of_its_command_line(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if k != "INFAI_SERVER_TOKEN"}
    argv = [sys.executable, "-c", LAUNCH, "--home", str(home), "serve", "--port", "0"]
    proc = subprocess.Popen(
        [*argv, "--token-file", str(path)], stderr=subprocess.PIPE, text=True, env=env, cwd=work
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("infai: serving http://127.0.0.1:"), line
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert TOKEN.encode() not in cmdline and b"--token-file" in cmdline
        url = line.split()[2].removesuffix("/v1")
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/v1/sessions").status_code == 401
            auth = {"Authorization": f"Bearer {TOKEN}"}
            assert client.get("/v1/sessions", headers=auth).status_code == 200
        assert not (home / "server-token").exists()  # the given token, no file made
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()  # type: ignore[union-attr]

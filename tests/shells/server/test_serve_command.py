"""``infai serve``: the command that starts the server, seen from outside.

These tests drive the command (its checks, a real process serving until
interrupted, its lazy imports); they belong with the command wherever the CLI
keeps it, and import its module by name.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from infai.shells import server_cli
from infai.shells.cli import main
from infai.shells.server_cli import is_loopback

# -- infai serve -----------------------------------------------------------------


@pytest.fixture
def cli() -> Iterator[None]:
    server_cli.register(main)
    yield


def test_serve_refuses_a_non_loopback_address_unless_told(cli: None, tmp_path: Path) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    home = str(tmp_path / "home")
    refused = CliRunner().invoke(main, ["--home", home, "serve", "--host", "0.0.0.0"])
    assert refused.exit_code == 2 and "not a loopback address" in refused.output
    bad = CliRunner().invoke(main, ["--home", home, "serve", "--allow", " "])
    assert bad.exit_code == 2 and "empty allow rule" in bad.output
    short = CliRunner().invoke(main, ["--home", home, "serve"], env={"INFAI_SERVER_TOKEN": "x"})
    assert short.exit_code == 2 and "at least 16" in short.output


LAUNCH = (
    "import sys\n"
    "from infai.shells import cli, server_cli\n"
    "server_cli.register(cli.main)\n"
    "cli.main(sys.argv[1:], prog_name='infai')\n"
)


def test_infai_serve_runs_until_interrupted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "INFAI_SERVER_TOKEN"}
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, "--home", str(home), "serve", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("infai: serving http://127.0.0.1:"), line
        url = line.split()[2].removesuffix("/v1")
        token_file = home / "server-token"
        assert str(token_file) in line
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/v1/health").status_code == 200
            assert client.get("/v1/sessions").status_code == 401
            auth = {"Authorization": f"Bearer {token}"}
            created = client.post("/v1/sessions", json={"name": "x"}, headers=auth)
            assert created.status_code == 201
            sid = created.json()["id"]
            turn = client.post(f"/v1/sessions/{sid}/prompt", json={"text": "hi"}, headers=auth)
            assert turn.status_code == 202
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        assert "infai: server stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_registering_serve_loads_no_server_module() -> None:
    code = (
        "import sys\n"
        "from infai.shells import cli, server_cli\n"
        "server_cli.register(cli.main)\n"
        "print([m for m in sys.modules if m == 'infai.shells.server'"
        " or m.startswith('infai.shells.server.') or m.split('.')[0] in "
        "('starlette', 'uvicorn', 'sse_starlette', 'httpx')])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

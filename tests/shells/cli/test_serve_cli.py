"""``infai serve``: loopback only unless told, the token's checks, a real run, a light import.

The store it serves is the command line's own: every root option (``--store``,
``--home``, ``--durability``, ``--lock-timeout``) reaches it, and ``--home``
holds the token even when sessions live in PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from infai.shells.cli import main, serve
from infai.shells.cli.serve import is_loopback
from infai.store import SessionStore, Store


def test_serve_refuses_a_non_loopback_address_unless_told(tmp_path: Path) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    home = str(tmp_path / "home")
    refused = CliRunner().invoke(main, ["--home", home, "serve", "--host", "0.0.0.0"])
    assert refused.exit_code == 2 and "not a loopback address" in refused.output
    bad = CliRunner().invoke(main, ["--home", home, "serve", "--allow", " "])
    assert bad.exit_code == 2 and "empty allow rule" in bad.output
    short = CliRunner().invoke(main, ["--home", home, "serve"], env={"INFAI_SERVER_TOKEN": "x"})
    assert short.exit_code == 2 and "at least 16" in short.output


LAUNCH = "import sys\nfrom infai.shells import cli\ncli.main(sys.argv[1:], prog_name='infai')\n"


def test_infai_serve_runs_until_interrupted(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "INFAI_SERVER_TOKEN"}
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, "--home", str(home), "serve", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=work,  # its sessions' files: a turn snapshots them (not the repository's)
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
        proc.stderr.close()  # type: ignore[union-attr]


def test_registering_serve_loads_no_server_module() -> None:
    code = (
        "import sys\n"
        "from infai.shells import cli\n"
        "print([m for m in sys.modules if m == 'infai.shells.server'"
        " or m.startswith('infai.shells.server.') or m.split('.')[0] in "
        "('starlette', 'uvicorn', 'sse_starlette', 'httpx')])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- the store serve is given ------------------------------------------------------


class Served(Exception):
    """Raised by the stand-in for the app: serve got as far as building it."""


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[SessionStore]:
    """Stop ``serve`` where it builds its app, keeping the store it was handed."""
    stores: list[SessionStore] = []

    def build_app(store: SessionStore, *args: object) -> None:
        stores.append(store)
        raise Served

    monkeypatch.setattr(serve, "build_app", build_app)
    monkeypatch.chdir(tmp_path)
    return stores


def test_serve_keeps_every_store_option_of_the_command_line(
    tmp_path: Path, served: list[SessionStore]
) -> None:
    home = tmp_path / "home"
    common = ["--home", str(home), "--durability", "strict"]
    for args, lock_timeout in [
        ([*common, "serve"], serve.SERVE_LOCK_TIMEOUT),
        ([*common, "--lock-timeout", "3", "serve"], 3.0),
        ([*common, "--lock-timeout", "3", "serve", "--lock-timeout", "0.5"], 0.5),
    ]:
        done = CliRunner().invoke(main, args, env={"INFAI_SERVER_TOKEN": None})
        assert isinstance(done.exception, Served), done.output
        store = served.pop()
        assert isinstance(store, Store) and store.home == home
        assert store.options.durability == "strict"
        assert store.options.lock_timeout == lock_timeout
    assert (home / "server-token").is_file()


def test_serve_on_postgresql_keeps_its_options_and_the_token_under_home(
    pg_url: str, tmp_path: Path, served: list[SessionStore]
) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "default-home"
    args = ["--store", pg_url, "--home", str(home), "--durability", "strict"]
    env = {"INFAI_HOME": str(elsewhere), "INFAI_SERVER_TOKEN": None}
    done = CliRunner().invoke(main, [*args, "serve", "--lock-timeout", "0.5"], env=env)
    assert isinstance(done.exception, Served), done.output
    (store,) = served
    assert store.home == home
    assert store.options.durability == "strict" and store.options.lock_timeout == 0.5
    assert (home / "server-token").is_file()
    assert not (elsewhere / "server-token").exists()


def test_serve_opens_every_session_through_the_command_lines_workspace(tmp_path: Path) -> None:
    """The app builds no machinery: sessions open through the harness ``serve`` made
    (its configuration's compaction threshold, its model), and stopping closes it."""
    import asyncio

    from infai.agent import Config, Harness
    from infai.llm import OfflineModel

    class Counted(Harness):
        closed = 0

        def build_model(self, name: str) -> OfflineModel:
            harness = self

            class Model(OfflineModel):
                async def aclose(self) -> None:
                    harness.closed += 1

            return Model()

    store = Store(tmp_path / "home")
    space = Counted(store, tmp_path, config=Config(compact_at=0.5))
    app = serve.build_app(store, space, "a-token-of-16-chars-or-more", 300.0, 0)
    sessions = app.state.sessions
    assert sessions.harness is space

    async def scenario() -> None:
        served = await sessions.serve(space.new_session())
        assert served.agent.compact_at == 0.5 and served.agent.model is space.model
        await sessions.aclose()

    asyncio.run(scenario())
    assert space.closed == 0  # a session closes only a model it owns
    from infai.shells.server import ServerThread

    with ServerThread(app):
        pass
    assert space.closed == 1  # the app owns the harness: its model goes when it stops

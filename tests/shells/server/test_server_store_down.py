"""A session store that cannot be reached answers 503, not 500, and the server recovers.

A lost database is neither the client's mistake (4xx) nor a bug (500): it is
a service that is unavailable for now, and the answer says so, naming what
failed, so a client knows to retry later. Once the store is back, the same
requests succeed without restarting the server.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_server_resources import Proxy, Served

from infai.store import Store
from infai.store.errors import BackendUnavailable


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


def requests(sid: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [
        ("GET", "/v1/sessions", None),
        ("POST", "/v1/sessions", {}),
        ("GET", f"/v1/sessions/{sid}", None),
        ("GET", f"/v1/sessions/{sid}/events", None),
        ("GET", f"/v1/sessions/{sid}/head", None),
        ("POST", f"/v1/sessions/{sid}/prompt", {"text": "hi"}),
        ("GET", f"/v1/sessions/{sid}/stream", None),
        ("DELETE", f"/v1/sessions/{sid}", None),
    ]


def all_unavailable(client: httpx.Client, sid: str) -> None:
    paths = client.get("/v1/openapi.json").json()["paths"]
    for method, path, body in requests(sid):
        route = path.replace(sid, "{session_id}").removeprefix("/v1")
        assert "503" in paths["/v1" + route][method.lower()]["responses"], (method, path)
        response = client.request(method, path, json=body)
        assert response.status_code == 503, (method, path, response.text)
        message = response.json()["error"]
        assert "unavailable" in message and "try again later" in message, message


def test_a_store_that_cannot_be_reached_answers_503(tmp_path: Path, work: Path) -> None:
    proxy = Proxy(Store(tmp_path / "home"))
    server = Served(proxy, work)
    try:
        sid = server.client.post("/v1/sessions", json={}).json()["id"]

        def down(name: str, args: tuple[Any, ...]) -> None:
            raise BackendUnavailable("postgresql://db/infai: connection refused")

        proxy.trap = down
        all_unavailable(server.client, sid)
        proxy.trap = lambda name, args: None  # back: the same server answers again
        assert server.client.get(f"/v1/sessions/{sid}").status_code == 200
        assert (
            server.client.post(f"/v1/sessions/{sid}/prompt", json={"text": "hi"}).status_code == 202
        )
    finally:
        server.close()


@pytest.mark.slow
def test_a_lost_database_answers_503_until_it_is_back(
    pg_cluster: str, pg_url: str, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database refuses connections mid-run (every connection cut, new ones
    refused): the server answers 503; allowed again, it answers as before."""
    import psycopg

    from infai.store.pg import PgStore, db

    name = pg_url.rsplit("/", 1)[1]
    # the store waits up to 30 s for a connection before it gives up: not in a test
    monkeypatch.setattr(db, "POOL_WAIT", 1)
    store = PgStore(pg_url)
    server = Served(store, work)

    def allow(yes: bool) -> None:
        with psycopg.connect(pg_cluster, autocommit=True) as admin:
            admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS {str(yes).lower()}")
            if not yes:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (name,),
                )

    try:
        sid = server.client.post("/v1/sessions", json={}).json()["id"]
        allow(False)
        all_unavailable(server.client, sid)
        allow(True)
        deadline = time.monotonic() + 30
        while server.client.get(f"/v1/sessions/{sid}").status_code != 200:
            assert time.monotonic() < deadline, "the server did not recover"
            time.sleep(0.2)
        turn = server.client.post(f"/v1/sessions/{sid}/prompt", json={"text": "hi"})
        assert turn.status_code == 202, turn.text
        assert server.client.get(f"/v1/sessions/{uuid.uuid4()}").status_code == 404
    finally:
        allow(True)
        server.close()
        store.close()

"""Test-wide guards: no real network, no user configuration, no real API keys.

Every test runs with the provider environment variables removed and
``INFAI_CONFIG`` pointing at a file of the test's own, so a developer's own
keys and config never change a result. That file says only ``[checkpoints]
enabled = false``: a turn's files snapshots add events to the timeline, which
tests of other things would have to step over; the tests of files on the
timeline point ``INFAI_CONFIG`` elsewhere (or build their ``Config`` directly).
Sockets may connect to loopback only: a test that would reach a real provider
fails loudly instead.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
    "INFAI_MODEL",
)


def _loopback(address: Any) -> bool:
    if isinstance(address, str):  # a unix socket path
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _isolated(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    config = tmp_path_factory.mktemp("no-config") / "config.toml"
    config.write_text("[checkpoints]\nenabled = false\n")
    monkeypatch.setenv("INFAI_CONFIG", str(config))
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address):
            raise ConnectionRefusedError(f"tests may not reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    yield


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[str]:
    """A throwaway PostgreSQL server for the whole run (see tests/support/pgserver.py)."""
    from pgserver import Cluster

    with Cluster() as url:
        yield url


@pytest.fixture
def pg_url(pg_cluster: str) -> Iterator[str]:
    """A fresh, empty database on the throwaway server, dropped afterwards."""
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_cluster, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = pg_cluster.rsplit("/", 1)[0] + f"/{name}"
    yield url
    with psycopg.connect(pg_cluster, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")

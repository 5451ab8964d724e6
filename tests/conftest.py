"""Test-wide guards: no real network, no user configuration, no real API keys.

Every test runs with the provider environment variables removed and
``INFAI_CONFIG`` pointing at an empty file of the test's own, so a developer's
own keys and config never change a result. Checkpoints are on, as for a user:
a turn's files snapshots are events on the timeline, and tests that count
events count them by kind (or expect the snapshot); in the TUI a snapshot is a
timeline row, a line in the chat and a step of ``HEAD #n of m``.

Git reads none of the developer's configuration either: a snapshot leaves out
what git's global excludes file ignores (``core.excludesFile``, by default
``$XDG_CONFIG_HOME/git/ignore``) and tests compare with ``git check-ignore``,
so ``GIT_CONFIG_GLOBAL`` names an empty file of the test's own,
``GIT_CONFIG_NOSYSTEM`` leaves out the system's, and ``XDG_CONFIG_HOME`` is an
empty directory (git's default excludes file is under it, whatever
``GIT_CONFIG_GLOBAL`` says). A test that commits names its own author.

Sockets may connect to loopback only: a test that would reach a real provider
fails loudly instead. ``ast.parse`` tries CPython 3.11's spurious "AST
constructor recursion depth mismatch" again (tests/support/astparse.py).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from astparse import guard_ast_parse

guard_ast_parse()  # CPython 3.11's spurious AST error under threads (see astparse)

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
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    mine = tmp_path_factory.mktemp("no-config")
    config = mine / "config.toml"
    config.write_text("")
    monkeypatch.setenv("INFAI_CONFIG", str(config))
    (mine / "gitconfig").write_text("")
    (mine / "xdg").mkdir()
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(mine / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(mine / "xdg"))
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

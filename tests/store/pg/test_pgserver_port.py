"""The tests' throwaway PostgreSQL cluster (tests/support/pgserver.py) starts even
when the port it probed is taken before the server binds it: by another test's
connection or another worker's server, seconds later (initdb runs in between).
It used to fail the whole run's PostgreSQL tests; now it picks another port."""

from __future__ import annotations

import socket

import psycopg
import pytest

import pgserver
from pgserver import Cluster


@pytest.mark.slow  # a cluster of its own
def test_a_port_taken_after_the_probe_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        picks = [taken, taken]  # the probe's answer, then the same again at start
        real = pgserver._free_port
        monkeypatch.setattr(pgserver, "_free_port", lambda: picks.pop(0) if picks else real())
        with Cluster() as url:
            assert f":{taken}/" not in url
            with psycopg.connect(url) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)

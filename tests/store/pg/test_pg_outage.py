"""A PostgreSQL server that goes away mid-use: one clear error within seconds, no log flood."""

from __future__ import annotations

import logging
import time

import pytest

from infai.store import BackendUnavailable, MessageRecord, PgStore
from pgserver import Cluster


@pytest.mark.slow  # a cluster of its own (it is stopped), and 1.5 s of listening after
def test_a_lost_server_is_one_clear_error_within_seconds(caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster()
    url = cluster.start()
    store = PgStore(url, pool_size=2)
    try:
        sid = store.create_session().id
        with store.open_writer(sid) as writer:
            writer.append(MessageRecord(content="before the outage"), "user")
        with caplog.at_level(logging.INFO, logger="psycopg"):
            cluster.stop()
            started = time.monotonic()
            with pytest.raises(BackendUnavailable, match=r"postgresql://127\.0\.0\.1:\d+/"):
                for _ in range(3):  # the pooled connection dies first; the pool then refills
                    store.list_sessions()
            assert time.monotonic() - started < 10
            time.sleep(1.5)  # the pool retries in the background meanwhile
        noise = [
            r
            for r in caplog.records
            if r.name.startswith("psycopg") and r.levelno >= logging.WARNING
        ]  # what a user would see on stderr
        assert noise == [], [r.getMessage() for r in noise]
    finally:
        store.close()

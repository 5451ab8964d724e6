"""The PostgreSQL connection layer: one pool per store, and what its errors mean.

Model, in prose: a :class:`Database` is a URL and a pool of autocommit
connections to it. Queries borrow a pooled connection for as long as they run
(:meth:`Database.conn`); the few things that must outlive a query (a turn lease,
a ``LISTEN``) take a direct connection of their own (:meth:`Database.connect`).
A server that cannot be reached, a pool with no free connection and a
connection lost mid-query become :class:`~infai.store.errors.BackendUnavailable`,
naming the server without its password; a writer that retries a lost commit
itself asks for the raw driver error instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import BackendUnavailable

#: seconds a query waits for a free pooled connection
POOL_WAIT = 30
#: seconds after which a query still waiting asks whether the server is there at all
PROBE_AFTER = 2
#: the pool's name, as its log records say it
POOL_NAME = "infai"


class _QuietPool(logging.Filter):
    """Drop our pool's own complaints while the server is away (it retries every
    few seconds, each a warning): infai says so once, as BackendUnavailable."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.WARNING or f"'{POOL_NAME}'" not in record.getMessage()


logging.getLogger("psycopg.pool").addFilter(_QuietPool())


class Database:
    """A PostgreSQL URL and its connection pool (opened by :meth:`open_pool`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pool: ConnectionPool[Any] | None = None

    def safe_url(self) -> str:
        """The URL without its password, for messages."""
        info = psycopg.conninfo.conninfo_to_dict(self.url)
        host, port, db = info.get("host", ""), info.get("port", ""), info.get("dbname", "")
        return f"postgresql://{host}{':' + str(port) if port else ''}/{db}"

    def open_pool(self, size: int) -> None:
        """Open the pool (up to ``size`` connections); one connection is made at once."""
        self.pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=size,
            open=True,
            check=ConnectionPool.check_connection,  # a dropped connection is replaced
            kwargs={"autocommit": True},
            name=POOL_NAME,
        )

    def connect(self, *, timeout: int = 5) -> psycopg.Connection[Any]:
        """A direct autocommit connection of its own (the caller closes it)."""
        try:
            return psycopg.connect(self.url, autocommit=True, connect_timeout=timeout)
        except psycopg.OperationalError as exc:
            raise BackendUnavailable(f"cannot reach {self.safe_url()}: {exc}") from None

    @contextmanager
    def conn(self, *, raw: bool = False) -> Iterator[Any]:
        """A pooled connection; a lost one is :class:`BackendUnavailable` unless ``raw``
        (the writer retries those itself). A server that went away is said within
        seconds, not after the whole :data:`POOL_WAIT`."""
        pool = self.pool
        if pool is None:
            raise BackendUnavailable(f"{self.safe_url()}: the store is not open")
        conn = self._borrow(pool)
        try:
            yield conn
        except psycopg.OperationalError as exc:
            if raw:
                raise
            raise BackendUnavailable(f"{self.safe_url()}: {exc}") from None
        finally:
            pool.putconn(conn)  # a broken one is discarded, not handed out again

    def _borrow(self, pool: ConnectionPool[Any]) -> Any:
        """A connection from the pool; if none comes at once, whether the server is
        reachable decides between failing now and waiting for a busy pool."""
        try:
            return pool.getconn(timeout=PROBE_AFTER)
        except PoolTimeout:
            pass
        self.connect(timeout=PROBE_AFTER).close()  # BackendUnavailable: it is away
        try:
            return pool.getconn(timeout=POOL_WAIT - PROBE_AFTER)
        except PoolTimeout as exc:
            raise BackendUnavailable(f"{self.safe_url()}: no connection: {exc}") from None

    def close(self) -> None:
        """Close the pool; direct connections (leases, watchers) are their owners' to close."""
        if self.pool is not None:
            self.pool.close()

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

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import BackendUnavailable

#: seconds a query waits for a free pooled connection
POOL_WAIT = 30


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
            name="infai",
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
        (the writer retries those itself)."""
        if self.pool is None:
            raise BackendUnavailable(f"{self.safe_url()}: the store is not open")
        try:
            with self.pool.connection(timeout=POOL_WAIT) as conn:
                yield conn
        except PoolTimeout as exc:
            raise BackendUnavailable(f"{self.safe_url()}: no connection: {exc}") from None
        except psycopg.OperationalError as exc:
            if raw:
                raise
            raise BackendUnavailable(f"{self.safe_url()}: {exc}") from None

    def close(self) -> None:
        """Close the pool; direct connections (leases, watchers) are their owners' to close."""
        if self.pool is not None:
            self.pool.close()

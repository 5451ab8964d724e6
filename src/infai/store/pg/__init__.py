"""The PostgreSQL backend: sessions in a database that several machines share.

:mod:`.backend` holds :class:`PgStore` (sessions, leases, the change feed),
:mod:`.session` a session's reader and compare-and-set writer, :mod:`.schema`
the numbered migrations, and :mod:`.db` the connection pool and what its errors
mean. This package imports nothing of :mod:`infai.store.file`: loading it never
loads the directory store's write, recovery or check paths.
"""

from .backend import Lease, PgStore
from .objects import PgObjects
from .schema import LATEST
from .session import CHANNEL, PgSessionReader, PgSessionWriter

__all__ = [
    "CHANNEL",
    "LATEST",
    "Lease",
    "PgObjects",
    "PgSessionReader",
    "PgSessionWriter",
    "PgStore",
]

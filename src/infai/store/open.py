"""Opening a store from a location: the one module that knows both backends.

Model, in prose: a location is either a PostgreSQL URL (``postgresql://`` or
``postgres://``), naming a database that several machines may share, or a
directory (``None``: the default home), holding one subdirectory per session.
Everything above this module sees only the :class:`~infai.store.contract.SessionStore`
contract; each backend is imported here, and only when it is the one asked for,
so a directory user never loads the database driver and the reverse.
"""

from __future__ import annotations

from pathlib import Path

from .contract import SessionStore
from .home import default_home
from .options import StoreOptions


def is_database_url(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a directory."""
    return location.startswith(("postgresql://", "postgres://"))


def open_store(
    location: str | Path | None = None,
    options: StoreOptions | None = None,
    *,
    home: str | Path | None = None,
) -> SessionStore:
    """The store at ``location``: a PostgreSQL URL, else a directory (None: the default).

    ``home`` is this machine's directory for local files (the server token): for
    a database it defaults to :func:`~infai.store.home.default_home`; a directory
    store's home is the directory itself, so there ``home`` is where it lives when
    ``location`` is not given.
    """
    if isinstance(location, str) and is_database_url(location):
        from .pg import PgStore

        return PgStore(location, options=options, home=home)
    from .file import Store

    where = location or home
    return Store(Path(where) if where else default_home(), options=options)

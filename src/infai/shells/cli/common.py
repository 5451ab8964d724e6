"""What every command shares: the one way to open the store, and small output helpers.

The root group reads the store options once (``--store``, ``--home``,
``--durability``, ``--lock-timeout``) into a :class:`StoreSpec`; a command that
needs the store gets it from :func:`store_of` (or the :func:`pass_store`
decorator), which opens it the first time it is asked, with those options, and
closes it when the command line ends. No command builds a store of its own, so
none can drop an option (``serve`` may only tighten the lock timeout, through
the same function). Commands that need no store (``models``, ``store copy``)
never open one, so a database that is down does not stop them.

``--home`` is where this machine's own files live (the server's token) even
when the sessions live in a database.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import wraps
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

from infai.store import SessionStore, Store, StoreOptions, default_home

from ..inert import inert, inert_json
from .errors import BadInput

F = TypeVar("F", bound=Callable[..., Any])

_OPENED = "infai.store"  # the root context's meta key for the opened store


@dataclass(frozen=True)
class StoreSpec:
    """The store the command line was asked for, not yet opened."""

    location: str | None = None
    home: Path | None = None
    durability: Literal["fast", "strict"] = "fast"
    lock_timeout: float | None = None  # None: the store's default

    def options(self) -> StoreOptions:
        """The store's tunables from the command line (the rest keep their defaults);
        a wait for another process's lock is said on stderr at once."""
        return StoreOptions(
            durability=self.durability, lock_timeout=self.lock_timeout, on_wait=_say_waiting
        )

    def open(self) -> SessionStore:
        """Open the store; a :class:`~infai.store.StoreError` says why it cannot be."""
        if not self.location:
            return Store(self.home or default_home(), options=self.options())
        from infai.store import open_store

        store: SessionStore = open_store(self.location, self.options())
        if self.home is not None and not isinstance(store, Store):
            # a database keeps this machine's files (the server token) in a home
            # of its own; --home names it. (open_store(..., home=) will take it.)
            store.home = self.home
        return store


def _say_waiting(message: str) -> None:
    echo(f"infai: {message}", err=True)


#: commands that only read or change sessions already there: a ``--store``
#: directory that does not exist is then a typo, not a store to create
_NEEDS_A_STORE = frozenset(
    {"ls", "log", "tree", "show", "context", "fsck", "rm", "export", "append", "salvage",
     "compact", "search"}
)  # fmt: skip


def _check_exists(spec: StoreSpec, command: str | None) -> None:
    """A mistyped ``--store`` directory is said, not taken for an empty store."""
    from infai.store import is_database_url

    where = spec.location
    if not where or is_database_url(where) or command not in _NEEDS_A_STORE:
        return
    if not Path(where).expanduser().exists():
        raise BadInput(
            f"--store {where}: no such directory (the commands that write, such as "
            "'infai session new', make a new store)"
        )


def store_of(ctx: click.Context, **changes: Any) -> SessionStore:
    """The command line's store, opened on first use with the root's options
    (``changes`` replace some of them; the first opener decides)."""
    root = ctx.find_root()
    opened: SessionStore | None = root.meta.get(_OPENED)
    if opened is None:
        spec = root.find_object(StoreSpec) or StoreSpec()
        _check_exists(spec, ctx.info_name)
        opened = replace(spec, **changes).open()
        root.meta[_OPENED] = opened
        root.call_on_close(opened.close)
    return opened


def pass_store(func: F) -> F:
    """Call the command with the store as its first argument."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(store_of(click.get_current_context()), *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def echo(text: object = "", *, err: bool = False, nl: bool = True) -> None:
    """Print ``text`` inert (:func:`infai.shells.inert.inert`): every line the
    command line prints goes through here, so no control sequence from a model,
    a tool or a session's metadata reaches the terminal."""
    click.echo(inert(str(text)), err=err, nl=nl)


def emit_json(value: object) -> None:
    """Print ``value`` as indented JSON (non-ASCII text kept; control and bidi
    characters escaped, :func:`infai.shells.inert.inert_json`)."""
    click.echo(inert_json(value, indent=2))


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def come_back_command(session_id: str, command: str = "chat") -> str:
    """The exact command line that reopens ``session_id`` (``command``: ``chat``, or
    ``""`` for the TUI), with the store options this command line was given.

    ``--home`` and ``--store`` are repeated when they were typed (an environment
    variable will still be set next time); a database URL is shown without its
    password, which psycopg then takes from ``PGPASSWORD`` or ``~/.pgpass``.
    """
    import shlex

    from click.core import ParameterSource

    words = ["infai"]
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    spec = root.find_object(StoreSpec) if root is not None else None
    if root is not None and spec is not None:
        typed = root.get_parameter_source
        if spec.home is not None and typed("home") == ParameterSource.COMMANDLINE:
            words += ["--home", str(spec.home)]
        if spec.location and typed("location") == ParameterSource.COMMANDLINE:
            words += ["--store", _without_password(spec.location)]
    words += [command, "--session", session_id] if command else ["--session", session_id]
    return shlex.join(words)


def _without_password(location: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(location)
    if parts.password is None:
        return location
    netloc = parts.netloc.replace(f":{parts.password}@", "@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def report_recovery(store: SessionStore, session_id: str) -> None:
    """Say on stderr what recovery did when a writer opened (never silent)."""
    for note in store.recovery_notes.get(session_id, []):
        echo(f"infai: recovered: {note}", err=True)


def report_unreadable(store: SessionStore) -> None:
    """Name, on stderr, the sessions that listing had to leave out."""
    for exc in store.unreadable:
        echo(f"infai: skipped unreadable session: {exc}", err=True)


__all__ = [
    "StoreSpec",
    "come_back_command",
    "echo",
    "emit_json",
    "json_option",
    "pass_store",
    "report_recovery",
    "report_unreadable",
    "store_of",
]

"""What the server answers for each error: the one table from the error tree to HTTP.

Every handler lets its errors rise; the route wrapper (:mod:`.app`) turns each
one into a JSON ``{"error": message}`` with the status this table gives, the
first entry the error is an instance of. An :class:`ApiError` carries its own
status (a check only the server makes: a body too large, a field that names
no directory). An exception outside the tree (``ValueError``, ``KeyError``…)
is a bug: it is not dressed up as bad input, it reaches Starlette, which
answers a bare 500 and logs it.

A lost database is not the client's fault and not a bug: it answers 503 with
what the store said, so a client knows to retry later rather than to fix its
request. Any other store failure (an fsync that failed, corrupted bytes), or
an error of the tree no entry above names, answers 500 with its message and is
logged with its traceback.
"""

from __future__ import annotations

from infai.agent import CompactionFailed, SlotConflict
from infai.errors import InfaiError
from infai.store import (
    BackendUnavailable,
    EventNotFound,
    HeadConflict,
    InvalidInput,
    SessionBusy,
    SessionExists,
    SessionNotFound,
    StoreError,
    UnsupportedFormat,
    WriterLocked,
)


class ApiError(InfaiError):
    """A request the server itself refuses, with the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Conflict(InfaiError):
    """The session cannot do this now (closing, or not openable): 409.

    The agent's own "busy" and "no such turn in flight" are
    :class:`~infai.agent.Busy` and :class:`~infai.agent.NotInFlight`
    (:class:`~infai.agent.SlotConflict`), also 409."""


#: error class -> HTTP status; the first match wins, so subclasses come first
STATUSES: tuple[tuple[type[BaseException], int], ...] = (
    (SessionNotFound, 404),
    (EventNotFound, 404),
    (InvalidInput, 400),
    (Conflict, 409),
    (SlotConflict, 409),
    (WriterLocked, 409),
    (SessionExists, 409),
    (UnsupportedFormat, 409),
    (HeadConflict, 409),
    (SessionBusy, 409),
    (CompactionFailed, 422),
    (BackendUnavailable, 503),
    (StoreError, 500),
    (InfaiError, 500),
)

#: statuses worth a traceback in the log: the server's or its store's fault
LOGGED = frozenset({500})


def status_of(exc: BaseException) -> int | None:
    """The HTTP status for an error a handler raised; None: not ours to answer (a bug)."""
    if isinstance(exc, ApiError):
        return exc.status
    for kind, status in STATUSES:
        if isinstance(exc, kind):
            return status
    return None


def message_of(exc: BaseException, status: int) -> str:
    """What the answer says: the error's own words, with what failed for 5xx answers."""
    text = exc.message if isinstance(exc, ApiError) else str(exc)
    if status == 503:
        return f"the session store is unavailable: {text}; try again later"
    if status == 500 and isinstance(exc, StoreError):
        return f"the store failed: {text}"
    return text


__all__ = ["LOGGED", "STATUSES", "ApiError", "Conflict", "message_of", "status_of"]

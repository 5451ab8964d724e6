"""``infai serve``'s HTTP API, with live output as Server-Sent Events.

The package's modules, from the outside in: :mod:`.run` (uvicorn: ``infai
serve``'s :func:`~.run.bind` and :func:`~.run.serve`, and a server on a thread
for tests), :mod:`.app` (:func:`create_app`: routes wired to handlers, requests
checked before they run), :mod:`.auth` (the bearer token), :mod:`.api` (every
route and its shapes, as data: the OpenAPI document), :mod:`.routes` (the
handlers), :mod:`.errors` (the one table from the error tree to HTTP statuses),
:mod:`.sessions` and :mod:`.served` (open sessions, their turns, questions and
watchers) and :mod:`.channel` (SSE frames). The server builds no machinery of
its own: every session's agent is opened by an :class:`infai.agent.Harness`.
"""

from __future__ import annotations

from .app import create_app
from .auth import TokenError, load_token
from .errors import ApiError, Conflict
from .run import ServerThread, bind, serve

__all__ = [
    "ApiError",
    "Conflict",
    "ServerThread",
    "TokenError",
    "bind",
    "create_app",
    "load_token",
    "serve",
]

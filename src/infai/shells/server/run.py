"""Running the server on uvicorn: for ``infai serve``, and on a thread for tests and embedding.

``infai serve`` binds its socket with :func:`bind` (so it can say where it
listens before serving), then calls :func:`serve`, which runs until Ctrl-C or
SIGTERM.

Shutting down first ends every event stream (uvicorn would otherwise wait for
them), then lets uvicorn drain the other requests, then the app's lifespan
cancels the turns in flight and releases every session's writer lock.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import suppress
from typing import Any

import uvicorn
from starlette.applications import Starlette

from .sessions import Sessions


class InfaiServer(uvicorn.Server):
    """uvicorn that ends the event streams first, so shutting down never waits on them."""

    def __init__(self, config: uvicorn.Config, sessions: Sessions) -> None:
        super().__init__(config)
        self.sessions = sessions

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.sessions.closing = True
        self.sessions.end_streams("server shutting down")
        await super().shutdown(sockets)


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: a free one) and listening, ready for
    uvicorn: a client that connects as soon as ``infai serve`` says where it
    listens waits in the backlog instead of being refused."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host.strip("[]"), port, type=socket.SOCK_STREAM
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)  # uvicorn's backlog; it listens again with the same
    except OSError:
        sock.close()
        raise
    return sock


def uvicorn_config(app: Starlette, **more: Any) -> uvicorn.Config:
    return uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", **more)


def serve(app: Starlette, sock: socket.socket, *, graceful: float = 10.0) -> None:
    """Serve ``app`` (from :func:`~.app.create_app`) on ``sock`` until interrupted.

    Requests still running at shutdown get ``graceful`` seconds to finish.
    """
    server = InfaiServer(
        uvicorn_config(app, timeout_graceful_shutdown=graceful), app.state.sessions
    )
    with suppress(KeyboardInterrupt):
        server.run(sockets=[sock])


class ServerThread:
    """The app served by uvicorn on a background thread (tests, benchmarks, embedding)."""

    def __init__(self, app: Starlette, host: str = "127.0.0.1", port: int = 0) -> None:
        self.socket = bind(host, port)
        self.port: int = self.socket.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        config = uvicorn_config(app, log_config=None, timeout_graceful_shutdown=5)
        self.server = InfaiServer(config, app.state.sessions)
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )

    def start(self, timeout: float = 10.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)
        self.socket.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

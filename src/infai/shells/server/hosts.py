"""The ``Host`` header check: a web page may not reach the server by renaming it.

DNS rebinding: a page at ``http://evil.example:8421`` that the attacker then
points at 127.0.0.1 is, to the browser, the same origin as before, so its
scripts may read this server's answers; the server listens on loopback, so
listening is no defence. What gives it away is the ``Host`` header, which still
names the attacker's domain. So by default every request must name the server
by a loopback name (``localhost``, ``127.0.0.1`` or ``[::1]``) and the port it
serves on (when the connection says which); anything else is answered 421
Misdirected Request with a JSON error, before the token is even looked at, so
such a request learns nothing. ``infai serve --allow-remote`` (a server other
machines reach under names it cannot know, or one behind a proxy) accepts any
``Host``: its token is then what guards it.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import ApiError, message_of, status_of

#: the names a loopback-only server answers to
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
#: the status for a Host the server does not answer to: "not this server"
MISDIRECTED = 421


def split_host(value: str) -> tuple[str, int | None]:
    """``Host`` as (name, port): names lower-cased, IPv6 kept in brackets, no port: None.
    A port that is not a number is ValueError."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value.partition("]")
        name += "]"
        port = rest.removeprefix(":") if rest.startswith(":") else rest
    else:
        name, _, port = value.partition(":")
    if port and not port.isdigit():
        raise ValueError(f"port {port!r} is not a number")
    return name, int(port) if port else None


class HostCheck:
    """ASGI middleware: 421 for a request whose ``Host`` is not one of ``hosts`` with
    the server's port (``hosts`` None: any Host, as ``--allow-remote`` says)."""

    def __init__(self, app: ASGIApp, hosts: Iterable[str] | None = LOOPBACK_HOSTS) -> None:
        self.app = app
        self.hosts = None if hosts is None else frozenset(h.lower() for h in hosts)

    def problem(self, scope: Scope) -> str | None:
        """Why this request is not for us (None: it is)."""
        if self.hosts is None:
            return None
        given = [bytes(v) for k, v in scope["headers"] if k == b"host"]
        if len(given) != 1:
            return "the request must carry one Host header naming this server"
        text = given[0].decode("latin-1")
        try:
            name, port = split_host(text)
        except ValueError:
            name, port = "", None
        server = scope.get("server")
        serving = server[1] if server and len(server) > 1 and server[1] else None
        wanted = (port or (443 if scope.get("scheme") == "https" else 80)) == serving
        if name in self.hosts and (serving is None or wanted):
            return None
        shown = text if text.isprintable() and len(text) <= 100 else repr(text[:100])
        names = ", ".join(sorted(self.hosts))
        at = f" on port {serving}" if serving else ""
        return (
            f"misdirected request: Host {shown!r} is not this server, which answers only "
            f"to {names}{at} (a guard against DNS rebinding; `infai serve --allow-remote` "
            "accepts any Host)"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            why = self.problem(scope)
            if why is not None:
                exc = ApiError(MISDIRECTED, why)
                status = status_of(exc) or MISDIRECTED
                response = JSONResponse({"error": message_of(exc, status)}, status)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


__all__ = ["LOOPBACK_HOSTS", "MISDIRECTED", "HostCheck", "split_host"]

"""The server's bearer token: where it comes from, how it is kept, how it is checked.

The token is given (``--token-file``, ``--token`` or ``$INFAI_SERVER_TOKEN``)
or made at first start and kept as ``<home>/server-token`` with mode 0600; a
token file others can read is refused rather than trusted. Every request but to :data:`OPEN_PATHS`
must carry it as ``Authorization: Bearer TOKEN``; without it the answer is 401
before routing, the same for every path, so a caller without the token learns
nothing about which sessions exist.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from infai.errors import InfaiError

TOKEN_FILE = "server-token"
OPEN_PATHS = frozenset({"/v1/health", "/v1/openapi.json"})


class TokenError(InfaiError):
    """The server token is missing, unsafe or malformed (the user's to fix)."""


def check_token(token: str, where: str) -> str:
    """``token`` if it is usable as a bearer token; :class:`TokenError` naming ``where``."""
    if len(token) < 16 or not token.isascii() or not token.isprintable() or " " in token:
        raise TokenError(f"{where}: a token is at least 16 visible ASCII characters")
    return token


def _read_token(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        mode = os.fstat(fd).st_mode & 0o777
        if mode & 0o077:
            raise TokenError(
                f"{path} is readable by others (mode {mode:o}): chmod 600 it, "
                "or delete it to have a new token made"
            )
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    return check_token(data.decode(errors="replace").strip(), str(path))


def load_token(home: Path, given: str | None = None) -> tuple[str, str]:
    """The bearer token and where it is from: ``given``, else ``<home>/server-token``."""
    if given is not None:
        return check_token(given.strip(), "the given token"), "given"
    path = home / TOKEN_FILE
    try:
        return _read_token(path), str(path)
    except FileNotFoundError:
        pass
    home.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another server made it first
        return _read_token(path), str(path)
    token = secrets.token_urlsafe(32)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, f"{token}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return token, str(path)


class BearerAuth:
    """ASGI middleware: 401 for any request but to :data:`OPEN_PATHS` without the token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = check_token(token, "the server token").encode()

    def _allowed(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(
                    given.strip(), self.token
                )
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS and not self._allowed(scope):
            response = JSONResponse(
                {"error": "unauthorized: send the server token as 'Authorization: Bearer TOKEN'"},
                401,
                headers={"WWW-Authenticate": 'Bearer realm="infai"'},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

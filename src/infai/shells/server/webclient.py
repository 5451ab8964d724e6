"""The web client at ``/``: a page, its ES modules and its style, served without the token.

The page itself holds nothing secret: it is the same few files for everyone
(package data under ``web/``), and every session, event and file it shows it
asks the API for with the token the person typed in (kept in the tab's
``sessionStorage``, sent as ``Authorization: Bearer``; never in a URL). So the
files are served before the token is checked, and everything else goes on to
the API, which checks it.

Every answer carries a strict Content-Security-Policy: scripts and styles only
from these files (no inline script, no ``eval``), requests only to this origin,
no frames, no forms posted anywhere, no plugins. The page builds its DOM with
``textContent``, never ``innerHTML``, so a model's or a tool's text that looks
like markup stays text. URLs in the page are relative, so it works behind a
reverse proxy that serves the API under a path prefix.
"""

from __future__ import annotations

from importlib.resources import files

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

#: the policy of every file served here (see the module docstring)
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
#: where the files are: ``/`` is index.html, ``/web/NAME`` the rest
PREFIX = "/web/"


def _load() -> dict[str, tuple[bytes, str]]:
    """Every served file by its path, with its media type (read once, at start)."""
    root = files("infai.shells.server") / "web"
    found: dict[str, tuple[bytes, str]] = {}
    for item in root.iterdir():
        suffix = "." + item.name.rpartition(".")[2]
        if item.is_file() and suffix in TYPES:
            found[PREFIX + item.name] = (item.read_bytes(), TYPES[suffix])
    found["/"] = found[PREFIX + "index.html"]
    return found


class WebClient:
    """ASGI middleware: ``GET /`` and ``GET /web/*`` answered from the package's files;
    every other request goes on to the API (and its token check)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.files = _load()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        root = scope.get("root_path", "")
        if root and path.startswith(root + "/"):  # a server told its prefix (--root-path)
            path = path[len(root) :]
        if path == "/" or path.startswith(PREFIX):
            await self._answer(path, scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _answer(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        found = self.files.get(path)
        if scope["method"] not in ("GET", "HEAD"):
            response = Response("only GET here\n", 405, HEADERS | {"Allow": "GET, HEAD"})
        elif found is None:
            response = Response("no such file\n", 404, HEADERS, media_type="text/plain")
        else:
            body, media_type = found
            response = Response(body, 200, HEADERS, media_type=media_type)
        await response(scope, receive, send)


__all__ = ["CSP", "WebClient"]

"""A client of ``infai serve``: the HTTP API of docs/server.md, from another machine.

The command line's ``--remote URL`` commands (:mod:`infai.shells.cli.remote`) talk
to a server through :class:`Remote` instead of opening a store: the same
session listing, log, tree, events, search, files, diffs and export (the server
answers in the JSON the local commands print, or the export's own bytes), and a
turn whose prompt, live deltas, approval questions and cancel travel over the API.

``URL`` is where the server is, as ``infai serve`` printed it
(``http://127.0.0.1:8765/v1``) or without the ``/v1`` (added), and may carry a
path prefix for a reverse proxy (``https://box.example/infai``). The token goes
in the ``Authorization`` header, never in a URL.

Errors: :class:`RemoteError` for whatever the server refused (its status and
the message of its ``{"error": ...}`` body), for a server that cannot be reached
and for an answer that is not the API's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2 as httpx  # the HTTP client the SDKs here use (a declared dependency)

from infai.errors import InfaiError

#: seconds to wait for a server's answer (a turn's stream has no read timeout)
TIMEOUT = 30.0


class RemoteError(InfaiError):
    """The server refused a request, could not be reached, or answered nonsense.

    ``status`` is the HTTP status (0: no answer at all); a 4xx is the user's
    input to fix (a wrong session id, a busy session, a refused token)."""

    def __init__(self, message: str, status: int = 0, *, bad_input: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self._bad_input = bad_input

    @property
    def bad_input(self) -> bool:
        """Whether it is the user's input to fix (a 4xx, a URL that is no server's)."""
        return self._bad_input or 400 <= self.status < 500


def api_url(url: str) -> str:
    """The API's base URL for what a user typed: scheme and host required, a
    trailing ``/v1`` added unless given; a URL that is not http(s) is refused."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RemoteError(
            f"--remote {url!r}: give the server's http:// or https:// URL", bad_input=True
        )
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass(frozen=True)
class Frame:
    """One server-sent event: its name, its JSON data and its ``id`` (if any)."""

    name: str
    data: dict[str, Any]
    id: str | None = None


class Remote:
    """A server's API under a token; close it (or use it as a context manager)."""

    def __init__(self, url: str, token: str, *, transport: httpx.BaseTransport | None = None):
        self.url = api_url(url)
        self._client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=TIMEOUT,
            transport=transport,
        )

    def close(self) -> None:
        """Close the connections."""
        self._client.close()

    def __enter__(self) -> Remote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------

    def get(self, path: str, **params: Any) -> Any:
        """The JSON answer to ``GET path`` (``params``: the query; None left out)."""
        query = {k: _query_value(v) for k, v in params.items() if v is not None}
        return self._json(self._send("GET", path, params=query))

    def post(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """The JSON answer to ``POST path`` with ``body`` (None: an empty answer)."""
        return self._json(self._send("POST", path, json=dict(body or {})))

    def lines(self, path: str) -> Iterator[bytes]:
        """The body of ``GET path`` one line at a time, each with its ``\n`` (a last
        line without one as it came), read as it arrives: for an answer too big to
        hold, such as a session's export. A body the server cut off is an error."""
        with self._streamed("GET", path, "the answer broke off") as response:
            yield from split_lines(response.iter_bytes())

    def _send(
        self, method: str, path: str, *, data_status: int = 0, **kwargs: Any
    ) -> httpx.Response:
        """The answer to ``method path`` (``kwargs``: httpx's), its error status raised
        as :class:`RemoteError` (but ``data_status``, whose body is data)."""
        try:
            response = self._client.request(method, api_path(path), **kwargs)
        except httpx.HTTPError as exc:
            raise RemoteError(f"{self.url}: cannot reach the server ({exc})") from exc
        if response.status_code != data_status:
            _check(response, self.url)
        return response

    @contextmanager
    def _streamed(
        self, method: str, path: str, broke: str, **kwargs: Any
    ) -> Iterator[httpx.Response]:
        """``method path`` whose body is read as it arrives, in the ``with`` block: an
        error status raised as :class:`RemoteError` before the body is read, and an
        answer that cannot be had or breaks off (``broke`` says which) as one too."""
        try:
            with self._client.stream(method, api_path(path), **kwargs) as response:
                if response.status_code >= 300:
                    response.read()
                    _check(response, self.url)
                yield response
        except httpx.HTTPError as exc:
            raise RemoteError(f"{self.url}: {broke} ({exc})") from exc

    def _json(self, response: httpx.Response) -> Any:
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise RemoteError(
                f"{self.url}: the answer is not JSON (is this infai serve?)", response.status_code
            ) from exc

    def stream(
        self, path: str, body: Mapping[str, Any] | None = None, **params: Any
    ) -> Iterator[Frame]:
        """``POST path`` with ``body`` (None: ``GET path`` with the query ``params``)
        answered by server-sent events, one :class:`Frame` at a time until the
        server ends the stream. Leaving the iteration early closes the
        connection (the server cancels a turn whose client went)."""
        timeout = httpx.Timeout(TIMEOUT, read=None)
        query = {k: _query_value(v) for k, v in params.items() if v is not None}
        sent: dict[str, Any] = {"params": query} if body is None else {"json": dict(body)}
        method = "GET" if body is None else "POST"
        broke = "the stream broke off"
        with self._streamed(method, path, broke, timeout=timeout, **sent) as response:
            yield from parse_frames(response.iter_lines())


def api_path(path: str) -> str:
    """``path`` if it stays under the API's URL: a ``.`` or ``..`` segment (a URL
    keeps the request, and its token, under the API only if it has none), a
    query or a fragment in it is refused, whatever built it."""
    segments = path.split("/")
    if any(s in (".", "..") for s in segments) or any(c in path for c in "?#%\\"):
        raise RemoteError(f"{path!r} is not a path of the API", bad_input=True)
    return path


def split_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of a body that arrives in ``chunks``, each with its ``\n`` (a last
    line without one as it came); a long line's pieces are joined once."""
    pending: list[bytes] = []
    for chunk in chunks:
        first, *rest = chunk.split(b"\n")
        pending.append(first)
        if not rest:
            continue
        yield b"".join(pending) + b"\n"
        yield from (line + b"\n" for line in rest[:-1])
        pending = [rest[-1]]
    if tail := b"".join(pending):
        yield tail


def _query_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _check(response: httpx.Response, url: str) -> None:
    """Raise :class:`RemoteError` for an error status, with the server's message."""
    status = response.status_code
    if 300 <= status < 400:  # not followed: the token is for this URL only
        where = response.headers.get("location") or "elsewhere"
        raise RemoteError(
            f"{url}: the server redirects to {where}: give --remote the URL it names",
            status,
            bad_input=True,
        )
    if status < 400:
        return
    try:
        message = str(response.json().get("error", ""))
    except (ValueError, AttributeError):
        message = ""
    if status == 401:
        message = "the server refused the token (give --token, or run `infai login URL`)"
    raise RemoteError(message or f"{url}: the server answered {status}", status)


def parse_frames(lines: Iterator[str]) -> Iterator[Frame]:
    """Server-sent events from the lines of a stream (comments and pings skipped;
    a frame whose data is not a JSON object is the server's bug: an error)."""
    name, event_id = "message", None
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield _frame(name, "\n".join(data), event_id)
            name, data, event_id = "message", [], None
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            event_id = value
    if data:
        yield _frame(name, "\n".join(data), event_id)


def _frame(name: str, text: str, event_id: str | None) -> Frame:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RemoteError(f"the server sent a {name!r} event that is not JSON") from exc
    if not isinstance(data, dict):
        raise RemoteError(f"the server sent a {name!r} event that is not an object")
    return Frame(name, data, event_id)


def watch(remote: Remote, path: str, **params: Any) -> Iterator[Frame]:
    """``GET path`` answered by server-sent events (a session's ``/stream``), one
    :class:`Frame` at a time until the server ends it or the caller stops
    iterating (the connection is closed then). No read timeout: the server's
    pings keep an idle stream alive."""
    return remote.stream(path, **params)


def delete(remote: Remote, path: str) -> None:
    """``DELETE path`` (an error status raises :class:`RemoteError`)."""
    remote._send("DELETE", path)


def post_data(remote: Remote, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
    """``POST path``: its status and JSON answer, a 409 too (whose body is data,
    as a refused restore's plan); other error statuses raise :class:`RemoteError`."""
    response = remote._send("POST", path, data_status=409, json=dict(body))
    return response.status_code, remote._json(response)


def patch(remote: Remote, path: str, body: Mapping[str, Any]) -> Any:
    """The JSON answer to ``PATCH path`` with ``body`` (an error status raises
    :class:`RemoteError`): a session's rename."""
    return remote._json(remote._send("PATCH", path, json=dict(body)))

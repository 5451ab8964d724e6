"""A reverse proxy on loopback that serves an upstream under a path prefix, as a
TLS proxy in front of ``infai serve`` would (``/infai/v1/...`` -> ``/v1/...``).

It forwards the method, the headers and the body, and copies the answer as it
arrives (a server-sent event stream is not buffered), so a client behind it sees
what it would see directly."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host"}


class PrefixProxy:
    """``with PrefixProxy(upstream, "/infai") as proxy:`` serves ``proxy.url``."""

    def __init__(self, upstream: str, prefix: str) -> None:
        target = urlsplit(upstream)
        host, port = target.hostname or "127.0.0.1", target.port or 80

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def _forward(self) -> None:
                if not self.path.startswith(prefix + "/"):
                    self.send_error(404)
                    return
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                conn = http.client.HTTPConnection(host, port, timeout=60)
                conn.request(self.command, self.path[len(prefix) :], body, headers)
                answer = conn.getresponse()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                        self.send_header(key, value)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                while chunk := answer.read1(65536):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                conn.close()

            do_GET = do_POST = do_DELETE = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{prefix}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> PrefixProxy:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

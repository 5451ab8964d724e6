"""Fake OpenAI-compatible and Anthropic HTTP servers on 127.0.0.1.

Each server answers POSTs with scripted :class:`Reply` values, streaming the
provider's real wire format (Server-Sent Events over chunked HTTP/1.1), so the
official SDKs run their real code path against them: text in several deltas,
tool calls whose argument JSON is split across chunks, reasoning, usage, HTTP
errors with ``Retry-After``, an error event in the middle of a stream, a data
line that is not JSON, and a connection dropped mid-stream. Every request is
recorded (path, headers, JSON body) for tests to inspect.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Reply:
    """What the server answers to one request."""

    text: str = ""
    reasoning: str = ""
    #: (id, name, arguments) of each tool call; a string is sent as is (bad JSON too)
    tool_calls: list[tuple[str, str, dict[str, Any] | str]] = field(default_factory=list)
    input_tokens: int = 10
    output_tokens: int = 5
    cached_tokens: int = 0
    #: not 200: an error response (JSON body with ``error_message``), no stream
    status: int = 200
    error_message: str = "fake error"
    retry_after: float | None = None
    #: after the text, an error event in the stream (then the stream ends)
    stream_error: str | None = None
    #: a data line that is not JSON, after the text
    malformed: bool = False
    #: close the connection after the text without finishing the stream
    drop: bool = False
    #: the stop reason the provider reports (default: tools or end)
    stop: str | None = None
    #: the Anthropic thinking signature sent with reasoning
    signature: str = "sig-1"
    #: seconds to wait before each event (a slow model, for cancellation tests)
    pause: float = 0.0
    #: the type of the error object sent by ``stream_error`` (None: a transient one)
    stream_error_type: str | None = None
    #: response headers to add (``x-should-retry``, say)
    headers: dict[str, str] = field(default_factory=dict)
    #: wire quirks of real servers: "bare_finish" (a finish chunk with no delta),
    #: "usage_without_choices", "repeat_name" (the name in every fragment),
    #: "no_index" (fragments without an index), "no_usage", "late_id" (id and
    #: name in the second fragment), "no_finish" (no ``finish_reason`` at all, as
    #: some services behind OpenRouter), "no_done" (the stream ends cleanly
    #: without ``data: [DONE]``); anthropic: "redacted" (a redacted thinking
    #: block), "two_thinking" (two thinking blocks, each with its signature)
    quirks: set[str] = field(default_factory=set)
    #: how many deltas the text is sent in (up to; one per piece)
    pieces: int = 3
    #: (n, gate): after the first ``n`` events, the rest only once ``gate`` is set
    #: (a test looks at a turn mid-stream without racing the stream's end)
    hold: tuple[int, threading.Event] | None = None


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


def _pieces(text: str, n: int = 3) -> list[str]:
    """``text`` in up to ``n`` non-empty pieces (a delta per piece)."""
    if not text:
        return []
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeServer:
    """A threaded HTTP server with a queue of replies; use as a context manager."""

    flavour = "base"

    def __init__(self, replies: list[Reply] | None = None) -> None:
        self.replies: list[Reply] = list(replies or [])
        self.requests: list[Recorded] = []
        #: streams whose client went away before the end
        self.disconnects = 0
        self.disconnected = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with server._lock:
                    server.requests.append(
                        Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    reply = server.replies.pop(0) if server.replies else None
                if reply is None:
                    reply = Reply(status=500, error_message="fake server: no reply scripted")
                server._answer(self, reply)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """What the provider's SDK takes as its base URL."""
        return self.url

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- the wire ---------------------------------------------------------

    def _error_body(self, reply: Reply) -> dict[str, Any]:
        raise NotImplementedError

    def _events(self, reply: Reply) -> Iterator[str]:
        raise NotImplementedError

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.status != 200:
            data = json.dumps(self._error_body(reply)).encode()
            handler.send_response(reply.status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            if reply.retry_after is not None:
                handler.send_header("retry-after", str(reply.retry_after))
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
            return
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("transfer-encoding", "chunked")
        handler.send_header("cache-control", "no-cache")
        handler.end_headers()

        def chunk(data: bytes) -> None:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            handler.wfile.flush()

        try:
            for sent, text in enumerate(self._events(reply)):
                if reply.hold is not None and sent == reply.hold[0]:
                    reply.hold[1].wait(60)
                time.sleep(reply.pause)
                data = text.encode()
                half = len(data) // 2  # every event in two writes: the SDK must reassemble
                chunk(data[:half])
                chunk(data[half:])
        except (BrokenPipeError, ConnectionResetError):
            with self._lock:
                self.disconnects += 1
            self.disconnected.set()
            return
        if reply.drop:
            handler.close_connection = True
            return
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n"


class FakeOpenAI(FakeServer):
    """Chat Completions streaming (``POST /v1/chat/completions``); base URL ``url + /v1``."""

    flavour = "openai"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def _error_body(self, reply: Reply) -> dict[str, Any]:
        kind = "rate_limit_error" if reply.status == 429 else "server_error"
        return {"error": {"message": reply.error_message, "type": kind, "code": None}}

    def _events(self, reply: Reply) -> Iterator[str]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            if "no_index" in reply.quirks:
                for fragment in delta.get("tool_calls", ()):
                    fragment.pop("index", None)
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return _sse(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "fake-model",
                    "choices": [choice],
                }
            )

        yield chunk({"role": "assistant", "content": ""})
        for piece in _pieces(reply.reasoning):
            yield chunk({"reasoning_content": piece})
        for piece in _pieces(reply.text, reply.pieces):
            yield chunk({"content": piece})
        if reply.malformed:
            yield "data: {not json\n\n"
            return
        if reply.stream_error:
            kind = reply.stream_error_type or "server_error"
            error = {"message": reply.stream_error, "type": kind}
            yield _sse({"error": error})
            return
        if reply.drop:
            return
        quirks = reply.quirks
        for index, (call_id, name, arguments) in enumerate(reply.tool_calls):
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            head: dict[str, Any] = {"index": index, "id": call_id, "type": "function"}
            head["function"] = {"name": name, "arguments": ""}
            if "late_id" in quirks:  # a first fragment with nothing but the index
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": ""}}]})
            yield chunk({"tool_calls": [head]})
            for piece in _pieces(raw, 4):
                fragment: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
                if "repeat_name" in quirks:
                    fragment["function"]["name"] = name
                    fragment["id"] = call_id
                yield chunk({"tool_calls": [fragment]})
        finish = reply.stop or ("tool_calls" if reply.tool_calls else "stop")
        if "no_finish" in quirks:
            pass
        elif "bare_finish" in quirks:
            yield _sse(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "fake-model",
                    "choices": [{"index": 0, "finish_reason": finish}],
                }
            )
        else:
            yield chunk({}, finish)
        done = [] if "no_done" in quirks else ["data: [DONE]\n\n"]
        if "no_usage" in quirks:
            yield from done
            return
        usage = {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
            "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
        }
        final: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake-model",
            "choices": [],
            "usage": usage,
        }
        if "usage_without_choices" in quirks:
            del final["choices"]
        yield _sse(final)
        yield from done


class FakeAnthropic(FakeServer):
    """Messages streaming (``POST /v1/messages``); base URL is ``url``."""

    flavour = "anthropic"

    def _error_body(self, reply: Reply) -> dict[str, Any]:
        kind = {429: "rate_limit_error", 529: "overloaded_error", 401: "authentication_error"}
        error = {"type": kind.get(reply.status, "api_error"), "message": reply.error_message}
        return {"type": "error", "error": error}

    def _events(self, reply: Reply) -> Iterator[str]:
        def event(name: str, data: dict[str, Any]) -> str:
            return _sse({"type": name, **data}, name)

        usage = {
            "input_tokens": reply.input_tokens,
            "output_tokens": 1,
            "cache_read_input_tokens": reply.cached_tokens,
            "cache_creation_input_tokens": 0,
        }
        message: dict[str, Any] = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "fake-claude",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        yield event("message_start", {"message": message})
        yield event("ping", {})
        index = 0
        block: dict[str, Any]
        if "redacted" in reply.quirks:
            block = {"type": "redacted_thinking", "data": "opaque-data"}
            yield event("content_block_start", {"index": index, "content_block": block})
            yield event("content_block_stop", {"index": index})
            index += 1
        thoughts = [reply.reasoning] if reply.reasoning else []
        if "two_thinking" in reply.quirks:
            thoughts.append("second thought")
        for number, thought in enumerate(thoughts):
            block = {"type": "thinking", "thinking": "", "signature": ""}
            yield event("content_block_start", {"index": index, "content_block": block})
            for piece in _pieces(thought):
                delta = {"type": "thinking_delta", "thinking": piece}
                yield event("content_block_delta", {"index": index, "delta": delta})
            signature = reply.signature if number == 0 else f"{reply.signature}-{number}"
            delta = {"type": "signature_delta", "signature": signature}
            yield event("content_block_delta", {"index": index, "delta": delta})
            yield event("content_block_stop", {"index": index})
            index += 1
        if reply.text:
            block = {"type": "text", "text": ""}
            yield event("content_block_start", {"index": index, "content_block": block})
            for piece in _pieces(reply.text):
                delta = {"type": "text_delta", "text": piece}
                yield event("content_block_delta", {"index": index, "delta": delta})
            if reply.malformed:
                yield "event: content_block_delta\ndata: {not json\n\n"
                return
            if reply.stream_error:
                kind = reply.stream_error_type or "overloaded_error"
                error = {"type": kind, "message": reply.stream_error}
                yield event("error", {"error": error})
                return
            if reply.drop:
                return
            yield event("content_block_stop", {"index": index})
            index += 1
        for call_id, name, arguments in reply.tool_calls:
            block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            yield event("content_block_start", {"index": index, "content_block": block})
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            for piece in _pieces(raw, 4):
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield event("content_block_delta", {"index": index, "delta": delta})
            yield event("content_block_stop", {"index": index})
            index += 1
        stop = reply.stop or ("tool_use" if reply.tool_calls else "end_turn")
        yield event(
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": reply.output_tokens},
            },
        )
        yield event("message_stop", {})

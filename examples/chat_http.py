"""A minimal chat front end on infai's HTTP API (``infai serve``), standard library only.

    infai serve &          # prints its URL; the token is in HOME/server-token
    python examples/chat_http.py --url http://127.0.0.1:8421/v1 \
        --token-file ~/.config/infai/harness/server-token

Each line typed is sent as a prompt with ``stream: true``: the answer is that
turn's own Server-Sent Events, whose text deltas are printed as they come. A
permission question (``approval``) is put to you: the next line answers it
(``y`` allow once, ``a`` always, anything else denies; the words after ``n`` are
what the model is told). End of input (Ctrl-D) ends the chat and prints the
session to come back to (``--session``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class Api:
    """The few calls a chat needs, with the bearer token."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The open response (a stream's frames are read from it as they come)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data, self.headers, method=method)
        return urllib.request.urlopen(req, timeout=300)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON answer."""
        with self.request(method, path, body) as answer:
            return json.loads(answer.read() or b"null")


def frames(response: Any) -> Iterator[tuple[str, Any]]:
    """The SSE frames of ``response``: (event, data as JSON), as they arrive."""
    event, data = "message", list[str]()
    for raw in response:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def answer_of(line: str) -> dict[str, Any]:
    """A typed answer to a permission question, as the API takes it."""
    if line == "y":
        return {"answer": "allow"}
    if line == "a":
        return {"answer": "allow-always"}
    why = line[1:].strip() if line.startswith("n") else ""
    return {"answer": "deny", **({"reason": why} if why else {})}


def chat_turn(api: Api, session: str, text: str, lines: Iterator[str]) -> str:
    """Send ``text``; print the answer as it streams; answer questions from ``lines``.
    Returns how the turn ended."""
    body = {"text": text, "stream": True}
    with api.request("POST", f"/sessions/{session}/prompt", body) as response:
        for event, data in frames(response):
            if event == "delta" and data.get("kind") == "text":
                print(data["text"], end="", flush=True)
            elif event == "approval":
                print(f"\n[asks: {data['tool']} {data['subject']}] y/a/n [why]? ", end="")
                sys.stdout.flush()
                reply = answer_of(next(lines, "n").strip())
                api.call("POST", f"/sessions/{session}/approvals", {"id": data["id"], **reply})
            elif event == "turn_ended":
                print()
                if data.get("error"):
                    print(f"[{data['outcome']}: {data['error']}]")
                return str(data["outcome"])
    return "cancelled"


def main(argv: list[str]) -> int:
    """Open (or create) the session, then chat until the end of input."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8421/v1")
    parser.add_argument("--token-file", help="default: $INFAI_SERVER_TOKEN")
    parser.add_argument("--session", help="continue this session (default: a new one)")
    parser.add_argument("--dir", help="the new session's working directory")
    args = parser.parse_args(argv)
    if args.token_file:
        token = Path(args.token_file).read_text().strip()
    else:
        token = os.environ.get("INFAI_SERVER_TOKEN", "")
    api = Api(args.url, token)
    session = args.session
    if session is None:
        created = api.call("POST", "/sessions", {"working_dir": args.dir} if args.dir else {})
        session = created["id"]
    print(f"[session {session}]")
    lines = iter(sys.stdin.readline, "")
    for line in lines:
        if line.strip():
            chat_turn(api, session, line.strip(), lines)
    print(f"[come back with --session {session}]")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

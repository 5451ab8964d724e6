"""The server's JSON is inert: a body or an SSE frame read in a terminal drives nothing.

A session's name, a prompt and the reply that quotes it carry terminal
attacks (OSC 0 and 52, ``ESC [ 2K``, U+202E, U+009B, DEL). JSON itself escapes
the C0 controls; the server also writes DEL, the C1 controls and the bidi
controls as ``\\uXXXX``, so the bytes on the wire hold none of them raw, and a
client that parses the JSON still gets the text exactly as it was stored.
Checked on the raw bytes of real responses from the app on a loopback port.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from infai.llm.registry import build_model
from infai.shells.server import create_app
from infai.shells.server.run import ServerThread
from infai.store import Store

TOKEN = "test-token-0123456789abcdef"
PAYLOAD = "A\x1b]0;pwned\x07B\x1b]52;c;cm0=\x07C\x1b[2KD\u202eE\x9bF\x7fG\u2066H"
RAW = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def assert_inert(body: bytes) -> None:
    text = body.decode("utf-8")
    found = sorted({f"U+{ord(c):04X}" for c in RAW.findall(text.replace("\n", ""))})
    assert found == [], f"raw control characters on the wire: {found}"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    store = Store(tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    app = create_app(
        store, token=TOKEN, model_factory=lambda n: build_model(n or "offline"), working_dir=work
    )
    server = ServerThread(app).start()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as http:
        yield http
    server.stop()


def test_json_bodies_escape_control_and_bidi_characters(client: httpx.Client) -> None:
    created = client.post("/v1/sessions", json={"name": PAYLOAD})
    assert created.status_code == 201
    assert_inert(created.content)
    sid = created.json()["id"]
    assert created.json()["name"] == PAYLOAD  # the same value to a JSON client
    for path in ("/v1/sessions", f"/v1/sessions/{sid}"):
        response = client.get(path)
        assert response.status_code == 200
        assert_inert(response.content)
    missing = client.get(f"/v1/sessions/{sid}/events/{quote(PAYLOAD, safe='')}")  # quoted back
    assert missing.status_code in (400, 404)
    assert_inert(missing.content)


def test_sse_frames_escape_control_and_bidi_characters(client: httpx.Client) -> None:
    sid = client.post("/v1/sessions", json={}).json()["id"]
    body = {"text": PAYLOAD, "stream": True}
    with client.stream("POST", f"/v1/sessions/{sid}/prompt", json=body) as response:
        assert response.status_code == 200
        raw = b"".join(response.iter_bytes())
    assert_inert(raw)
    data = [json.loads(x[6:]) for x in raw.decode().splitlines() if x.startswith("data: ")]
    assert any(d.get("record", {}).get("content") == PAYLOAD for d in data)  # intact

"""``GET /v1/sessions/{id}/export`` against the real app on a loopback port.

The answer is the export file ``infai session export`` writes over the same
store, byte for byte (a record big enough to be a blob, a control character
made inert, more events than one batch), ``infai session import`` takes it
back, and a session that does not exist is a 404 naming it, before any byte.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from infai.llm.registry import build_model
from infai.shells.inert import inert_json_line
from infai.shells.server import create_app
from infai.shells.server.export import BATCH_LINES
from infai.shells.server.run import ServerThread
from infai.store import MessageRecord, Store, export_lines, import_session

TOKEN = "test-token-0123456789abcdef"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Store, httpx.Client]]:
    store = Store(tmp_path / "home")
    app = create_app(
        store, token=TOKEN, model_factory=lambda name: build_model(name or "offline"),
        working_dir=tmp_path,
    )  # fmt: skip
    server = ServerThread(app).start()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as client:
        yield store, client
    server.stop()


def test_the_export_is_the_local_export_byte_for_byte(
    served: tuple[Store, httpx.Client], tmp_path: Path
) -> None:
    store, client = served
    sid = store.create_session(name="exported").id
    with store.open_writer(sid) as writer:
        writer.append(MessageRecord(content="a bell \x07 and \u202e here"), "user")
        writer.append(MessageRecord(content="x" * 200_000), "assistant")  # a blob
        for i in range(BATCH_LINES + 5):  # more lines than one batch
            writer.append(MessageRecord(content=f"line {i}"), "user")
    local = b"".join(inert_json_line(line) for line in export_lines(store, sid))
    response = client.get(f"/v1/sessions/{sid.upper()}/export")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert f'filename="{sid}.jsonl"' in response.headers["content-disposition"]
    assert response.content == local
    assert b"\x07" not in response.content and "\u202e".encode() not in response.content
    again = Store(tmp_path / "other")
    info = import_session(again, io.BytesIO(response.content), "the answer")
    with again.open_reader(sid) as reader:
        assert info.id == sid and reader.count == BATCH_LINES + 7


def test_an_unknown_session_is_a_404_naming_it(served: tuple[Store, httpx.Client]) -> None:
    _, client = served
    missing = str(uuid.uuid4())
    response = client.get(f"/v1/sessions/{missing}/export")
    assert response.status_code == 404
    assert missing in response.json()["error"]
    assert client.get("/v1/sessions/not-an-id/export").status_code == 400

"""``GET /v1/sessions/{id}/export`` against the real app on a loopback port.

The answer is the export file ``infai session export`` writes over the same
store, byte for byte (a record big enough to be a blob, a control character
made inert, more events than one batch), ``infai session import`` takes it
back, and a session that does not exist is a 404 naming it, before any byte.
"""

from __future__ import annotations

import gc
import io
import os
import socket
import struct
import threading
import time
import tracemalloc
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


def test_an_id_with_a_trailing_newline_is_not_a_uuid(served: tuple[Store, httpx.Client]) -> None:
    """``$`` matches before a last newline: ``ID%0A`` passed the check, and the
    export's ``Content-Disposition`` then carried the newline (the server dropped
    the connection); every route's path or body id had it too."""
    store, client = served
    sid = store.create_session(name="x").id
    for bad in (f"{sid}%0A", f"{sid}%0D%0ASet-Cookie:%20a=b"):
        response = client.get(f"/v1/sessions/{bad}/export")
        assert response.status_code == 400, bad
        assert "is not a UUID" in response.json()["error"]
    checkout = client.post(f"/v1/sessions/{sid}/checkout", json={"event": f"{sid}\n"})
    assert checkout.status_code == 422 and "body.event" in checkout.json()["error"]


def test_a_session_written_during_its_export_gives_a_whole_prefix(
    served: tuple[Store, httpx.Client], tmp_path: Path
) -> None:
    """Each export is the session as it was when the export began: every line
    whole, and it imports; appends made meanwhile are in the next one."""
    store, client = served
    sid = store.create_session(name="busy").id
    with store.open_writer(sid) as writer:
        for i in range(300):
            writer.append(MessageRecord(content=f"before {i} " + "z" * 400), "user")
    done = threading.Event()

    def append() -> None:
        with store.open_writer(sid) as writer:
            n = 0
            while not done.is_set() and n < 2000:
                writer.append(MessageRecord(content=f"during {n}"), "assistant")
                n += 1

    thread = threading.Thread(target=append)
    thread.start()
    try:
        counts = []
        for k in range(3):
            body = client.get(f"/v1/sessions/{sid}/export").content
            assert body.endswith(b"\n")
            copy = Store(tmp_path / f"copy{k}")
            import_session(copy, io.BytesIO(body), "the answer")
            with copy.open_reader(sid) as reader:
                counts.append(reader.count)
    finally:
        done.set()
        thread.join()
    assert counts == sorted(counts) and counts[0] >= 300


def test_clients_that_leave_mid_export_leave_nothing_behind(
    served: tuple[Store, httpx.Client],
) -> None:
    """A client that reads a little and hangs up: the server goes on serving, and
    keeps no descriptor or thread for it."""
    store, client = served
    sid = store.create_session(name="big").id
    with store.open_writer(sid) as writer:
        for i in range(40):  # 4 MB: several batches of about BATCH_BYTES
            writer.append(MessageRecord(content=f"line {i} " + "w" * 100_000), "user")
    whole = client.get(f"/v1/sessions/{sid}/export").content  # warm: the pools are made
    port = int(str(client.base_url).rsplit(":", 1)[1])
    request = (
        f"GET /v1/sessions/{sid}/export HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\n\r\n"
    )
    fds = len(os.listdir("/proc/self/fd"))
    threads = threading.active_count()
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(request.encode())
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    assert client.get(f"/v1/sessions/{sid}/export").content == whole
    deadline = time.monotonic() + 10
    while len(os.listdir("/proc/self/fd")) > fds and time.monotonic() < deadline:
        gc.collect()  # a generator left mid-batch is closed (its reader too) when collected
        time.sleep(0.02)
    assert len(os.listdir("/proc/self/fd")) <= fds
    assert threading.active_count() <= threads + 4  # the pool's idle workers, not one a client


def test_a_large_export_is_streamed_not_held(served: tuple[Store, httpx.Client]) -> None:
    """A 24 MB session goes out in batches of about ``BATCH_BYTES``: the server
    (in this process) never holds more than a few batches at once."""
    store, client = served
    sid = store.create_session(name="large").id
    with store.open_writer(sid) as writer:
        for _ in range(40):
            writer.append(MessageRecord(content=os.urandom(300_000).hex()), "user")
    tracemalloc.start()
    try:
        size = 0
        with client.stream("GET", f"/v1/sessions/{sid}/export") as response:
            for chunk in response.iter_bytes():
                size += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size > 24_000_000
    assert peak < size / 3, (peak, size)

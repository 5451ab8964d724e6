"""A real ``infai serve`` killed with SIGKILL the moment it answers 202 to a prompt:
the prompt it accepted is in the store, under the id the 202 named (marked
``crash``: two real servers started and killed).

Both backends: the directory store (reopened, so its recovery runs) and
PostgreSQL (a throwaway cluster, tests/support/pgserver.py).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from infai.store import MessageRecord, SessionStore, open_store

TOKEN = "kill-after-202-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WAIT = 60.0


def serve(env: dict[str, str], work: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "infai", "serve", "--port", "0"],
        cwd=work, env=env, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stderr is not None
    deadline = time.monotonic() + WAIT
    while True:
        line = proc.stderr.readline()
        found = re.search(r"serving (http://\S+)/v1", line)
        if found:
            return proc, listening(found.group(1), deadline)
        if (not line and proc.poll() is not None) or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the server did not start: {line}{proc.stderr.read()}")


def listening(url: str, deadline: float) -> str:
    """``url`` once it answers: the start line is said when the socket is bound,
    a moment before uvicorn listens on it."""
    while True:
        try:
            httpx.get(f"{url}/v1/health", timeout=WAIT)
            return url
        except httpx.ConnectError:
            assert time.monotonic() < deadline, "the server never listened"
            time.sleep(0.05)


@pytest.mark.crash
@pytest.mark.parametrize("backend", ["directory", "postgresql"])
def test_a_prompt_answered_202_survives_a_sigkill_right_after(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    location = str(home) if backend == "directory" else request.getfixturevalue("pg_url")
    env = {**os.environ, "INFAI_HOME": str(home), "INFAI_SERVER_TOKEN": TOKEN}
    env["INFAI_STORE"] = location
    proc, url = serve(env, work)
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=WAIT) as client:
            sid = client.post("/v1/sessions", json={}).json()["id"]
            accepted = client.post(f"/v1/sessions/{sid}/prompt", json={"text": "do not lose me"})
            os.kill(proc.pid, signal.SIGKILL)  # the moment the 202 is read
        assert accepted.status_code == 202, accepted.text
        prompt = accepted.json()["prompt"]
        proc.wait(WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()  # type: ignore[union-attr]
    store: SessionStore = open_store(location, home=home)
    try:
        with store.open_reader(sid) as reader:
            event = reader.event(prompt, resolve=True)
        assert isinstance(event.record, MessageRecord)
        assert event.record.content == "do not lose me" and event.role == "user"
        assert store.fsck(sid).ok
    finally:
        store.close()

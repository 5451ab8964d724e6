"""``GET /v1/search`` on the PostgreSQL store, through the real app on a loopback port.

The same requests as the directory store's tests (tests/shells/server/
test_search_api.py), answered by PostgreSQL's full-text search (``tsvector`` +
GIN) in a throwaway cluster: hits on a branch that was left behind and inside a
blob, each filter, an event the server's own turn appended, and a bad query
answered 400 naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from infai.llm.registry import build_model
from infai.shells.server import create_app
from infai.shells.server.run import ServerThread
from infai.store import MessageRecord, ToolCallRecord, ToolResultRecord

TOKEN = "test-token-0123456789abcdef"


class Served:
    def __init__(self, pg_url: str, tmp_path: Path) -> None:
        from infai.store.pg import PgStore

        self.store = PgStore(pg_url, home=tmp_path / "home")
        self.work = tmp_path / "work"
        self.work.mkdir()
        app = create_app(
            self.store,
            token=TOKEN,
            model_factory=lambda name: build_model(name or "offline"),
            working_dir=self.work,
        )
        self.server = ServerThread(app).start()
        headers = {"Authorization": f"Bearer {TOKEN}"}
        self.client = httpx.Client(base_url=self.server.url, headers=headers, timeout=10)

    def search(self, status: int = 200, **params: Any) -> dict[str, Any]:
        response = self.client.get("/v1/search", params=params)
        assert response.status_code == status, response.text
        data: dict[str, Any] = response.json()
        return data

    def close(self) -> None:
        self.client.close()
        self.server.stop()
        self.store.close()


@pytest.fixture
def served(pg_url: str, tmp_path: Path) -> Iterator[Served]:
    s = Served(pg_url, tmp_path)
    yield s
    s.close()


def seed(s: Served) -> dict[str, str]:
    """``fix`` (in /src/app) with a branch that was left and a large output (a blob);
    ``other`` (in /tmp)."""
    store = s.store
    fix = store.create_session(name="fix the parser", working_dir="/src/app").id
    other = store.create_session(name="other", working_dir="/tmp").id
    big = "line of build output\n" * 4000 + "the quasar warning at the very end\n"
    assert len(big) > store.options.blob_threshold
    with store.open_writer(fix) as writer:
        root = writer.append(MessageRecord(content="the parser drops quoted strings"), "user")
        left = writer.append(MessageRecord(content="try a tokenizer rewrite"), "assistant")
        call = ToolCallRecord(call_id="c1", name="bash", arguments={"command": "pytest parser"})
        kept = writer.append(call, "assistant", parent=root.id)  # a fork: `left` is behind
        out = ToolResultRecord(call_id="c1", name="bash", content="3 failed: parser tokenizer")
        writer.append(out, "tool")
        blob = writer.append(ToolResultRecord(call_id="c2", name="make", content=big), "tool")
    with store.open_writer(other) as writer:
        writer.append(MessageRecord(content="unrelated tokenizer notes"), "user")
    return {"fix": fix, "other": other, "left": left.id, "kept": kept.id, "blob": blob.id}


def test_hits_on_a_left_branch_and_in_a_blob_are_found(served: Served) -> None:
    ids = seed(served)
    hits = served.search(q="tokenizer")["hits"]
    assert {h["session_id"] for h in hits} == {ids["fix"], ids["other"]}
    left = next(h for h in hits if h["event_id"] == ids["left"])
    assert left["on_head_path"] is False  # found on the branch that was left
    assert left["session_name"] == "fix the parser" and left["working_dir"] == "/src/app"
    start, end = left["marks"][0]
    assert left["snippet"][start:end].lower() == "tokenizer"
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    (quasar,) = served.search(q="quasar")["hits"]  # only inside the blob
    assert quasar["event_id"] == ids["blob"] and quasar["kind"] == "tool_result"
    assert quasar["on_head_path"] is True


def test_filters_narrow_the_hits(served: Served) -> None:
    ids = seed(served)
    only = served.search(q="tokenizer", session=ids["other"])["hits"]
    assert [h["session_id"] for h in only] == [ids["other"]]
    in_dir = served.search(q="tokenizer", dir="/src")["hits"]
    assert in_dir and {h["session_id"] for h in in_dir} == {ids["fix"]}
    results = served.search(q="parser", kind="tool_result")["hits"]
    assert results and {h["kind"] for h in results} == {"tool_result"}
    assert len(served.search(q="tokenizer", limit=1)["hits"]) == 1
    assert served.search(q="nothingmatchesthis")["hits"] == []


def test_an_event_the_server_appends_is_found(served: Served) -> None:
    sid = served.client.post("/v1/sessions", json={}).json()["id"]
    body = {"text": "remember the zeppelin", "stream": True}
    with served.client.stream("POST", f"/v1/sessions/{sid}/prompt", json=body) as response:
        assert response.status_code == 200
        response.read()
    hits = served.search(q="zeppelin")["hits"]
    assert {h["role"] for h in hits} >= {"user"} and {h["session_id"] for h in hits} == {sid}


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"q": "x", "session": "01a23c3e-0ef2-75f6-a63c-b93f6c941fa3"}, "session"),
        ({"q": "x", "kind": "nonsense"}, "nonsense"),
        ({"q": '"unclosed phrase'}, "unclosed"),
    ],
)
def test_bad_requests_answer_400_naming_what_is_wrong(
    served: Served, params: dict[str, str], named: str
) -> None:
    assert named in served.search(400, **params)["error"]

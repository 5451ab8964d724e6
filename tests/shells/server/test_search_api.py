"""``GET /v1/search`` against the real app on a loopback port, driven with httpx.

Sessions are written through the store (two sessions, one with a branch left
behind), then searched over HTTP: ranked hits with the fields a client needs,
every branch (not only HEAD's path), each filter, the index catching up with an
event the server's own turn appended, and each way a request can be wrong
answered 400 with a message that names the parameter.
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
from infai.store import MessageRecord, Store, ToolCallRecord, ToolResultRecord

TOKEN = "test-token-0123456789abcdef"


class Served:
    def __init__(self, tmp_path: Path) -> None:
        self.store = Store(tmp_path / "home")
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


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path)
    yield s
    s.close()


def seed(store: Store) -> dict[str, str]:
    """Two sessions: ``fix`` (in /src/app) with a branch that was left, ``other`` (in /tmp)."""
    fix = store.create_session(name="fix the parser", working_dir="/src/app").id
    other = store.create_session(name="other", working_dir="/tmp").id
    with store.open_writer(fix) as writer:
        root = writer.append(MessageRecord(content="the parser drops quoted strings"), "user")
        left = writer.append(MessageRecord(content="try a tokenizer rewrite"), "assistant")
        call = ToolCallRecord(call_id="c1", name="bash", arguments={"command": "pytest parser"})
        kept = writer.append(call, "assistant", parent=root.id)  # a fork: `left` is behind
        out = ToolResultRecord(call_id="c1", name="bash", content="3 failed: parser tokenizer")
        writer.append(out, "tool")
    with store.open_writer(other) as writer:
        writer.append(MessageRecord(content="unrelated tokenizer notes"), "user")
    return {"fix": fix, "other": other, "left": left.id, "kept": kept.id, "root": root.id}


def test_hits_are_ranked_with_their_session_branch_and_snippet(served: Served) -> None:
    ids = seed(served.store)
    data = served.search(q="tokenizer")
    assert data["query"] == "tokenizer"
    hits = data["hits"]
    assert {h["event_id"] for h in hits} >= {ids["left"]}
    assert {h["session_id"] for h in hits} == {ids["fix"], ids["other"]}
    left = next(h for h in hits if h["event_id"] == ids["left"])
    assert left["on_head_path"] is False  # found on the branch that was left
    assert left["session_name"] == "fix the parser" and left["working_dir"] == "/src/app"
    assert left["kind"] == "message" and left["role"] == "assistant" and left["timestamp"]
    start, end = left["marks"][0]
    assert left["snippet"][start:end].lower() == "tokenizer"
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)  # best first
    on_head = [h for h in hits if h["session_id"] == ids["fix"] and h["on_head_path"]]
    assert on_head and on_head[0]["kind"] == "tool_result"


def test_filters_narrow_the_hits(served: Served) -> None:
    ids = seed(served.store)
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
        ({}, "q"),
        ({"q": ""}, "q"),
        ({"q": "x", "limit": "0"}, "limit"),
        ({"q": "x", "limit": "201"}, "limit"),
        ({"q": "x", "limit": "ten"}, "limit"),
        ({"q": "x", "session": "not-a-uuid"}, "session"),
        ({"q": "x", "session": "01a23c3e-0ef2-75f6-a63c-b93f6c941fa3"}, "session"),
        ({"q": "x", "kind": "nonsense"}, "nonsense"),
        ({"q": '"unclosed phrase'}, "unclosed"),
    ],
)
def test_bad_requests_answer_400_naming_what_is_wrong(
    served: Served, params: dict[str, str], named: str
) -> None:
    error = served.search(400, **params)["error"]
    assert named in error


def test_search_needs_the_token_and_is_in_the_openapi_document(served: Served) -> None:
    anonymous = httpx.get(f"{served.server.url}/v1/search", params={"q": "x"}, timeout=10)
    assert anonymous.status_code == 401
    document = served.client.get("/v1/openapi.json").json()
    operation = document["paths"]["/v1/search"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {"q", "session", "dir", "kind", "limit"}
    assert set(operation["responses"]) >= {"200", "400", "401", "503"}

"""The HTTP API's edges: the token, bad requests, the OpenAPI document.

A property-based check generates requests from the served OpenAPI document
(paths, parameters and bodies, valid and not) and requires that no answer is a
5xx, that every status is one the document lists for that operation, and that
every JSON answer of success matches the schema the document gives for it.
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Route
from test_server import AUTH, TOKEN, Gated, Running, harnesses

from infai.shells.server.api import COMPONENTS, MAX_BODY, OPERATIONS, validate
from infai.shells.server.auth import TokenError, load_token
from infai.shells.server.workfiles import FILE_COMPONENTS, FILE_OPERATIONS

# the files routes' operations and schemas are described beside the API's table
ALL_OPERATIONS = (*OPERATIONS, *FILE_OPERATIONS)
ALL_COMPONENTS = {**COMPONENTS, **FILE_COMPONENTS}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.fixture
def make(tmp_path: Path, work: Path) -> Iterator[Callable[..., Running]]:
    yield from harnesses(tmp_path / "home", work)


# -- the token -----------------------------------------------------------------


def test_every_route_but_health_needs_the_token(make: Callable[..., Running]) -> None:
    h = make()
    sid = h.new_session()
    bare = httpx.Client(base_url=h.url, timeout=10)
    h.closing.append(bare)
    assert bare.get("/v1/health").json()["status"] == "ok"
    assert bare.get("/v1/openapi.json").json()["openapi"].startswith("3.1")
    unknown = str(uuid.uuid4())
    answers = []
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"},
                    {"Authorization": f"Basic {TOKEN}"}, {"Authorization": TOKEN}):  # fmt: skip
        for method, path in [
            ("GET", "/v1/sessions"),
            ("GET", f"/v1/sessions/{sid}"),
            ("GET", f"/v1/sessions/{unknown}"),
            ("GET", f"/v1/sessions/{sid}/stream"),
            ("DELETE", f"/v1/sessions/{sid}"),
            ("POST", f"/v1/sessions/{unknown}/prompt"),
            ("GET", "/v1/no-such-route"),
        ]:
            response = bare.request(method, path, headers=headers, json={"text": "hi"})
            assert response.headers["www-authenticate"] == 'Bearer realm="infai"'
            answers.append((response.status_code, response.content))
    assert set(answers) == {answers[0]} and answers[0][0] == 401
    assert sid.encode() not in answers[0][1]
    assert h.sessions.open == {} and len(h.store.list_sessions()) == 1
    assert bare.get("/v1/sessions", headers=AUTH).status_code == 200


def test_the_token_file_is_made_once_with_mode_0600(tmp_path: Path) -> None:
    home = tmp_path / "home"
    token, where = load_token(home)
    assert where == str(home / "server-token") and len(token) >= 32
    assert stat.S_IMODE(os.stat(where).st_mode) == 0o600
    assert load_token(home) == (token, where)
    assert load_token(home, "given-token-0123456789") == ("given-token-0123456789", "given")
    os.chmod(where, 0o644)
    with pytest.raises(TokenError, match="readable by others"):
        load_token(home)
    with pytest.raises(TokenError, match="at least 16"):
        load_token(home, "short")


# -- bad requests ----------------------------------------------------------------

SID = "{sid}"
BAD = [
    ("POST", "/v1/sessions/{sid}/prompt", b"{not json", 400, "malformed JSON"),
    ("POST", "/v1/sessions/{sid}/prompt", b"[1, 2]", 422, "body: expected object, got array"),
    ("POST", "/v1/sessions/{sid}/prompt", b"{}", 422, "missing field 'text'"),
    ("POST", "/v1/sessions/{sid}/prompt", b"", 422, "a JSON object is required"),
    ("POST", "/v1/sessions/{sid}/prompt", b'{"text": 3}', 422, "body.text: expected string"),
    ("POST", "/v1/sessions/{sid}/prompt", b'{"text": ""}', 422, "body.text: must not be empty"),
    ("POST", "/v1/sessions/{sid}/prompt", b'{"text": "\\ud800"}', 422, "not valid text"),
    ("POST", "/v1/sessions/{sid}/prompt", b'{"text": "x", "mode": 1}', 422, "unknown field 'mode'"),
    ("POST", "/v1/sessions/{sid}/prompt", b'{"text": "x", "from": "e1"}', 422, "not a UUID"),
    ("POST", "/v1/sessions/{sid}/prompt", b"[" * 100_000, 400, "malformed JSON"),
    ("POST", "/v1/sessions/{sid}/prompt", b'{"text": "\xff"}', 400, "malformed JSON"),
    ("POST", "/v1/sessions/not-a-uuid/prompt", b'{"text": "x"}', 400, "is not a UUID"),
    ("POST", "/v1/sessions/{missing}/prompt", b'{"text": "x"}', 404, "no session"),
    ("POST", "/v1/sessions", b'{"working_dir": "relative"}', 422, "not an absolute directory"),
    ("POST", "/v1/sessions", b'{"model": "no-such-model"}', 422, "body.model: unknown model"),
    ("POST", "/v1/sessions", b'{"name": null}', 422, "body.name: expected string, got null"),
    ("POST", "/v1/sessions/{sid}/approvals", b'{"id": "{sid}", "answer": "maybe"}', 422,
     "body.answer: must be one of 'allow', 'allow-always', 'deny'"),
    ("POST", "/v1/sessions/{sid}/approvals", b'{"id": "{sid}", "answer": "deny"}', 404,
     "no pending question"),
    ("POST", "/v1/sessions/{sid}/select", b'{"event_id": "{missing}"}', 404, "no event"),
    ("POST", "/v1/sessions/{sid}/compact", b'{"now": true}', 422, "unknown field 'now'"),
    ("POST", "/v1/sessions/{sid}/cancel", b"", 409, "no turn is in flight"),
    ("GET", "/v1/sessions/{sid}/events?all=perhaps", b"", 400, "expected true or false"),
    ("GET", "/v1/sessions/{sid}/context?at=nope", b"", 400, "query parameter at"),
    ("GET", "/v1/sessions/{sid}/events/{missing}", b"", 404, "no event"),
    ("PUT", "/v1/sessions/{sid}", b"", 405, "Method Not Allowed"),
    ("PATCH", "/v1/sessions/{sid}", b'{"name": 5}', 422, "body.name: expected string or null"),
    ("PATCH", "/v1/sessions/{sid}", b"{}", 422, "missing field 'name'"),
    ("PATCH", "/v1/sessions/{sid}", b'{"model": "x", "name": "n"}', 422, "unknown field 'model'"),
    ("PATCH", "/v1/sessions/{missing}", b'{"name": "n"}', 404, "no session"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "status", "message"), BAD)
def test_a_bad_request_says_what_was_wrong_and_changes_nothing(
    make: Callable[..., Running], method: str, path: str, body: bytes, status: int, message: str
) -> None:
    h = make()
    sid = h.new_session()
    before = h.detail(sid)
    missing = str(uuid.uuid4())
    url = path.replace("{sid}", sid).replace("{missing}", missing)
    response = h.client.request(
        method, url, content=body.replace(b"{sid}", sid.encode()).replace(
            b"{missing}", missing.encode()
        ),
    )  # fmt: skip
    assert response.status_code == status, response.text
    assert message in response.json()["error"]
    assert h.sessions.open == {}  # nothing opened the session's writer
    assert [i.id for i in h.store.list_sessions()] == [sid]
    assert h.detail(sid) == before


def test_a_body_too_large_is_refused_unread(make: Callable[..., Running]) -> None:
    h = make()
    sid = h.new_session()
    text = "x" * (MAX_BODY + 1)
    response = h.client.post(f"/v1/sessions/{sid}/prompt", json={"text": text})
    assert response.status_code == 413 and "larger than" in response.json()["error"]
    assert h.detail(sid)["events"] == 0


# -- a session's answer ------------------------------------------------------------


def test_a_sessions_answer_says_its_context_window_and_the_tokens_used(
    make: Callable[..., Running],
) -> None:
    """What a client's status bar shows: the window of the session's model and what
    the next request holds (the reply's reported usage), without opening it."""
    h = make()
    sid = h.new_session()
    fresh = h.detail(sid)
    assert (fresh["used_tokens"], fresh["context_window"], fresh["open"]) == (0, 32_000, False)
    h.prompt(sid, "hello there")
    h.wait(lambda: h.detail(sid)["turn"] is None and h.detail(sid)["events"] == 2)
    reply_id = h.client.get(f"/v1/sessions/{sid}/head").json()["head"]
    usage = h.client.get(f"/v1/sessions/{sid}/events/{reply_id}").json()["record"]["usage"]
    detail = h.detail(sid)
    assert detail["used_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0
    assert detail["context_window"] == 32_000


def test_a_sessions_answer_names_the_model_its_next_prompt_uses(
    make: Callable[..., Running], tmp_path: Path
) -> None:
    """A session made without a model runs on the server's default: the answer names
    it (a client shows it), as it names a session's own model, open or not."""
    h = make()
    default = h.new_session()
    assert (h.detail(default)["model"], h.detail(default)["model_in_use"]) == (None, "offline")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["hi"]))
    own = h.new_session(model=f"scripted:{script}")
    assert h.detail(own)["model_in_use"] == f"scripted:{script}"
    h.prompt(default, "hello there")
    h.wait(lambda: h.detail(default)["turn"] is None and h.detail(default)["events"] == 2)
    assert h.detail(default)["model_in_use"] == "offline"


def test_a_session_is_renamed_while_its_turn_runs_and_named_none_again(
    make: Callable[..., Running],
) -> None:
    """``PATCH`` names a session (the metadata only, under the running turn's own
    writer lock), what every listing shows; null or "" takes the name away."""
    gated = Gated("the reply")  # the turn holds the writer until it is released
    h = make(lambda name: gated)
    sid = h.new_session()
    h.prompt(sid, "hello")
    h.wait(lambda: h.detail(sid)["turn"] is not None)
    renamed = h.client.patch(f"/v1/sessions/{sid}", json={"name": "the plan"})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["name"] == "the plan"
    assert h.detail(sid)["name"] == "the plan" and h.detail(sid)["turn"] is not None
    [listed] = h.client.get("/v1/sessions").json()["sessions"]
    assert (listed["name"], listed["title"]) == ("the plan", "the plan")
    gated.release()
    h.wait(lambda: h.detail(sid)["turn"] is None)
    assert h.client.patch(f"/v1/sessions/{sid}", json={"name": ""}).json()["name"] is None
    assert h.client.patch(f"/v1/sessions/{sid}", json={"name": None}).status_code == 200
    assert h.detail(sid)["name"] is None and h.detail(sid)["events"] == 2


# -- the OpenAPI document ----------------------------------------------------------


def test_the_document_lists_exactly_the_routes(make: Callable[..., Running]) -> None:
    h = make()
    doc = h.client.get("/v1/openapi.json").json()
    documented = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    routed = {(m, r.path) for r in h.app.routes if isinstance(r, Route) for m in r.methods or ()}
    assert documented == routed - {("HEAD", p) for _, p in routed}
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids)) == len(ALL_OPERATIONS)
    for item in doc["paths"].values():
        for op in item.values():
            assert ("401" in op["responses"]) == (op.get("security") != [])
            for answer in op["responses"].values():
                ref = answer.get("content", {}).get("application/json", {}).get("schema", {})
                if "$ref" in ref:
                    assert ref["$ref"].rsplit("/", 1)[-1] in doc["components"]["schemas"]
    assert doc["components"]["schemas"] == ALL_COMPONENTS


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = ALL_COMPONENTS[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values meant to fit ``schema`` (strings may still be refused: a path, a surrogate)."""
    schema = _resolve(schema)
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([from_schema(s) for s in schema["anyOf"]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}) for k in kind])
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {k: from_schema(v) for k, v in props.items() if k in required},
            optional={k: from_schema(v) for k, v in props.items() if k not in required},
        )
    if kind == "string":
        if schema.get("format") == "uuid":
            return st.uuids().map(str)
        low = schema.get("minLength", 0)
        return st.text(min_size=low, max_size=max(low, min(schema.get("maxLength", 30), 30)))
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers()
    if kind == "null":
        return st.none()
    return st.nothing()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
#: not ids; a segment of dots only is path syntax (the client resolves it away), not an id
JUNK_ID = st.text("abcdef0123456789-xyz.", min_size=1, max_size=40).filter(lambda t: t.strip("."))


class Probe(Running):
    """A server with one session kept alive, and its OpenAPI document."""

    sid: str | None = None

    def __init__(self, home: Path, work: Path) -> None:
        super().__init__(home, work)
        self.bare = httpx.Client(base_url=self.url, timeout=10)  # without the token

    def close(self) -> None:
        self.bare.close()
        super().close()

    @property
    def doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = self.client.get("/v1/openapi.json").json()
        return doc

    def alive(self) -> str:
        if self.sid is None or self.client.get(f"/v1/sessions/{self.sid}").status_code == 404:
            self.sid = self.new_session()
            with self.watch(self.sid) as (stream, _):
                self.prompt(self.sid, "hello")
                stream.until("turn_ended")
        return self.sid

    def event_ids(self, sid: str) -> list[str]:
        response = self.client.get(f"/v1/sessions/{sid}/events", params={"all": "true"})
        return [e["id"] for e in response.json()["events"]] if response.status_code == 200 else []

    @staticmethod
    def known(values: list[str]) -> st.SearchStrategy[str]:
        """One of ``values``, drawn the same way however many there are (hypothesis
        replays draws, and the session grows between examples)."""
        return st.integers(0, 2**16).map(lambda i: values[i % len(values)])

    def request(self, data: st.DataObject) -> None:
        """Draw one request from the document, send it, check the answer against it."""
        doc = self.doc
        routes = [(p, m) for p, item in doc["paths"].items() for m in item]
        path, method = data.draw(st.sampled_from(routes), "route")
        op = doc["paths"][path][method]
        sid = self.alive()
        event_ids = self.event_ids(sid)
        client = self.client if data.draw(st.integers(0, 9), "with token") else self.bare
        headers: dict[str, str] = {}
        query: dict[str, str] = {}
        url = path
        for param in op.get("parameters", []):
            name, where = param["name"], param["in"]
            if where == "path":
                known = [sid] if name == "session_id" else event_ids or [sid]
                choices = [self.known(known), self.known(known), st.uuids().map(str), JUNK_ID]
                url = url.replace("{" + name + "}", data.draw(st.one_of(choices), name))
                continue
            if not data.draw(st.booleans(), f"give {name}"):
                continue
            if param["schema"].get("type") == "boolean":
                value = data.draw(st.sampled_from(["true", "false", "1", "0", "yes"]), name)
            else:
                value = data.draw(self.known([*event_ids, sid]) | JUNK_ID, name)
            (query if where == "query" else headers)[name] = value
        content = b""
        if "requestBody" in op:
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            content = data.draw(
                st.one_of(
                    from_schema(schema).map(lambda v: json.dumps(v).encode()),
                    JSON.map(lambda v: json.dumps(v).encode()),
                    st.binary(max_size=20),
                ),
                "body",
            )
        with client.stream(method, url, params=query, headers=headers, content=content) as response:
            status = response.status_code
            payload = b"" if op["operationId"] == "stream" and status == 200 else response.read()
        assert status < 500, payload
        assert str(status) in op["responses"], (status, payload)
        answer = op["responses"][str(status)]
        schema = answer.get("content", {}).get("application/json", {}).get("schema")
        if schema is not None:
            problem = validate(json.loads(payload), schema, "response")
            assert problem is None, problem


def test_requests_made_from_the_document_get_documented_answers(tmp_path: Path, work: Path) -> None:
    probe = Probe(tmp_path / "home", work)

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        probe.request(data)

    try:
        check()
    finally:
        probe.close()

"""``GET /v1/sessions/{id}/events/{eid}/manifest``: the tools a reply's request was
offered, the digest in the event's own JSON, and a clear 404 for an event that names
none or a manifest that is gone (issue 16)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_server import Running, harnesses

from infai.llm import ScriptedModel
from infai.shells.server.api import COMPONENTS, validate


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    work = tmp_path / "work"
    work.mkdir()
    yield from harnesses(tmp_path / "home", work)


def test_a_reply_s_manifest_is_served_and_a_gone_one_is_a_clear_404(
    make: Callable[..., Running],
) -> None:
    h = make(lambda name: ScriptedModel(["hello"]))
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "hi")
        seen = stream.until("turn_ended")
    prompt, reply = [e.data for e in seen if e.name == "settled"]
    digest = reply["record"]["metadata"]["tool_manifest"]  # in the event's own JSON
    assert digest.startswith("sha256:")

    answer = h.client.get(f"/v1/sessions/{sid}/events/{reply['id']}/manifest")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert validate(body, COMPONENTS["ToolManifest"]) is None
    names = [t["name"] for t in body["tools"]]
    assert body["digest"] == digest and "bash" in names and "task" in names
    assert names == sorted(names)

    none = h.client.get(f"/v1/sessions/{sid}/events/{prompt['id']}/manifest")
    assert none.status_code == 404
    assert none.json() == {"error": f"event {prompt['id']} names no tool manifest"}

    h.store.objects.remove([digest])
    gone = h.client.get(f"/v1/sessions/{sid}/events/{reply['id']}/manifest")
    assert gone.status_code == 404
    assert gone.json()["error"] == (
        f"event {reply['id']}: its tool manifest {digest} is not in the store"
    )

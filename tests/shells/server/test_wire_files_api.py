"""Files on the timeline over HTTP: files, diff, checkout, and the restore (or its
409 question) before a prompt that continues from an older event (issue 14)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_server import Running, harnesses

from infai.llm import ScriptedModel
from infai.shells.server.api import validate
from infai.shells.server.openapi import openapi
from infai.shells.server.workfiles import FILE_COMPONENTS


@pytest.fixture(autouse=True)
def checkpoints_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """An app built without a harness takes no snapshots; these tests are about them."""
    from infai.agent import CheckpointSettings
    from infai.shells.server import app

    monkeypatch.setattr(app, "EMBEDDED_CHECKPOINTS", CheckpointSettings())


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    return root


@pytest.fixture
def make(tmp_path: Path, work: Path) -> Iterator[Callable[..., Running]]:
    yield from harnesses(tmp_path / "home", work)


def turn(h: Running, sid: str, text: str, **more: Any) -> list[dict[str, Any]]:
    """Run a turn; the settled events it made."""
    with h.watch(sid) as (stream, _):
        h.prompt(sid, text, **more)
        seen = stream.until("turn_ended")
    return [e.data for e in seen if e.name == "settled"]


def test_files_diff_checkout_and_the_409_question(make: Callable[..., Running], work: Path) -> None:
    h = make(lambda name: ScriptedModel(["ok"] * 10))
    sid = h.new_session()
    first = turn(h, sid, "one")
    assert first[0]["kind"] == "snapshot" and first[0]["record"]["reason"] == "turn start"
    end_one = first[-1]["id"]
    (work / "a.txt").write_text("two\n")  # the user's edit between turns
    second = turn(h, sid, "two")
    assert second[0]["kind"] == "snapshot"
    end_two = second[-1]["id"]

    files = h.client.get(f"/v1/sessions/{sid}/files", params={"event": end_one})
    assert files.status_code == 200, files.text
    assert validate(files.json(), FILE_COMPONENTS["Files"]) is None
    assert [f["path"] for f in files.json()["files"]] == ["a.txt"]
    diff = h.client.get(f"/v1/sessions/{sid}/diff", params={"from": end_one, "to": end_two})
    assert diff.status_code == 200 and "+two" in diff.json()["text"][0]["diff"]
    missing = h.client.get(f"/v1/sessions/{sid}/diff")  # from is required
    assert missing.status_code == 400 and "from" in missing.json()["error"]

    # continuing from the first turn's end would overwrite the user's edit, recorded
    # by the second turn's start: a question first (issue 24), then its files
    asked = h.client.post(f"/v1/sessions/{sid}/prompt", json={"text": "again", "from": end_one})
    assert asked.status_code == 409, asked.text
    assert asked.json()["plan"]["hand_made"] == asked.json()["plan"]["conflicts"] == ["a.txt"]
    assert (work / "a.txt").read_text() == "two\n"
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "again", **{"from": end_one, "force": True})
        seen = stream.until("turn_ended")
    back = [e.data for e in seen if e.name == "settled"]
    assert (work / "a.txt").read_text() == "one\n"
    said = [json.dumps(e.data, ensure_ascii=False) for e in seen if e.name != "settled"]
    assert any("restored 1 file: a.txt (+1 -1)" in x for x in said), said  # a notice
    assert [e["kind"] for e in back][:2] == ["restore", "message"]
    assert back[0]["parent_id"] == end_one

    # an edit outside the agent: the next continue is a question, nothing changed
    (work / "a.txt").write_text("mine\n")
    asked = h.client.post(f"/v1/sessions/{sid}/prompt", json={"text": "forward", "from": end_two})
    assert asked.status_code == 409, asked.text
    body = asked.json()
    assert validate(body, FILE_COMPONENTS["RestoreRefused"]) is None
    assert body["plan"]["conflicts"] == ["a.txt"]
    assert (work / "a.txt").read_text() == "mine\n"
    kept = turn(h, sid, "forward", **{"from": end_two, "keep": ["a.txt"]})
    assert (work / "a.txt").read_text() == "mine\n"  # kept, as asked
    assert kept[0]["kind"] == "snapshot" and kept[0]["record"]["reason"] == "before restore"

    # checkout: dry run changes nothing; 409 over a conflict; force takes it
    dry = h.client.post(f"/v1/sessions/{sid}/checkout", json={"event": end_two, "dry_run": True})
    assert dry.status_code == 200 and dry.json()["restore"] is None
    assert [a["path"] for a in dry.json()["plan"]["actions"]] == ["a.txt"]
    assert (work / "a.txt").read_text() == "mine\n"
    # "mine", recorded by the turn's start, is the user's: asked about, then taken
    asked = h.client.post(f"/v1/sessions/{sid}/checkout", json={"event": end_two})
    assert asked.status_code == 409 and asked.json()["plan"]["hand_made"] == ["a.txt"]
    assert (work / "a.txt").read_text() == "mine\n"
    done = h.client.post(f"/v1/sessions/{sid}/checkout", json={"event": end_two, "force": True})
    assert done.status_code == 200, done.text
    assert validate(done.json(), FILE_COMPONENTS["Checkout"]) is None
    assert (work / "a.txt").read_text() == "two\n"
    assert done.json()["changed"] == [
        {"path": "a.txt", "change": "modified", "added": 1, "removed": 1}
    ]
    assert "restored 1 file: a.txt (+1 -1)" in done.json()["notices"]


def test_a_summarised_select_restores_the_event_files_or_asks(
    make: Callable[..., Running], work: Path
) -> None:
    h = make(lambda name: ScriptedModel(["ok", "ok", "the branch left: two"]))
    sid = h.new_session()
    end_one = turn(h, sid, "one")[-1]["id"]
    (work / "a.txt").write_text("two\n")
    turn(h, sid, "two")
    (work / "a.txt").write_text("mine\n")  # outside the agent: the switch is a question
    url = f"/v1/sessions/{sid}/select"
    asked = h.client.post(url, json={"event_id": end_one, "summarize": True})
    assert asked.status_code == 409, asked.text
    assert validate(asked.json(), FILE_COMPONENTS["RestoreRefused"]) is None
    assert asked.json()["plan"]["conflicts"] == ["a.txt"]
    assert (work / "a.txt").read_text() == "mine\n"
    with h.watch(sid) as (stream, _):
        done = h.client.post(url, json={"event_id": end_one, "summarize": True, "force": True})
        assert done.status_code == 200, done.text
        summary = done.json()["summary"]
        assert summary["kind"] == "branch_summary" and summary["parent_id"] == end_one
        assert (work / "a.txt").read_text() == "one\n"
        settled = [e.data for e in stream.until("selected") if e.name == "settled"]
    kinds = [e["kind"] for e in settled]
    assert kinds == ["snapshot", "branch_summary", "restore"]  # "mine" kept on the branch left
    assert settled[0]["record"]["reason"] == "before switch"
    assert done.json()["head"] == settled[-1]["id"]


def test_the_files_routes_are_in_the_openapi_document() -> None:
    paths = openapi("test")["paths"]
    assert "get" in paths["/v1/sessions/{session_id}/files"]
    assert "get" in paths["/v1/sessions/{session_id}/diff"]
    checkout = paths["/v1/sessions/{session_id}/checkout"]["post"]
    assert "409" in checkout["responses"]
    prompt = paths["/v1/sessions/{session_id}/prompt"]["post"]
    body = prompt["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert {"force", "keep", "keep_files"} <= set(body)
    select = paths["/v1/sessions/{session_id}/select"]["post"]
    body = select["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert {"force", "keep", "keep_files"} <= set(body)

"""OpenCode's prune (old tool outputs marked ``state.time.compacted``) is recorded,
and a resumed session sends what OpenCode's model saw.

OpenCode keeps a pruned output in its storage and sends its model
``[Old tool result content cleared]`` in its place. The output is imported
whole (searchable, shown), the prune recorded in the session's import metadata
and the report, and infai's context sends the placeholder in its place. OpenCode prunes parts
long after they were written: a prune after an import must not make the
imported event "changed" (a revision would copy the rest of the session), and
must be recorded even when it brought no new message. A synthetic storage tree
in OpenCode's JSON-file layout (the corpus holds none, and no prune).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from infai.agent import AgentSession
from infai.imports import commit, importer_for
from infai.llm import ScriptedModel
from infai.store import Store, ToolResultRecord
from infai.tools import AllowAll, Toolbox

SID = "ses_0000000000000000000000000d"
PLACEHOLDER = "[Old tool result content cleared]"


def _message(mid: str, n: int, role: str, parts: list[dict[str, Any]]) -> Any:
    info: dict[str, Any] = {"id": mid, "sessionID": SID, "role": role}
    info["time"] = {"created": 1000 + n, "completed": 1000 + n}
    if role == "assistant":
        info |= {"modelID": "m"}
    return mid, info, parts


def _read(mid: str, output: str, pruned: int | None) -> list[dict[str, Any]]:
    state: dict[str, Any] = {"status": "completed", "input": {"path": "a"}, "output": output}
    state["time"] = {"start": 2000, "end": 2001} | ({"compacted": pruned} if pruned else {})
    tool = {"id": f"prt_{mid}b", "type": "tool", "tool": "read", "callID": f"c{mid}"}
    return [{"id": f"prt_{mid}a", "type": "text", "text": "reading"}, tool | {"state": state}]


def _chat(pruned: int | None, more: bool) -> list[Any]:
    chat = [
        _message("msg_01", 1, "user", [{"id": "prt_01a", "type": "text", "text": "read a"}]),
        _message("msg_02", 2, "assistant", _read("02", "the whole of a, " * 50, pruned)),
        _message("msg_03", 3, "user", [{"id": "prt_03a", "type": "text", "text": "thanks"}]),
        _message("msg_04", 4, "assistant", [{"id": "prt_04a", "type": "text", "text": "ok"}]),
    ]
    if more:
        chat.append(_message("msg_05", 5, "user", [{"id": "prt_05a", "type": "text", "text": "b"}]))
        chat.append(_message("msg_06", 6, "assistant", [{"id": "prt_06a", "type": "text"}]))
        chat[-1][2][0]["text"] = "done"
    return chat


def _storage(root: Path, chat: list[Any]) -> Path:
    info = {"id": SID, "title": "t", "directory": "/d", "time": {"created": 1000}}
    files: dict[str, Any] = {f"session/global/{SID}.json": info}
    for mid, message, parts in chat:
        files[f"message/{SID}/{mid}.json"] = message
        for part in parts:
            part = part | {"messageID": mid, "sessionID": SID}
            files[f"part/{mid}/{part['id']}.json"] = part
    for rel, obj in files.items():
        path = root / "storage" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj))
    return root / "storage"


def _import(store: Store, storage: Path) -> Any:
    importer = importer_for("opencode")
    (foreign,) = [f for p in importer.find(storage) for f in importer.load(p)]
    return foreign, commit(store, foreign)


def _results(store: Store, sid: str) -> list[Any]:
    with store.open_reader(sid) as reader:
        events = [reader.event(e.id, resolve=True) for e in reader.entries()]
    return [e for e in events if isinstance(e.record, ToolResultRecord)]


def test_a_pruned_output_is_kept_whole_and_the_prune_recorded(tmp_path: Path) -> None:
    storage = _storage(tmp_path / "a", _chat(pruned=1_700_000_000_000, more=False))
    store = Store(tmp_path / "home")
    foreign, outcome = _import(store, storage)
    (result,) = _results(store, outcome.session_id)
    assert result.record.content.startswith("the whole of a")  # kept, and searchable
    assert "compacted" not in result.record.metadata["opencode"]["time"]
    pruned = store.info(outcome.session_id).extra["import"]["pruned"]
    assert pruned == {"placeholder": PLACEHOLDER, "events": {result.id: "2023-11-14T22:13:20.000Z"}}
    assert any("1 tool outputs were pruned by OpenCode" in w for w in foreign.report.warnings)
    assert _import(store, storage)[1].status == "unchanged"


def test_a_prune_after_the_import_adds_only_the_new_messages(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    _, first = _import(store, _storage(tmp_path / "a", _chat(pruned=None, more=False)))
    sid = first.session_id
    assert "pruned" not in store.info(sid).extra["import"]
    (before,) = _results(store, sid)
    # OpenCode went on, and its prune marked the old read output
    foreign, grown = _import(store, _storage(tmp_path / "b", _chat(pruned=5000, more=True)))
    assert (grown.status, grown.added) == ("grown", 2)
    assert [r.id for r in _results(store, sid)] == [before.id]  # not revised, not copied
    assert not [w for w in foreign.report.warnings if "changed" in w]
    assert list(store.info(sid).extra["import"]["pruned"]["events"]) == [before.id]


def test_a_prune_with_no_new_message_is_still_recorded(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    _, first = _import(store, _storage(tmp_path / "a", _chat(pruned=None, more=False)))
    sid = first.session_id
    _, again = _import(store, _storage(tmp_path / "b", _chat(pruned=5000, more=False)))
    assert (again.status, again.added) == ("unchanged", 0)
    (result,) = _results(store, sid)
    assert store.info(sid).extra["import"]["pruned"]["events"] == {
        result.id: "1970-01-01T00:00:05.000Z"
    }


def test_a_resumed_session_sends_the_placeholder_for_a_pruned_output(tmp_path: Path) -> None:
    sent = {}
    for name, pruned in (("pruned", 5000), ("whole", None)):
        store = Store(tmp_path / name / "home")
        _, outcome = _import(store, _storage(tmp_path / name, _chat(pruned=pruned, more=False)))
        sid = outcome.session_id
        store.update_info(sid, working_dir=str(tmp_path))
        model = ScriptedModel(["again"])
        session = AgentSession(store, sid, model=model, toolbox=Toolbox(), permissions=AllowAll())

        async def turn(session: AgentSession = session) -> None:
            async for _ in session.prompt("go on"):
                pass
            await session.aclose()

        asyncio.run(turn())
        (request,) = model.requests
        sent[name] = [m.content for m in request.messages if m.role == "tool"]
        (kept,) = _results(store, sid)
        assert kept.record.content.startswith("the whole of a")  # the store keeps it whole
    assert sent == {"pruned": [PLACEHOLDER], "whole": ["the whole of a, " * 50]}

"""OpenCode's pending revert inside a message (``partID``) is applied, nothing lost.

OpenCode's ``session.revert = {messageID, partID}`` shows the session without
that message's parts from ``partID`` on and without the later messages; its
next prompt deletes them (``SessionRevert.cleanup``). The import puts HEAD on
what OpenCode keeps, and leaves the reverted parts and messages on a branch
beside it. A synthetic storage tree in OpenCode's JSON-file layout (the corpus
holds none).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infai.imports import commit, importer_for
from infai.store import Store, ToolCallRecord, ToolResultRecord

SID = "ses_0000000000000000000000000c"


def _tool(pid: str, name: str, output: str) -> dict[str, Any]:
    state = {"status": "completed", "input": {"x": name}, "output": output}
    state["time"] = {"start": 2000, "end": 2001}
    return {"id": pid, "type": "tool", "tool": name, "callID": f"call_{name}", "state": state}


def _reply(mid: str) -> list[dict[str, Any]]:
    """Two model requests (steps) in one assistant message, a tool call in each."""
    finish = {"type": "step-finish", "tokens": {"input": 10, "output": 5}, "cost": 0}
    return [
        {"id": f"prt_{mid}a", "type": "step-start"},
        {"id": f"prt_{mid}b", "type": "text", "text": "looking at A"},
        _tool(f"prt_{mid}c", "read", "contents of A"),
        {"id": f"prt_{mid}d"} | finish,
        {"id": f"prt_{mid}e", "type": "step-start"},
        {"id": f"prt_{mid}f", "type": "text", "text": "now B"},
        _tool(f"prt_{mid}g", "edit", "B edited"),
        {"id": f"prt_{mid}h"} | finish,
    ]


def _text(mid: str, text: str) -> list[dict[str, Any]]:
    return [{"id": f"prt_{mid}a", "type": "text", "text": text}]


def _storage(
    root: Path, messages: list[tuple[str, str, list[dict[str, Any]]]], revert: Any
) -> Path:
    info: dict[str, Any] = {"id": SID, "title": "t", "directory": "/d"}
    info["time"] = {"created": 1000, "updated": 9000}
    if revert:
        info["revert"] = revert
    files: dict[str, dict[str, Any]] = {f"session/global/{SID}.json": info}
    previous = None
    for n, (mid, role, parts) in enumerate(messages):
        message: dict[str, Any] = {"id": mid, "sessionID": SID, "role": role}
        message["time"] = {"created": 1000 + n, "completed": 1000 + n}
        if role == "assistant":
            message |= {"parentID": previous, "modelID": "m", "tokens": {"input": 1, "output": 1}}
        previous = mid
        files[f"message/{SID}/{mid}.json"] = message
        for part in parts:
            full = part | {"messageID": mid, "sessionID": SID}
            files[f"part/{mid}/{part['id']}.json"] = full
    for rel, obj in files.items():
        path = root / "storage" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj))
    return root / "storage"


CHAT = [
    ("msg_01", "user", _text("01", "fix A and B")),
    ("msg_02", "assistant", _reply("02")),
    ("msg_03", "user", _text("03", "and C")),
    ("msg_04", "assistant", _text("04", "C done")),
]


def _import(store: Store, storage: Path) -> Any:
    importer = importer_for("opencode")
    (foreign,) = [f for p in importer.find(storage) for f in importer.load(p)]
    return foreign, commit(store, foreign)


def _said(record: Any) -> str:
    if isinstance(record, ToolCallRecord):
        return f"call {record.name}"
    if isinstance(record, ToolResultRecord):
        return f"result {record.content}"
    return str(getattr(record, "content", None) or record.kind)


def _context(store: Store, sid: str) -> list[str]:
    with store.open_reader(sid) as reader:
        return [_said(e.record) for e in reader.context().events]


def _everything(store: Store, sid: str) -> list[str]:
    with store.open_reader(sid) as reader:
        return [_said(reader.event(e.id, resolve=True).record) for e in reader.entries()]


def test_a_revert_inside_a_step_keeps_its_earlier_parts_and_branches_the_rest(
    tmp_path: Path,
) -> None:
    revert = {"messageID": "msg_02", "partID": "prt_02g"}  # from the edit call on
    storage = _storage(tmp_path / "a", CHAT, revert)
    store = Store(tmp_path / "home")
    foreign, outcome = _import(store, storage)
    sid = outcome.session_id
    assert _context(store, sid) == [
        "fix A and B",
        "looking at A",
        "call read",
        "result contents of A",
        "now B",  # the second request, as OpenCode keeps it: its text, not its call
        "branch_summary",
    ]
    # nothing lost: the edit, its result and the later messages are on the branch
    everything = _everything(store, sid)
    for said in ("call edit", "result B edited", "and C", "C done"):
        assert said in everything
    with store.open_reader(sid) as reader:
        head = reader.event(str(reader.head)).record
        tips = [e.id for e in reader.leaves() if e.id != reader.head]
        (tip,) = tips
        assert _said(reader.event(tip).record) == "C done"
        assert getattr(head, "abandoned_tip", None) == tip
    assert any(
        "message msg_02 from its part prt_02g on" in w and "left on a branch" in w
        for w in foreign.report.warnings
    )
    assert not [w for w in foreign.report.warnings if "imported whole" in w]
    assert _import(store, storage)[1].status == "unchanged"  # idempotent


def test_a_revert_at_a_step_boundary_shares_the_first_step(tmp_path: Path) -> None:
    revert = {"messageID": "msg_02", "partID": "prt_02e"}  # the second request on
    store = Store(tmp_path / "home")
    _, outcome = _import(store, _storage(tmp_path / "a", CHAT, revert))
    sid = outcome.session_id
    assert _context(store, sid) == [
        "fix A and B",
        "looking at A",
        "call read",
        "result contents of A",
        "branch_summary",
    ]
    everything = _everything(store, sid)
    assert everything.count("looking at A") == 1  # the first step is shared, not copied
    assert everything.count("call read") == 1


def test_after_the_next_prompt_only_the_new_messages_are_added(tmp_path: Path) -> None:
    revert = {"messageID": "msg_02", "partID": "prt_02g"}
    store = Store(tmp_path / "home")
    _, outcome = _import(store, _storage(tmp_path / "a", CHAT, revert))
    sid = outcome.session_id
    before = len(_everything(store, sid))
    # OpenCode's cleanup at the next prompt: msg_02 loses its parts from prt_02g on,
    # later messages are deleted, the revert is cleared; then the new exchange
    cleaned = [
        CHAT[0],
        ("msg_02", "assistant", _reply("02")[:6]),
        ("msg_05", "user", _text("05", "only A then")),
        ("msg_06", "assistant", _text("06", "fine")),
    ]
    foreign, grown = _import(store, _storage(tmp_path / "b", cleaned, None))
    assert (grown.status, grown.added) == ("grown", 2)
    assert len(_everything(store, sid)) == before + 2
    assert not [w for w in foreign.report.warnings if "changed" in w]
    assert _context(store, sid) == [
        "fix A and B",
        "looking at A",
        "call read",
        "result contents of A",
        "now B",
        "only A then",
        "fine",
    ]


def test_a_revert_naming_a_part_not_in_the_message_imports_whole_and_says_so(
    tmp_path: Path,
) -> None:
    revert = {"messageID": "msg_02", "partID": "prt_99"}
    store = Store(tmp_path / "home")
    foreign, outcome = _import(store, _storage(tmp_path / "a", CHAT, revert))
    assert _context(store, outcome.session_id)[-1] == "C done"
    assert any("imported whole" in w and "prt_99" in w for w in foreign.report.warnings)

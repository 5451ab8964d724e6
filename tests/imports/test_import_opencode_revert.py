"""OpenCode's pending revert is applied: HEAD is before the reverted messages.

OpenCode shows a session with ``revert: {messageID}`` as it was before that
message, and deletes the reverted rows only at the next prompt. The import keeps
them (nothing lost) on a branch left beside a ``branch_summary`` that says what
happened, so resuming in infai goes on from where OpenCode would. A synthetic
storage tree in OpenCode's JSON-file layout (none is in the corpus).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infai.imports import commit, importer_for
from infai.store import Store

SID = "ses_0000000000000000000000000b"


def _storage(root: Path, messages: list[tuple[str, str, str]], revert: str | None) -> Path:
    info: dict[str, Any] = {"id": SID, "title": "t", "directory": "/d"}
    info["time"] = {"created": 1000, "updated": 9000}
    if revert:
        info["revert"] = {"messageID": revert}
    files: dict[str, dict[str, Any]] = {f"session/global/{SID}.json": info}
    previous = None
    for n, (mid, role, text) in enumerate(messages):
        message: dict[str, Any] = {"id": mid, "sessionID": SID, "role": role}
        message["time"] = {"created": 1000 + n, "completed": 1000 + n}
        if role == "assistant":
            message |= {"parentID": previous, "modelID": "m"}
        previous = mid
        files[f"message/{SID}/{mid}.json"] = message
        pid = f"prt_{mid[4:]}00"
        part = {"id": pid, "messageID": mid, "sessionID": SID, "type": "text", "text": text}
        files[f"part/{mid}/{pid}.json"] = part
    for rel, obj in files.items():
        path = root / "storage" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj))
    return root / "storage"


CHAT = [
    ("msg_01", "user", "make it blue"),
    ("msg_02", "assistant", "it is blue"),
    ("msg_03", "user", "now make it red"),
    ("msg_04", "assistant", "it is red"),
]


def _import(store: Store, storage: Path) -> Any:
    importer = importer_for("opencode")
    (foreign,) = [f for p in importer.find(storage) for f in importer.load(p)]
    return foreign, commit(store, foreign)


def _head_texts(store: Store, sid: str) -> list[str]:
    with store.open_reader(sid) as reader:
        return [getattr(e.record, "content", e.kind) for e in reader.context().events]


def test_a_pending_revert_puts_head_before_the_reverted_messages(tmp_path: Path) -> None:
    storage = _storage(tmp_path / "a", CHAT, revert="msg_03")
    store = Store(tmp_path / "home")
    foreign, outcome = _import(store, storage)
    assert any("pending revert" in w and "msg_03" in w for w in foreign.report.warnings)
    assert _head_texts(store, outcome.session_id) == [
        "make it blue",
        "it is blue",
        "branch_summary",
    ]
    with store.open_reader(outcome.session_id) as reader:
        head = reader.event(str(reader.head)).record
        left = [reader.event(e.id).record for e in reader.leaves() if e.id != reader.head]
    assert [getattr(r, "content", None) for r in left] == ["it is red"]  # kept, on a branch
    assert getattr(head, "abandoned_tip", None) is not None
    assert _import(store, storage)[1].status == "unchanged"


def test_after_the_next_prompt_the_new_work_follows_the_kept_messages(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    _, outcome = _import(store, _storage(tmp_path / "a", CHAT, revert="msg_03"))
    # the user prompted again in OpenCode: the reverted rows are gone, the revert cleared
    later = [*CHAT[:2], ("msg_05", "user", "make it green"), ("msg_06", "assistant", "green")]
    _, grown = _import(store, _storage(tmp_path / "b", later, revert=None))
    assert grown.status == "grown"
    assert _head_texts(store, outcome.session_id) == [
        "make it blue",
        "it is blue",
        "make it green",
        "green",
    ]


def test_a_revert_of_nothing_known_imports_whole_and_says_so(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    foreign, outcome = _import(store, _storage(tmp_path / "a", CHAT, revert="msg_99"))
    assert any("pending revert" in w and "imported whole" in w for w in foreign.report.warnings)
    assert _head_texts(store, outcome.session_id)[-1] == "it is red"

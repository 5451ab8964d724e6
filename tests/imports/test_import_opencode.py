"""OpenCode sessions import: the corpus capture, a storage tree and a database built from it.

The corpus holds no OpenCode storage, only the part objects its server streamed
(``../shared/corpus/opencode``, read at test time, never copied here). The
tests write those same parts into OpenCode's on-disk layout (``storage/
session|message|part``) and into an ``opencode.db`` in ``tmp_path``, adding the
session and message objects the capture lacks, and check all three import alike.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from import_corpus import corpus
from infai.imports import ForeignSession, ImportOutcome, commit
from infai.imports.opencode import OpenCodeImporter
from infai.store import (
    CompactionRecord,
    InvalidInput,
    MessageRecord,
    Store,
    StoreOptions,
    ToolCallRecord,
    ToolResultRecord,
)

PARENT = "ses_73c19e8fdffehMqnk5p2uH7inQ"
CHILD = "ses_73c17b38effegHkhEPaFTsNcwP"


def corpus_dir(tool: str) -> Path:
    return corpus() / tool


def capture() -> Path:
    return corpus_dir("opencode") / "goniz-opencode-ios" / "part_updated_events_compact.jsonl"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home", StoreOptions(lock_timeout=0.2))


def load(path: Path) -> list[ForeignSession]:
    importer = OpenCodeImporter()
    return [s for unit in importer.find(path) for s in importer.load(unit)]


def import_all(store: Store, path: Path) -> list[ImportOutcome]:
    return [commit(store, foreign) for foreign in load(path)]


def events(store: Store, sid: str) -> list[Any]:
    with store.open_reader(sid) as reader:
        return [reader.event(e.id, resolve=True) for e in reader.entries()]


def kinds(evs: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for event in evs:
        out[event.kind] = out.get(event.kind, 0) + 1
    return out


def assert_chain(store: Store, sid: str) -> None:
    """An OpenCode session has no tree: one chain in message order, HEAD on its end."""
    with store.open_reader(sid) as reader:
        entries = list(reader.entries())
        assert len(reader.roots()) == 1 and len(reader.leaves()) == 1
        for before, after in itertools.pairwise(entries):
            assert after.parent_id == before.id
        assert reader.path(to_boundary=False)[-1].id == entries[-1].id


def unanswered(evs: list[Any]) -> list[str]:
    calls = [e.record.call_id for e in evs if isinstance(e.record, ToolCallRecord)]
    results = {e.record.call_id for e in evs if isinstance(e.record, ToolResultRecord)}
    return [c for c in calls if c not in results]


def captured_parts() -> dict[str, dict[str, Any]]:
    """The last version of each part in the capture, by part id."""
    parts: dict[str, dict[str, Any]] = {}
    for line in capture().read_text().splitlines():
        part = json.loads(line)["properties"]["part"]
        parts[part["id"]] = part
    return parts


# -- the capture --------------------------------------------------------------------------


def test_the_corpus_capture_imports_with_its_child_session(store: Store) -> None:
    (outcome,) = import_all(store, capture())
    parts = captured_parts()
    tools = [p for p in parts.values() if p["type"] == "tool"]
    steps = [p for p in parts.values() if p["type"] == "step-start"]
    # PROVENANCE: 2 sessions, 10 messages; 17 step-start parts, tool parts of 10 tools
    assert len(steps) == 17
    parent = events(store, outcome.session_id)
    (child_outcome,) = outcome.children
    child = events(store, child_outcome.session_id)
    both = parent + child
    assert kinds(both)["tool_call"] == len(tools)
    replies = [e for e in both if e.role == "assistant" and isinstance(e.record, MessageRecord)]
    assert len(replies) == len(steps)  # one reply per model request (step)
    users = [e for e in both if e.role == "user"]
    assert len(users) + len({p["messageID"] for p in steps}) == 10
    # every step-finish's usage is on its reply, once
    finish = [p for p in parts.values() if p["type"] == "step-finish"]
    assert sum(r.record.usage.output_tokens for r in replies) == sum(
        p["tokens"]["output"] + p["tokens"]["reasoning"] for p in finish
    )
    # two bash calls were still "running" when the capture ended: unanswered, as there
    running = {p["callID"] for p in tools if p["state"]["status"] == "running"}
    assert set(unanswered(both)) == running and len(running) == 2
    assert_chain(store, outcome.session_id)
    assert_chain(store, child_outcome.session_id)
    # the child hangs from the task call that ran it
    info = store.info(child_outcome.session_id)
    assert info.parent_session == outcome.session_id
    task = next(e for e in parent if e.id == info.parent_event)
    assert isinstance(task.record, ToolCallRecord) and task.record.name == "task"
    assert (store.info(outcome.session_id).name or "").startswith("Write a new file named")
    # a tool's output arrives as its result, paired by callID
    read = next(
        e.record
        for e in parent
        if isinstance(e.record, ToolResultRecord) and e.record.name == "read"
    )
    assert "1.0" in read.content


def test_the_capture_reimports_as_a_no_op(store: Store) -> None:
    import_all(store, capture())
    (again,) = import_all(store, capture())
    assert {(o.status, o.added) for o in again.walk()} == {("unchanged", 0)}


# -- OpenCode's storage tree, built from the capture ------------------------------------


def message_infos(parts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The message objects the capture lacks, as OpenCode writes them."""
    by_message: dict[str, list[dict[str, Any]]] = {}
    for part in sorted(parts.values(), key=lambda p: p["id"]):
        by_message.setdefault(part["messageID"], []).append(part)
    infos: dict[str, dict[str, Any]] = {}
    last_user = None
    for n, (mid, its) in enumerate(sorted(by_message.items())):
        assistant = any(p["type"] == "step-start" for p in its)
        info: dict[str, Any] = {
            "id": mid,
            "sessionID": its[0]["sessionID"],
            "role": "assistant" if assistant else "user",
            "time": {"created": 1755633360000 + n * 1000},
        }
        if assistant:
            info["time"]["completed"] = 1755633360000 + n * 1000 + 500
        if assistant:
            info |= {
                "parentID": last_user,
                "modelID": "claude-sonnet-4",
                "providerID": "anthropic",
                "mode": "build",
                "path": {"cwd": "/proj", "root": "/proj"},
                "cost": 0,
                "tokens": {
                    "input": 1,
                    "output": 1,
                    "reasoning": 0,
                    "cache": {"read": 0, "write": 0},
                },
            }
        else:
            last_user = mid
        infos[mid] = info
    return infos


def write_storage(root: Path, parts: dict[str, dict[str, Any]], extra: bool = True) -> Path:
    """OpenCode's JSON-era layout, pretty-printed as OpenCode writes it."""
    storage = root / "opencode" / "storage"

    def put(path: Path, obj: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj, indent=2))

    for sid, title, parent in ((PARENT, "Temp file chores", None), (CHILD, "Count files", PARENT)):
        info: dict[str, Any] = {
            "id": sid,
            "projectID": "global",
            "directory": "/proj",
            "title": title,
            "version": "0.5.7",
            "time": {"created": 1755633300000, "updated": 1755633600000},
        }
        if parent:
            info["parentID"] = parent
        put(storage / "session" / "global" / f"{sid}.json", info)
    for mid, info in message_infos(parts).items():
        put(storage / "message" / info["sessionID"] / f"{mid}.json", info)
    for pid, part in parts.items():
        put(storage / "part" / part["messageID"] / f"{pid}.json", part)
    return storage


def test_storage_tree_imports_like_the_capture(store: Store, tmp_path: Path) -> None:
    storage = write_storage(tmp_path / "data", captured_parts())
    importer = OpenCodeImporter()
    units = importer.find(tmp_path / "data" / "opencode")
    assert [u.name for u in units] == [f"{PARENT}.json"]  # the child comes with its parent
    (outcome,) = import_all(store, storage.parent)
    info = store.info(outcome.session_id)
    assert (info.name, info.working_dir, info.model) == (
        "Temp file chores",
        None,
        "claude-sonnet-4",
    )
    assert info.extra["import"]["working_dir"] == "/proj"  # recorded, not trusted
    assert info.created_at.startswith("2025-08-19T19:55:00")
    parent = events(store, outcome.session_id)
    (child_outcome,) = outcome.children
    child_info = store.info(child_outcome.session_id)
    assert child_info.name == "Count files"
    assert child_info.parent_session == outcome.session_id
    assert next(e for e in parent if e.id == child_info.parent_event).record.name == "task"
    fresh = Store(tmp_path / "capture", StoreOptions(lock_timeout=0.2))
    (from_capture,) = import_all(fresh, capture())
    capture_events = events(fresh, from_capture.session_id)
    # the same parts give the same events (ids derive from OpenCode's own ids and times)
    assert [(e.kind, e.role) for e in parent] == [(e.kind, e.role) for e in capture_events]
    assert [getattr(e.record, "content", None) for e in parent] == [
        getattr(e.record, "content", None) for e in capture_events
    ]
    assert_chain(store, outcome.session_id)


def test_storage_tree_reimport_and_growth(store: Store, tmp_path: Path) -> None:
    parts = captured_parts()
    last_message = max(p["messageID"] for p in parts.values() if p["sessionID"] == PARENT)
    early = {k: v for k, v in parts.items() if v["messageID"] != last_message}
    storage = write_storage(tmp_path / "data", early)
    (first,) = import_all(store, storage)
    before = [e.id for e in events(store, first.session_id)]
    (again,) = import_all(store, storage)
    assert {(o.status, o.added) for o in again.walk()} == {("unchanged", 0)}
    write_storage(tmp_path / "data", parts)  # OpenCode answered one more prompt
    (grown,) = import_all(store, storage)
    assert grown.status == "grown" and grown.children[0].status == "unchanged"
    after = [e.id for e in events(store, first.session_id)]
    assert after[: len(before)] == before
    added = {p["id"] for p in parts.values() if p["messageID"] == last_message}
    steps = [p for p in parts.values() if p["id"] in added and p["type"] == "step-start"]
    tools = [p for p in parts.values() if p["id"] in added and p["type"] == "tool"]
    assert grown.added == len(after) - len(before) == len(steps) + 2 * len(tools)


def test_a_message_still_being_written_waits_for_a_later_import(
    store: Store, tmp_path: Path
) -> None:
    parts = captured_parts()
    last = max(p["messageID"] for p in parts.values() if p["sessionID"] == PARENT)
    tools = [p for p in parts.values() if p["messageID"] == last and p["type"] == "tool"]
    running = dict(parts)
    for tool in tools[:2]:  # OpenCode is still running two of the calls
        running[tool["id"]] = {**tool, "state": {"status": "running", "input": {}}}
    storage = write_storage(tmp_path / "data", running)
    message_file = storage / "message" / PARENT / f"{last}.json"
    info = json.loads(message_file.read_text())
    del info["time"]["completed"]
    message_file.write_text(json.dumps(info))
    (foreign,) = load(storage)
    assert foreign.report.skipped["message in progress"] == 1
    (first,) = import_all(store, storage)
    replies_of = {
        (getattr(e.record, "metadata", None) or {}).get("opencode", {}).get("message")
        for e in events(store, first.session_id)
    }
    assert last not in replies_of  # nothing of it yet
    write_storage(tmp_path / "data", parts)  # the calls finished, the message too
    (grown,) = import_all(store, storage)
    assert grown.status == "grown"
    fresh = Store(tmp_path / "fresh", StoreOptions(lock_timeout=0.2))
    (whole,) = import_all(fresh, storage)
    # the grown session is exactly what importing the finished one gives
    shape = [(e.id, e.parent_id) for e in events(store, first.session_id)]
    assert shape == [(e.id, e.parent_id) for e in events(fresh, whole.session_id)]


def test_a_database_imports_like_the_storage_tree(store: Store, tmp_path: Path) -> None:
    parts = captured_parts()
    storage = write_storage(tmp_path / "data", parts)
    (from_tree,) = import_all(store, storage)
    db_path = tmp_path / "db" / "opencode.db"
    db_path.parent.mkdir()
    db = sqlite3.connect(db_path)
    db.executescript(
        "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, slug TEXT,"
        " directory TEXT, title TEXT, version TEXT, revert TEXT, permission TEXT,"
        " time_created INTEGER, time_updated INTEGER);"
        "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER,"
        " time_updated INTEGER, data TEXT);"
        "CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT,"
        " time_created INTEGER, time_updated INTEGER, data TEXT);"
    )
    for file in sorted((storage / "session").glob("*/*.json")):
        s = json.loads(file.read_text())
        db.execute(
            "INSERT INTO session VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                s["id"],
                s["projectID"],
                s.get("parentID"),
                None,
                s["directory"],
                s["title"],
                s["version"],
                None,
                None,
                s["time"]["created"],
                s["time"]["updated"],
            ),
        )
    for mid, info in message_infos(parts).items():
        data = {k: v for k, v in info.items() if k not in ("id", "sessionID")}
        db.execute(
            "INSERT INTO message VALUES (?,?,?,?,?)",
            (mid, info["sessionID"], 0, 0, json.dumps(data)),
        )
    for pid, part in parts.items():
        data = {k: v for k, v in part.items() if k not in ("id", "sessionID", "messageID")}
        db.execute(
            "INSERT INTO part VALUES (?,?,?,?,?,?)",
            (pid, part["messageID"], part["sessionID"], 0, 0, json.dumps(data)),
        )
    db.commit()
    db.close()
    assert OpenCodeImporter().find(db_path.parent) == [db_path]
    (from_db,) = import_all(store, db_path)
    # the same session, the same events: nothing new to write
    assert from_db.session_id == from_tree.session_id
    assert {(o.status, o.added) for o in from_db.walk()} == {("unchanged", 0)}


def test_compaction_reasoning_and_errors(store: Store, tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    sid = "ses_0000000000000000000000000a"
    objects: list[tuple[str, dict[str, Any]]] = [
        (
            f"session/global/{sid}.json",
            {
                "id": sid,
                "title": "t\x1b[2J",
                "directory": "/d",
                "time": {"created": 1000, "updated": 9000},
                "revert": {"messageID": "msg_06"},  # the user undid the last answer
            },
        ),
    ]

    def message(mid: str, role: str, parts: list[dict[str, Any]], **info: Any) -> None:
        objects.append(
            (
                f"message/{sid}/{mid}.json",
                {
                    "id": mid,
                    "sessionID": sid,
                    "role": role,
                    "time": {"created": 1000, "completed": 1500},
                    **info,
                },
            )
        )
        for n, part in enumerate(parts):
            pid = f"prt_{mid[4:]}{n:02d}"
            objects.append(
                (f"part/{mid}/{pid}.json", {"id": pid, "messageID": mid, "sessionID": sid, **part})
            )

    message("msg_01", "user", [{"type": "text", "text": "old question"}])
    message(
        "msg_02",
        "assistant",
        [
            {"type": "step-start"},
            {"type": "reasoning", "text": "thinking hard"},
            {"type": "text", "text": "old answer"},
            {
                "type": "tool",
                "tool": "bash",
                "callID": "c1",
                "state": {
                    "status": "error",
                    "input": {"command": "false"},
                    "error": "exit 1",
                    "time": {"start": 2000, "end": 2100},
                },
            },
            {"type": "step-finish", "tokens": "lots"},
            {"type": "brand-new-part", "x": 1},
        ],
        parentID="msg_01",
        modelID="m1",
    )
    message("msg_03", "user", [{"type": "compaction", "auto": True}])
    message(
        "msg_04",
        "assistant",
        [{"type": "text", "text": "SUMMARY of the old"}],
        parentID="msg_03",
        summary=True,
        modelID="m1",
        tokens={"input": 5000},
    )
    message("msg_05", "user", [{"type": "text", "text": "new question"}])
    message(  # fields whose type drifted: a number for the finish reason and the model
        "msg_06",
        "assistant",
        [{"type": "text", "text": "new answer"}],
        parentID="msg_gone",
        finish=7,
        modelID=["m2"],
    )
    # a second file claiming an id already read (a copy left behind): reported, not used
    objects.append(
        (f"message/{sid}/msg_07.json", {"id": "msg_05", "sessionID": sid, "role": "user"})
    )
    for rel, obj in objects:
        path = storage / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj))
    (foreign,) = load(storage)
    assert foreign.name == "t [2J"  # the title's escape sequence is not a name's to carry
    warnings = "\n".join(foreign.report.warnings)
    assert "tokens is not an object" in warnings
    assert "parentID 'msg_gone' is not in the session" in warnings
    assert "msg_07.json: duplicate message id 'msg_05'" in warnings
    # OpenCode deletes a reverted message only at the next prompt: kept, and said so
    assert "pending revert" in warnings and foreign.extra["revert"] == {"messageID": "msg_06"}
    assert foreign.report.kept["part/brand-new-part"] == 1
    outcome = commit(store, foreign)
    evs = events(store, outcome.session_id)
    reply = next(
        e.record for e in evs if isinstance(e.record, MessageRecord) and e.role == "assistant"
    )
    assert (reply.content, reply.reasoning) == ("old answer", "thinking hard")
    failed = next(e.record for e in evs if isinstance(e.record, ToolResultRecord))
    assert failed.is_error and failed.content == "exit 1"
    with store.open_reader(outcome.session_id) as reader:
        context = reader.context()
    assert context.boundary is not None
    assert isinstance(context.boundary.record, CompactionRecord)
    assert context.boundary.record.summary == "SUMMARY of the old"
    assert context.boundary.record.tokens_before == 5000
    # (adapted, issue 15: the pending revert of msg_06 is applied: HEAD is a branch
    # summary after the message kept, and the reverted answer is a branch left beside it)
    assert [getattr(e.record, "content", None) for e in context.events[1:-1]] == ["new question"]
    assert context.events[-1].kind == "branch_summary"
    with store.open_reader(outcome.session_id) as reader:
        left = [e for e in reader.leaves() if e.id != reader.head]
        assert [reader.event(e.id).record.content for e in left] == ["new answer"]  # type: ignore[union-attr]


def test_a_cut_part_file_imports_nothing(store: Store, tmp_path: Path) -> None:
    storage = write_storage(tmp_path / "data", captured_parts())
    victim = next((storage / "part").glob("*/*.json"))
    text = victim.read_bytes()
    victim.write_bytes(text[: len(text) // 2])
    with pytest.raises(InvalidInput, match=rf"{victim.name}: byte offset \d+: not JSON.*cut short"):
        import_all(store, storage)
    assert store.list_sessions() == []


def test_default_location_and_missing_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert OpenCodeImporter().default_paths() == [tmp_path / "xdg" / "opencode"]
    monkeypatch.delenv("XDG_DATA_HOME")
    assert OpenCodeImporter().default_paths() == [Path.home() / ".local" / "share" / "opencode"]
    with pytest.raises(InvalidInput, match="no such file"):
        OpenCodeImporter().find(tmp_path / "missing")


def test_a_database_that_is_not_opencode_s_imports_nothing(store: Store, tmp_path: Path) -> None:
    db_path = tmp_path / "opencode.db"
    db = sqlite3.connect(db_path)
    db.executescript(
        "CREATE TABLE session (id TEXT PRIMARY KEY, title TEXT);"
        "INSERT INTO session VALUES ('ses_1', 'x');"
    )
    db.commit()
    db.close()
    with pytest.raises(InvalidInput, match=r"opencode\.db: not an OpenCode database"):
        import_all(store, db_path)
    db = sqlite3.connect(db_path)
    db.executescript(
        "CREATE TABLE message (id TEXT, session_id TEXT, data TEXT);"
        "CREATE TABLE part (id TEXT, message_id TEXT, session_id TEXT, data TEXT);"
        "INSERT INTO message VALUES ('msg_1', 'ses_1', '{\"role\": \"user\"');"  # cut JSON
    )
    db.commit()
    db.close()
    with pytest.raises(InvalidInput, match=r"message msg_1: the data column is not JSON"):
        import_all(store, db_path)
    assert store.list_sessions() == []

"""Forks and project-level agent files are linked to the session they came from.

A Codex fork's ``session_meta`` names the thread it copied (``forked_from_id``);
a Pi ``/fork`` file's header names the file it was forked from
(``parentSession``) and starts with a copy of the path up to the fork point;
Claude Code 1.0.x wrote subagents as ``agent-<hex>.jsonl`` files in the project
directory, each line naming the parent's ``sessionId``. None of these is in the
corpus, so the files here are small synthetic ones in the tools' documented
shapes (../shared/corpus/FORMATS.md). Each is imported as a child session of
its parent, whichever file is imported first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infai.imports import commit, importer_for
from infai.store import Store


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _import(store: Store, tool: str, path: Path) -> list[Any]:
    importer = importer_for(tool)
    return [commit(store, f) for p in importer.find(path) for f in importer.load(p)]


# -- Codex ------------------------------------------------------------------------------

SOURCE = "019b0000-0000-7000-8000-000000000001"
FORK = "019b0000-0000-7000-8000-000000000002"


def _rollout(path: Path, thread: str, forked: str | None, texts: list[str]) -> Path:
    meta: dict[str, Any] = {"id": thread, "timestamp": "2026-01-02T03:04:00.000Z", "cwd": "/w"}
    if forked:
        meta["forked_from_id"] = forked
    records = [{"timestamp": "2026-01-02T03:04:00.000Z", "type": "session_meta", "payload": meta}]
    for i, text in enumerate(texts):
        role = "user" if i % 2 == 0 else "assistant"
        kind = "input_text" if role == "user" else "output_text"
        item = {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}
        stamp = f"2026-01-02T03:04:{i + 1:02d}.000Z"
        records.append({"timestamp": stamp, "type": "response_item", "payload": item})
    return _write(path, records)


def _name(thread: str) -> str:
    return f"rollout-2026-01-02T03-04-00-{thread}.jsonl"  # as Codex names them


def test_a_codex_fork_hangs_from_where_its_copy_of_the_thread_ends(tmp_path: Path) -> None:
    day = tmp_path / "sessions" / "2026" / "01" / "02"
    day.mkdir(parents=True)
    _rollout(day / _name(SOURCE), SOURCE, None, ["hi", "hello", "go on"])
    later = tmp_path / "sessions" / "2026" / "01" / "05"  # forked days later
    later.mkdir(parents=True)
    _rollout(later / _name(FORK), FORK, SOURCE, ["hi", "hello", "other way"])
    store = Store(tmp_path / "home")
    outcomes = _import(store, "codex", tmp_path / "sessions")
    ids = {o.source_id: o.session_id for o in outcomes}
    assert set(ids) == {SOURCE, FORK}
    info = store.info(ids[FORK])
    assert info.parent_session == ids[SOURCE]
    with store.open_reader(ids[SOURCE]) as reader:
        at = reader.event(str(info.parent_event)).record
    assert getattr(at, "content", None) == "hello"  # the last entry the fork copied
    assert store.info(ids[SOURCE]).parent_session is None


def test_a_codex_fork_imported_before_its_source_is_linked_by_the_next_import(
    tmp_path: Path,
) -> None:
    source = _rollout(tmp_path / _name(SOURCE), SOURCE, None, ["hi", "hello"])
    fork = _rollout(tmp_path / _name(FORK), FORK, SOURCE, ["hi", "hello", "x"])
    store = Store(tmp_path / "home")
    hidden = tmp_path / "elsewhere.jsonl"
    source.rename(hidden)  # the source is not there yet
    (first,) = _import(store, "codex", fork)
    assert store.info(first.session_id).parent_session is None
    hidden.rename(source)
    (parent,) = _import(store, "codex", source)
    assert _import(store, "codex", fork)[0].status == "unchanged"
    info = store.info(first.session_id)
    assert info.parent_session == parent.session_id and info.parent_event is not None


# -- Pi -----------------------------------------------------------------------------------


def _pi_entry(eid: str, parent: str | None, second: int, role: str, text: str) -> dict[str, Any]:
    if role == "user":
        message: dict[str, Any] = {"role": "user", "content": text}
    else:
        content = [{"type": "text", "text": text}]
        message = {"role": "assistant", "content": content, "model": "m", "stopReason": "stop"}
    stamp = f"2026-03-01T10:00:{second:02d}.000Z"
    return {
        "type": "message",
        "id": eid,
        "parentId": parent,
        "timestamp": stamp,
        "message": message,
    }


def _pi_header(sid: str, parent: Path | None = None) -> dict[str, Any]:
    header = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-03-01T10:00:00.000Z"}
    if parent is not None:
        header["parentSession"] = str(parent)
    return header | {"cwd": "/w"}


def _pi_pair(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "s").mkdir()
    parent = _write(
        tmp_path / "s" / "1_parent.jsonl",
        [
            _pi_header("0197aaaa-0000-7000-8000-000000000001"),
            _pi_entry("p1", None, 1, "user", "hello"),
            _pi_entry("p2", "p1", 2, "assistant", "hi there"),
            _pi_entry("p3", "p2", 3, "user", "do it this way"),
            _pi_entry("p4", "p3", 4, "assistant", "done this way"),
        ],
    )
    fork = _write(  # /fork at p2: the path copied, ids kept, then its own work
        tmp_path / "s" / "2_fork.jsonl",
        [
            _pi_header("0197aaaa-0000-7000-8000-000000000002", parent),
            _pi_entry("p1", None, 1, "user", "hello"),
            _pi_entry("p2", "p1", 2, "assistant", "hi there"),
            _pi_entry("f3", "p2", 5, "user", "no, the other way"),
        ],
    )
    return parent, fork


def test_a_pi_fork_hangs_from_the_entry_it_was_forked_at(tmp_path: Path) -> None:
    _pi_pair(tmp_path)
    store = Store(tmp_path / "home")
    parent_out, fork_out = _import(store, "pi", tmp_path / "s")
    info = store.info(fork_out.session_id)
    assert info.parent_session == parent_out.session_id
    with store.open_reader(parent_out.session_id) as reader:
        at = reader.event(str(info.parent_event)).record
    assert at is not None and getattr(at, "content", None) == "hi there"  # p2, the fork point
    # the parent file moved beside the fork (a copied sessions directory): still found
    moved = tmp_path / "moved"
    moved.mkdir()
    for f in (tmp_path / "s").iterdir():
        (moved / f.name).write_bytes(f.read_bytes())
    (tmp_path / "s" / "1_parent.jsonl").unlink()
    other = Store(tmp_path / "home2")
    outcomes = _import(other, "pi", moved)
    assert other.info(outcomes[1].session_id).parent_session == outcomes[0].session_id


def test_a_pi_fork_whose_parent_is_gone_is_imported_unlinked_and_says_so(tmp_path: Path) -> None:
    parent, fork = _pi_pair(tmp_path)
    parent.unlink()
    store = Store(tmp_path / "home")
    importer = importer_for("pi")
    (foreign,) = importer.load(fork)
    outcome = commit(store, foreign)
    assert store.info(outcome.session_id).parent_session is None
    assert any("not found: not linked" in w for w in foreign.report.warnings)


# -- Claude Code 1.0.x: agent-<hex>.jsonl in the project directory ----------------------

SID = "3f1e9a52-1111-4222-8333-444455556666"


def _cc(uuid: str, parent: str | None, kind: str, content: Any, second: int) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "parentUuid": parent,
        "isSidechain": False,
        "type": kind,
        "uuid": uuid,
        "sessionId": SID,
        "cwd": "/work/demo",
        "version": "1.0.98",
        "timestamp": f"2026-01-01T00:00:{second:02d}.000Z",
    }
    if kind == "assistant":
        message = {"id": f"m-{uuid}", "role": "assistant", "content": content, "model": "c"}
        obj["message"] = message
    else:
        obj["message"] = {"role": "user", "content": content}
    return obj


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "-work-demo"
    project.mkdir()
    prompt = {"description": "find it", "prompt": "find the failing test"}
    task = {"type": "tool_use", "id": "toolu_1", "name": "Task", "input": prompt}
    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "test_x fails"}]
    _write(
        project / f"{SID}.jsonl",
        [
            _cc("a1", None, "user", "why is CI red?", 1),
            _cc("a2", "a1", "assistant", [task], 2),
            _cc("a3", "a2", "user", result, 9),
            _cc("a4", "a3", "assistant", [{"type": "text", "text": "test_x fails"}], 10),
        ],
    )
    agent = [
        _cc("b1", None, "user", "find the failing test", 3) | {"isSidechain": True},
        _cc("b2", "b1", "assistant", [{"type": "text", "text": "test_x"}], 4)
        | {"isSidechain": True},
    ]
    _write(project / "agent-0a1b2c3d.jsonl", agent)
    return project


def test_a_project_level_agent_file_is_a_child_of_its_session(tmp_path: Path) -> None:
    project = _project(tmp_path)
    store = Store(tmp_path / "home")
    (outcome,) = _import(store, "claude-code", project)  # one top-level session
    (child,) = outcome.children
    info = store.info(child.session_id)
    assert info.parent_session == outcome.session_id
    with store.open_reader(outcome.session_id) as reader:
        call = reader.event(str(info.parent_event)).record
    assert getattr(call, "call_id", None) == "toolu_1"  # hangs from its Task call
    # named alone, the agent file brings its transcript (and is read with it)
    importer = importer_for("claude-code")
    assert importer.find(project / "agent-0a1b2c3d.jsonl") == [project / f"{SID}.jsonl"]
    again = _import(Store(tmp_path / "home"), "claude-code", project / "agent-0a1b2c3d.jsonl")
    assert [o.status for o in again[0].walk()] == ["unchanged", "unchanged"]


def test_an_agent_file_imported_before_its_transcript_is_linked_later(tmp_path: Path) -> None:
    project = _project(tmp_path)
    transcript = project / f"{SID}.jsonl"
    hidden = tmp_path / "later.jsonl"
    transcript.rename(hidden)
    store = Store(tmp_path / "home")
    (alone,) = _import(store, "claude-code", project)
    assert store.info(alone.session_id).parent_session is None
    hidden.rename(transcript)
    (outcome,) = _import(store, "claude-code", project)
    assert outcome.children[0].session_id == alone.session_id
    assert store.info(alone.session_id).parent_session == outcome.session_id

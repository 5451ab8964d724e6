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

from infai.store import Store
from infai.store.imports import commit, importer_for


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


def test_a_codex_fork_is_a_child_of_the_thread_it_copied(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    _rollout(tmp_path / "d" / "rollout-a.jsonl", SOURCE, None, ["hi", "hello", "go on"])
    _rollout(tmp_path / "d" / "rollout-b.jsonl", FORK, SOURCE, ["hi", "hello", "other way"])
    store = Store(tmp_path / "home")
    outcomes = _import(store, "codex", tmp_path / "d")
    ids = {o.source_id: o.session_id for o in outcomes}
    assert set(ids) == {SOURCE, FORK}
    assert store.info(ids[FORK]).parent_session == ids[SOURCE]
    assert store.info(ids[SOURCE]).parent_session is None


def test_a_codex_fork_imported_before_its_source_is_linked_by_the_next_import(
    tmp_path: Path,
) -> None:
    source = _rollout(tmp_path / "rollout-a.jsonl", SOURCE, None, ["hi", "hello"])
    fork = _rollout(tmp_path / "rollout-b.jsonl", FORK, SOURCE, ["hi", "hello", "x"])
    store = Store(tmp_path / "home")
    (first,) = _import(store, "codex", fork)
    assert store.info(first.session_id).parent_session is None
    (parent,) = _import(store, "codex", source)
    assert _import(store, "codex", fork)[0].status == "unchanged"
    assert store.info(first.session_id).parent_session == parent.session_id

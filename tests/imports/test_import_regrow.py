"""Re-importing a source that changed under an import: the append-only rule.

Only appending new events to an unchanged prefix is safe. A reply that was still
being written when the file was imported (a leaf of the session, its content
changed since) gets its complete version appended beside the partial one, and the
source's later entries follow the complete one; an entry that changed after other
entries were built on it is kept as imported and reported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from import_corpus import corpus
from infai.imports import (
    EventTree,
    ForeignSession,
    ImportReport,
    commit,
    derive_id,
    importer_for,
)
from infai.store import MessageRecord, Store
from infai.store.records import record_to_obj

T0 = "2026-01-02T03:04:05.678Z"


def _foreign(entries: list[tuple[str, str | None, str, str]]) -> ForeignSession:
    tree = EventTree("test:s", ImportReport("t"))
    for key, parent, role, text in entries:
        tree.add(key, parent, role, T0, MessageRecord(content=text))
    specs, head = tree.finish()
    return ForeignSession(
        tool="test",
        source_id="s",
        session_id=derive_id("test", "session:s", T0),
        paths=["t"],
        created_at=T0,
        updated_at=T0,
        report=tree.report,
        events=specs,
        head=head,
    )


def _texts(store: Store, sid: str) -> list[str]:
    with store.open_reader(sid) as reader:
        return [e.record.content for e in reader.context().events]  # type: ignore[union-attr]


def test_a_reply_completed_after_import_is_added_beside_the_partial_one(tmp_path: Path) -> None:
    store = Store(tmp_path)
    first = _foreign([("a", None, "user", "hi"), ("b", "a", "assistant", "Hel")])
    commit(store, first)
    partial = first.events[-1][0]
    done = _foreign(
        [
            ("a", None, "user", "hi"),
            ("b", "a", "assistant", "Hello, how can I help?"),
            ("c", "b", "user", "fix the bug"),
        ]
    )
    outcome = commit(store, done)
    assert (outcome.status, outcome.added) == ("grown", 2)
    assert any("still being written" in w for w in done.report.warnings)
    assert _texts(store, done.session_id) == ["hi", "Hello, how can I help?", "fix the bug"]
    with store.open_reader(done.session_id) as reader:
        assert reader.count == 4
        assert partial in [leaf.id for leaf in reader.leaves()]  # kept, abandoned
    # idempotent: the revision is found again, and what follows it is added after it
    entries = [
        ("a", None, "user", "hi"),
        ("b", "a", "assistant", "Hello, how can I help?"),
        ("c", "b", "user", "fix the bug"),
        ("d", "c", "assistant", "done"),
    ]
    assert commit(store, _foreign(entries)).added == 1
    assert _texts(store, done.session_id)[-1] == "done"
    again = _foreign(entries)
    assert commit(store, again).status == "unchanged"
    assert again.report.warnings == []


def test_an_entry_changed_under_later_entries_is_kept_and_reported(tmp_path: Path) -> None:
    store = Store(tmp_path)
    commit(store, _foreign([("a", None, "user", "hi"), ("b", "a", "assistant", "Hel")]))
    with store.open_writer(derive_id("test", "session:s", T0)) as writer:
        writer.append(MessageRecord(content="answered in infai"), "user")
    changed = _foreign([("a", None, "user", "hi"), ("b", "a", "assistant", "Hello!")])
    assert commit(store, changed).status == "unchanged"
    assert any("changed in the source" in w for w in changed.report.warnings)
    assert _texts(store, changed.session_id) == ["hi", "Hel", "answered in infai"]


def test_an_unchanged_source_reports_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    commit(store, _foreign([("a", None, "user", "hi"), ("b", "a", "assistant", "Hello")]))
    same = _foreign([("a", None, "user", "hi"), ("b", "a", "assistant", "Hello")])
    assert commit(store, same).status == "unchanged"
    assert same.report.warnings == []


# -- the corpus: a file imported while the tool was writing it, then again complete ----

CUTS: dict[str, str | int] = {
    # Claude Code: cut where a response continues on the next line (one API response is
    # several lines sharing message.id: the reply is partial at the cut)
    "claude-code/feipi/8a283a61-e3f0-4e8f-ba06-6711e2fcf2ed.jsonl": "responses",
    "claude-code/d-kimuson/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": "responses",
    # Codex: a reply's usage comes on a later token_count line: cut just before one
    "codex/acidicsoil/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl": (
        "usage"
    ),
}  # Pi writes one whole entry per line: a cut leaves nothing partial


def _cut_points(path: Path, rule: str | int) -> list[int]:
    lines = path.read_bytes().splitlines()
    if isinstance(rule, int):  # spread over the file
        return [len(lines) * (k + 1) // (rule + 1) for k in range(rule)]
    cuts, previous = [], None
    for i, raw in enumerate(lines):
        obj = json.loads(raw)
        if rule == "usage":
            payload = obj.get("payload") or {}
            if obj.get("type") == "event_msg" and payload.get("type") == "token_count":
                cuts.append(i)
            continue
        mid = (obj.get("message") or {}).get("id") if obj.get("type") == "assistant" else None
        if mid is not None and mid == previous:
            cuts.append(i)
        previous = mid
    return cuts[:4]


def _head_path(store: Store, sid: str) -> list[tuple[str, str, dict[str, Any]]]:
    with store.open_reader(sid) as reader:
        events = [reader.event(e.id) for e in reader.path(to_boundary=False)]
        return [(e.kind, e.role, record_to_obj(reader.resolve(e))) for e in events]


@pytest.mark.parametrize("name", sorted(CUTS))
def test_a_corpus_file_imported_mid_write_ends_like_a_fresh_import(
    tmp_path: Path, name: str
) -> None:
    source = corpus() / name
    tool = importer_for(name.split("/")[0])
    fresh = Store(tmp_path / "fresh")
    (whole,) = tool.load(source)
    commit(fresh, whole)
    expected = _head_path(fresh, whole.session_id)
    lines = source.read_bytes().splitlines(keepends=True)
    cuts = _cut_points(source, CUTS[name])
    assert cuts
    for n, cut in enumerate(cuts):
        store = Store(tmp_path / f"s{n}")
        (tmp_path / f"f{n}").mkdir()
        target = tmp_path / f"f{n}" / source.name
        target.write_bytes(b"".join(lines[:cut]))
        for partial in tool.load(target):
            commit(store, partial)
        target.write_bytes(b"".join(lines))
        (grown,) = tool.load(target)
        commit(store, grown)
        assert _head_path(store, whole.session_id) == expected, f"cut after line {cut}"
        assert not any("changed in the source" in w for w in grown.report.warnings)
        (again,) = tool.load(target)
        assert commit(store, again).status == "unchanged"


def test_a_subagent_of_a_revised_call_hangs_from_the_revision(tmp_path: Path) -> None:
    store = Store(tmp_path)
    commit(store, _foreign([("a", None, "user", "hi"), ("b", "a", "assistant", "start a")]))
    grown = _foreign([("a", None, "user", "hi"), ("b", "a", "assistant", "start a task")])
    child_tree = EventTree("test:child", ImportReport("t"))
    child_tree.add("x", None, "user", T0, MessageRecord(content="the task"))
    specs, head = child_tree.finish()
    child = ForeignSession(
        tool="test",
        source_id="child",
        session_id=derive_id("test", "session:child", T0),
        paths=["t"],
        created_at=T0,
        updated_at=T0,
        report=child_tree.report,
        events=specs,
        head=head,
        parent_event=grown.events[-1][0],  # the call, by its source-derived id
    )
    grown.children.append(child)
    outcome = commit(store, grown)
    info = store.info(outcome.children[0].session_id)
    with store.open_reader(grown.session_id) as reader:
        assert info.parent_event == reader.head  # the complete version, not the partial
        assert reader.event(str(reader.head)).record.content == "start a task"  # type: ignore[union-attr]

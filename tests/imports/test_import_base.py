"""The import framework: derived ids, the line reader, the tree's order, commit's guarantees.

These are the rules every importer (Claude Code, Codex, Pi, OpenCode) relies
on, tested without any tool's format: ids are UUIDv7 and the same for the same
source; the reader reads two values on a line and pretty-printed records,
skips a torn last line with a warning and refuses garbage; ``finish`` puts
parents first and the tool's HEAD last; ``commit`` writes whole or nothing,
grows by exactly the new events and refuses a source that no longer fits.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from infai.imports import (
    TOOLS,
    EventTree,
    ForeignSession,
    ImportReport,
    commit,
    derive_id,
    importer_for,
    label,
    read_json_lines,
)
from infai.store import NIL_ID, InvalidInput, MessageRecord, Store, ToolCallRecord, ToolResultRecord

T0 = "2026-01-02T03:04:05.678Z"


def test_derived_ids_are_uuid7_with_the_source_time_and_repeat() -> None:
    one = derive_id("claude-code:s1", "entry-1", T0)
    parsed = uuid.UUID(one)
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    millis = int(one.replace("-", "")[:12], 16)
    assert millis == 1767323045678
    assert derive_id("claude-code:s1", "entry-1", T0) == one
    assert derive_id("claude-code:s2", "entry-1", T0) != one  # namespaced by session
    assert derive_id("claude-code:s1", "entry-2", T0) != one
    assert derive_id("claude-code:s1", "entry-1", 1767323045678) == one  # epoch ms alike


def _read(tmp_path: Path, data: bytes) -> tuple[list[Any], ImportReport]:
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    report = ImportReport(str(path))
    return [(line.number, line.value) for line in read_json_lines(path, report)], report


def test_reader_reads_two_values_on_a_line_and_says_so(tmp_path: Path) -> None:
    values, report = _read(tmp_path, b'{"a":1}\n{"b":2}{"c":3}\n{"d":4}\n')
    assert values == [(1, {"a": 1}), (2, {"b": 2}), (2, {"c": 3}), (3, {"d": 4})]
    assert report.warnings == [
        f"{tmp_path / 'f.jsonl'}:2: several JSON values on one line: each is read"
    ]


def test_reader_reads_pretty_printed_records_whole(tmp_path: Path) -> None:
    values, report = _read(tmp_path, b'{\n  "a": [1,\n 2],\n  "b": "x"\n}\n{"c": true}\n')
    assert values == [(1, {"a": [1, 2], "b": "x"}), (6, {"c": True})]
    assert len(report.warnings) == 1 and "pretty-printed" in report.warnings[0]


@pytest.mark.parametrize("tail", [b'{"a": "cut', b'{"a": fal', b'{"a": 12', b'{"a": -', b'{"a"'])
def test_reader_skips_a_torn_last_line_with_a_warning(tmp_path: Path, tail: bytes) -> None:
    values, report = _read(tmp_path, b'{"x": 1}\n' + tail)
    assert values == [(1, {"x": 1})]
    assert report.warnings == [
        f"{tmp_path / 'f.jsonl'}:2: the file ends inside a record (byte offset 9): "
        "cut mid-line, skipped (a later import reads it once complete)"
    ]


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (b'{"x": 1}\nnot json\n{"y": 2}\n', ":2: byte offset 9: not JSON"),
        (b'{"x": 1}\n{"a": fal\n{"y": 2}\n', ":2: byte offset 9: not JSON"),
        (b'{"x": 1} trailing\n', ":1: byte offset 9: not JSON"),
        (b'{"x": "\xff"}\n', ":1: byte offset 7: not UTF-8"),
    ],
)
def test_reader_refuses_garbage_naming_line_and_offset(
    tmp_path: Path, data: bytes, where: str
) -> None:
    with pytest.raises(InvalidInput, match=where):
        _read(tmp_path, data)


def _msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


def _tree() -> EventTree:
    tree = EventTree("test:s", ImportReport("t"))
    tree.add("a", None, "user", T0, _msg("a"))
    tree.add("b", "a", "assistant", T0, _msg("b"))
    tree.add("c", "a", "user", T0, _msg("c (a branch)"))
    tree.add("d", "b", "user", T0, _msg("d"))
    return tree


def test_finish_puts_parents_first_and_the_head_branch_last() -> None:
    specs, head = _tree().finish("c")
    order = [spec[5].content for spec in specs]  # type: ignore[union-attr]
    assert order == ["a", "b", "d", "c (a branch)"]
    assert head == specs[-1][0]
    specs, head = _tree().finish()  # default: the last entry in file order
    assert [spec[5].content for spec in specs][-1] == "d"  # type: ignore[union-attr]


def test_finish_resolves_aliases_dangling_parents_and_cycles() -> None:
    report = ImportReport("t")
    tree = EventTree("test:s", report)
    tree.add("a", None, "user", T0, _msg("a"))
    tree.alias("progress", "a")
    tree.add("b", "progress", "assistant", T0, _msg("b"))  # through the alias
    tree.add("c", "lost", "user", T0, _msg("c"))  # dangling
    tree.add("x", "y", "user", T0, _msg("x"))
    tree.add("y", "x", "user", T0, _msg("y"))  # a cycle
    specs, _ = tree.finish(dangling="previous")
    parents = {spec[5].content: spec[1] for spec in specs}  # type: ignore[union-attr]
    ids = {spec[5].content: spec[0] for spec in specs}  # type: ignore[union-attr]
    assert parents["b"] == ids["a"]
    assert parents["c"] == ids["b"]  # hung from the entry before it
    assert any("'lost' is not in the file" in w for w in report.warnings)
    assert any("its own ancestor" in w for w in report.warnings)
    assert len(specs) == 5


def _foreign(tree: EventTree, head: str | None = None, tool: str = "test") -> ForeignSession:
    specs, head_id = tree.finish(head)
    return ForeignSession(
        tool=tool,
        source_id="s",
        session_id=derive_id(tool, "session:s", T0),
        paths=["t"],
        created_at=T0,
        updated_at=T0,
        report=tree.report,
        events=specs,
        head=head_id,
    )


def test_commit_twice_is_a_no_op_and_head_is_the_tool_head(tmp_path: Path) -> None:
    store = Store(tmp_path)
    foreign = _foreign(_tree(), head="c")
    assert commit(store, foreign).status == "created"
    with store.open_reader(foreign.session_id) as reader:
        assert reader.head == foreign.head
        assert [e.branch_from is not None for e in reader.entries()] == [False, False, False, True]
    before = sorted(p.name for p in (tmp_path).rglob("*"))
    assert commit(store, foreign).status == "unchanged"
    assert sorted(p.name for p in (tmp_path).rglob("*")) == before
    info = store.info(foreign.session_id)
    assert info.created_at == T0 and info.extra == {
        "import": {"tool": "test", "source_id": "s", "paths": ["t"], "head": foreign.head}
    }


def test_commit_keeps_what_it_imported_when_the_source_changed_shape(tmp_path: Path) -> None:
    store = Store(tmp_path)
    commit(store, _foreign(_tree()))
    tree = EventTree("test:s", ImportReport("t"))
    tree.add("z", None, "user", T0, _msg("z"))
    tree.add("a", "z", "user", T0, _msg("a, now under z"))  # the file was rewritten
    tree.add("q", "a", "user", T0, _msg("q"))
    changed = _foreign(tree)
    assert commit(store, changed).status == "grown"  # z and q are new; a stays
    assert any("1 entries imported before now follow other" in w for w in tree.report.warnings)
    with store.open_reader(changed.session_id) as reader:
        assert reader.count == 6
        assert reader.entry(tree.id_of("a") or "").parent_id == NIL_ID
    other = _foreign(_tree(), tool="other")
    other.session_id = changed.session_id
    with pytest.raises(InvalidInput, match="not an import of other"):
        commit(store, other)


def test_commit_checks_everything_before_writing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    tree = _tree()
    tree.add("bad", "d", "not a role!", T0, _msg("x"))
    with pytest.raises(InvalidInput):
        commit(store, _foreign(tree))
    assert store.list_sessions() == []


def test_a_failed_write_removes_the_new_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path)
    foreign = _foreign(_tree())

    def broken(info: Any) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(store, "restore_info", broken)
    with pytest.raises(OSError):
        commit(store, foreign)
    assert store.list_sessions() == []


def test_unanswered_calls_are_counted() -> None:
    report = ImportReport("t")
    tree = EventTree("test:s", report)
    tree.add("a", None, "assistant", T0, ToolCallRecord(call_id="c1", name="read"))
    tree.add("b", "a", "assistant", T0, ToolCallRecord(call_id="c2", name="read"))
    tree.add("c", "b", "tool", T0, ToolResultRecord(call_id="c1", name="read", content="x"))
    report.count(tree.finish()[0])
    assert report.unanswered == 1
    assert report.to_obj()["events"] == {"tool_call": 2, "tool_result": 1}


def test_the_registry_names_four_tools_and_refuses_others() -> None:
    assert TOOLS == ("claude-code", "codex", "opencode", "pi")
    with pytest.raises(InvalidInput, match="unknown tool 'gemini'"):
        importer_for("gemini")


def test_a_label_is_one_clean_line() -> None:
    assert label("\n  <command-name>/x</command-name> fix\x1b[31m it \nmore") == "/x fix [31m it"
    assert label("   \n") is None and label(None) is None
    assert label("a" * 200) == "a" * 80


def test_a_session_may_name_a_parent_in_another_file(tmp_path: Path) -> None:
    store = Store(tmp_path)
    child = _foreign(_tree())
    parent = _foreign(_tree())
    parent.source_id, parent.session_id = "p", derive_id("test", "session:p", T0)
    child.parent_session = parent.session_id
    child.parent_event = parent.events[0][0]
    commit(store, child)  # before its parent: not linked yet, and said so
    assert store.info(child.session_id).parent_session is None
    assert any("not imported yet" in w for w in child.report.warnings)
    commit(store, parent)
    assert commit(store, child).status == "unchanged"  # no event added, but now linked
    info = store.info(child.session_id)
    assert (info.parent_session, info.parent_event) == (parent.session_id, child.parent_event)


def test_a_session_continued_in_infai_still_gets_the_new_entries_on_a_branch(
    tmp_path: Path,
) -> None:
    # Adapted (issue 15): the source's new entries used to be refused here; they are now
    # added as a branch from the last imported entry, and the user's work is named.
    store = Store(tmp_path)
    small = _tree()
    small.drop("d")
    commit(store, _foreign(small, head="b"))
    with store.open_writer(_foreign(_tree()).session_id) as writer:
        mine = writer.append(MessageRecord(content="my own follow-up"), "user")
    grown = _foreign(_tree())
    assert commit(store, grown).status == "grown"
    assert any("continued in infai" in w and mine.id in w for w in grown.report.warnings)
    with store.open_reader(grown.session_id) as reader:
        d = grown.events[-1][0]
        assert reader.count == 5 and reader.head == d
        b = reader.entry(d).parent_id
        assert reader.event(b).record.content == "b"  # type: ignore[union-attr]
        assert reader.entry(d).branch_from == b  # a branch from the last imported entry
        assert mine.id in [leaf.id for leaf in reader.leaves()]  # the user's work stays
    assert commit(store, _foreign(_tree())).status == "unchanged"

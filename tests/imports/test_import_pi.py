"""Pi sessions import whole: v1 lists, v2/v3 trees, compactions with their kept entries.

The corpus has only v1 files (counted against a plain reader, including the two
lines that hold two records); a synthetic v3 file written here covers the tree
format: a ``/tree`` branch with its branch summary, labels, a session name, a
compaction keeping entries by id, and growth after import.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from import_corpus import corpus, json_values
from infai.imports import commit, importer_for
from infai.store import (
    BranchSummaryRecord,
    CompactionRecord,
    MessageRecord,
    Store,
    ToolCallRecord,
    ToolResultRecord,
)

TOOL = importer_for("pi")
FILES = ["large-session.jsonl", "session.jsonl", "compact.jsonl"]


def _pi(name: str) -> Path:
    return corpus() / "pi" / "pi-mono" / name


def _raw(path: Path) -> tuple[Counter[str], int]:
    """Event counts a v1 file should give (copies aside), and its unanswered calls."""
    counts: Counter[str] = Counter()
    calls: list[str] = []
    answered: set[str] = set()
    for entry in json_values(path)[1:]:
        if entry["type"] == "compaction":
            counts["compaction"] += 1
        if entry["type"] != "message":
            continue
        message = entry["message"]
        if message["role"] == "toolResult":
            counts["tool_result"] += 1
            answered.add(message["toolCallId"])
            continue
        counts["message"] += 1
        if message["role"] == "assistant":
            calls += [b["id"] for b in message["content"] if b["type"] == "toolCall"]
    counts["tool_call"] = len(calls)
    return counts, len([c for c in calls if c not in answered])


@pytest.mark.parametrize("name", FILES)
def test_every_corpus_session_imports_with_its_counts(tmp_path: Path, name: str) -> None:
    path = _pi(name)
    foreign = TOOL.load(path)[0]
    store = Store(tmp_path / "home")
    assert commit(store, foreign).status == "created"
    expected, unanswered = _raw(path)
    originals = Counter(
        spec[5].kind for spec in foreign.events if "copy_of" not in getattr(spec[5], "metadata", {})
    )
    assert originals == expected
    with store.open_reader(foreign.session_id) as reader:
        assert Counter(e.kind for e in reader.entries()) == Counter(
            s[5].kind for s in foreign.events
        )
        assert len(reader.roots()) == 1 and len(reader.leaves()) == 1  # v1 is a list
        assert reader.head == foreign.head
    assert foreign.report.unanswered == unanswered
    info = store.info(foreign.session_id)
    assert info.working_dir is None  # the tool's directory: recorded, not trusted
    assert info.extra["import"]["working_dir"] == json_values(path)[0]["cwd"]
    assert set(info.extra) == {"import"}
    assert commit(store, TOOL.load(path)[0]).status == "unchanged"


def test_large_session_keeps_its_unanswered_calls() -> None:
    foreign = TOOL.load(_pi("large-session.jsonl"))[0]
    assert foreign.report.unanswered == 18  # aborted turns, as in the source
    assert foreign.report.skipped["thinking_level_change"] == 103


@pytest.mark.parametrize(("name", "line"), [("session.jsonl", 440), ("compact.jsonl", 1013)])
def test_two_records_on_one_line_are_both_imported_and_reported(name: str, line: int) -> None:
    foreign = TOOL.load(_pi(name))[0]
    assert any(
        w.endswith(f":{line}: several JSON values on one line: each is read")
        for w in foreign.report.warnings
    )


def _user_text(message: dict[str, Any]) -> str:
    if message["role"] == "bashExecution":
        return f"Ran `{message['command']}`"
    content = message["content"]
    return str(content if isinstance(content, str) else content[0]["text"])


def test_a_v1_compaction_resumes_with_pi_bounded_context(tmp_path: Path) -> None:
    path = _pi("session.jsonl")
    entries = json_values(path)
    at = next(i for i, e in enumerate(entries) if e["type"] == "compaction")
    first_kept = entries[at]["firstKeptEntryIndex"]
    kept = [e["message"] for e in entries[first_kept:at] if e["type"] == "message"]
    foreign = TOOL.load(path)[0]
    store = Store(tmp_path / "home")
    commit(store, foreign)
    with store.open_reader(foreign.session_id) as reader:
        context = reader.context().events
    boundary = context[0].record
    assert isinstance(boundary, CompactionRecord)
    assert boundary.summary == entries[at]["summary"]
    assert boundary.tokens_before == entries[at]["tokensBefore"]
    # after the summary: the kept entries, in order, then what followed (nothing here)
    texts = []
    for event in context[1:]:
        record = event.record
        if isinstance(record, ToolResultRecord):
            texts.append(("toolResult", record.call_id))
        elif isinstance(record, MessageRecord) and event.role == "assistant":
            texts.append(("assistant", record.content[:50]))
        elif isinstance(record, MessageRecord):
            texts.append(("user", record.content[:50]))
    want = []
    for message in kept:
        if message["role"] == "toolResult":
            want.append(("toolResult", message["toolCallId"]))
        elif message["role"] == "assistant":
            text = "\n\n".join(
                b["text"] for b in message["content"] if b["type"] == "text" and b["text"]
            )
            want.append(("assistant", text[:50]))
        else:
            want.append(("user", _user_text(message)[:50]))
    assert texts == want


def test_a_compaction_that_keeps_itself_keeps_nothing(tmp_path: Path) -> None:
    foreign = TOOL.load(_pi("compact.jsonl"))[0]
    store = Store(tmp_path / "home")
    commit(store, foreign)
    with store.open_reader(foreign.session_id) as reader:
        context = reader.context().events
        assert [e.kind for e in context] == ["compaction"]
        assert reader.head == context[0].id
        first = next(e for e in reader.entries() if e.kind == "compaction")
        assert first.id != context[0].id


# -- a synthetic v3 tree --------------------------------------------------------------


def _entry(kind: str, eid: str, parent: str | None, second: int, **fields: Any) -> dict[str, Any]:
    stamp = f"2026-03-01T10:00:{second:02d}.000Z"
    return {"type": kind, "id": eid, "parentId": parent, "timestamp": stamp, **fields}


def _user(eid: str, parent: str | None, second: int, text: str) -> dict[str, Any]:
    return _entry("message", eid, parent, second, message={"role": "user", "content": text})


def _reply(
    eid: str, parent: str, second: int, text: str, calls: tuple[str, ...] = ()
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "thinking", "thinking": f"think {eid}"}]
    content.append({"type": "text", "text": text})
    content += [
        {"type": "toolCall", "id": c, "name": "read", "arguments": {"path": c}} for c in calls
    ]
    message = {
        "role": "assistant",
        "content": content,
        "model": "claude-x",
        "stopReason": "toolUse" if calls else "stop",
        "usage": {"input": 10, "output": 3, "cacheRead": 5, "cacheWrite": 1},
    }
    return _entry("message", eid, parent, second, message=message)


def _tool(eid: str, parent: str, second: int, call: str) -> dict[str, Any]:
    message = {
        "role": "toolResult",
        "toolCallId": call,
        "toolName": "read",
        "content": [{"type": "text", "text": f"file {call}"}],
        "isError": False,
    }
    return _entry("message", eid, parent, second, message=message)


def _v3() -> list[dict[str, Any]]:
    header = {
        "type": "session",
        "version": 3,
        "id": "0197aaaa-0000-7000-8000-000000000001",
        "timestamp": "2026-03-01T10:00:00.000Z",
        "cwd": "/work/pi-demo",
    }
    return [
        header,
        _entry("model_change", "a0000001", None, 1, provider="anthropic", modelId="claude-x"),
        _user("a0000002", "a0000001", 2, "hello"),
        _reply("a0000003", "a0000002", 3, "let me look", ("call-1", "call-2")),
        _tool("a0000004", "a0000003", 4, "call-1"),
        _tool("a0000005", "a0000004", 5, "call-2"),
        _reply("a0000006", "a0000005", 6, "done"),
        _entry("label", "a0000007", "a0000006", 7, targetId="a0000003", label="checkpoint"),
        # /tree back to the first prompt: a branch summary, then the new line of work
        _entry(
            "branch_summary", "a0000008", "a0000002", 8, fromId="a0000007", summary="tried reading"
        ),
        _user("a0000009", "a0000008", 9, "try another way"),
        _reply("a000000a", "a0000009", 10, "another way"),
        _entry(
            "compaction",
            "a000000b",
            "a000000a",
            11,
            summary="all so far",
            firstKeptEntryId="a0000009",
            tokensBefore=1234,
        ),
        _user("a000000c", "a000000b", 12, "after the compaction"),
        _entry("session_info", "a000000d", "a000000c", 13, name="The demo"),
    ]


def _write(path: Path, entries: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


def test_a_v3_tree_keeps_branches_labels_name_and_compaction(tmp_path: Path) -> None:
    path = tmp_path / "2026-03-01T10-00-00-000Z_demo.jsonl"
    _write(path, _v3())
    foreign = TOOL.load(path)[0]
    store = Store(tmp_path / "home")
    assert commit(store, foreign).status == "created"
    info = store.info(foreign.session_id)
    assert info.name == "The demo" and info.working_dir is None
    assert info.extra["import"]["working_dir"] == "/work/pi-demo"
    assert info.extra["import"]["version"] == 3
    with store.open_reader(foreign.session_id) as reader:
        assert len(reader.roots()) == 1
        leaves = reader.leaves()
        assert len(leaves) == 2  # the abandoned line and the current one
        head = reader.event(str(reader.head)).record
        assert isinstance(head, MessageRecord) and head.content == "after the compaction"
        # the label names the reply's message event
        labels = info.extra["import"]["labels"]
        ((target, label),) = labels.items()
        assert label == "checkpoint"
        labelled = reader.event(target).record
        assert isinstance(labelled, MessageRecord) and labelled.content == "let me look"
        assert labelled.reasoning == "think a0000003"
        assert labelled.usage is not None and labelled.usage.input_tokens == 16
        # the branch summary forks from the first prompt and names the abandoned tip
        summary = next(e for e in reader.entries() if e.kind == "branch_summary")
        assert summary.branch_from is not None
        record = reader.event(summary.id).record
        assert isinstance(record, BranchSummaryRecord) and record.summary == "tried reading"
        abandoned = next(e for e in leaves if e.id != reader.head)
        assert record.abandoned_tip == abandoned.id
        # the context: summary, the kept entries again, then what followed
        context = reader.context().events
        kinds = [(e.kind, getattr(e.record, "content", None)) for e in context]
        assert kinds == [
            ("compaction", None),
            ("message", "try another way"),
            ("message", "another way"),
            ("message", "after the compaction"),
        ]
        copy = context[1].record
        assert isinstance(copy, MessageRecord)
        original = reader.event(copy.metadata["copy_of"]).record
        assert isinstance(original, MessageRecord) and original.content == "try another way"
        # calls and results paired, in a line after their message
        line = [e.kind for e in reader.path(abandoned.id, to_boundary=False)]
        assert line == [
            "message",
            "message",
            "tool_call",
            "tool_call",
            "tool_result",
            "tool_result",
            "message",
        ]
    calls = [s[5] for s in foreign.events if isinstance(s[5], ToolCallRecord)]
    assert [c.call_id for c in calls] == ["call-1", "call-2"]
    assert foreign.report.unanswered == 0
    assert foreign.report.kept == Counter({"label": 1, "session_info": 1})


def test_a_v3_file_grown_after_import_adds_only_new_entries(tmp_path: Path) -> None:
    entries = _v3()
    path = tmp_path / "grow.jsonl"
    _write(path, entries[:7])
    store = Store(tmp_path / "home")
    first = commit(store, TOOL.load(path)[0])
    _write(path, entries)
    second = commit(store, TOOL.load(path)[0])
    assert (first.status, second.status) == ("created", "grown")
    whole = Store(tmp_path / "whole")
    full = commit(whole, TOOL.load(path)[0])
    assert first.added + second.added == full.added
    with store.open_reader(first.session_id) as a, whole.open_reader(first.session_id) as b:
        assert sorted((e.id, e.parent_id) for e in a.entries()) == sorted(
            (e.id, e.parent_id) for e in b.entries()
        )
        assert a.head == b.head
    assert commit(store, TOOL.load(path)[0]).status == "unchanged"


def test_a_file_that_is_not_pi_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"type": "message"}\n')
    with pytest.raises(Exception, match=r"x\.jsonl:1: not a Pi session"):
        TOOL.load(path)


def test_an_empty_file_holds_no_session(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    assert TOOL.load(path) == []


def test_extension_entries_message_or_state(tmp_path: Path) -> None:
    entries = [
        *_v3()[:3],
        _entry("custom", "c0000001", "a0000002", 3, customType="todo", data={"n": 1}),
        _entry(
            "custom_message", "c0000002", "c0000001", 4, customType="note", content="remember X"
        ),
    ]
    path = tmp_path / "ext.jsonl"
    _write(path, entries)
    foreign = TOOL.load(path)[0]
    assert foreign.report.skipped["custom"] == 1
    last = foreign.events[-1][5]
    assert isinstance(last, MessageRecord) and last.content == "remember X"
    assert last.metadata["source"]["custom_type"] == "note"
    assert [s[5].content for s in foreign.events] == ["hello", "remember X"]  # type: ignore[union-attr]

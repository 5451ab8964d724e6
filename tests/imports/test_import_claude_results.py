"""Claude Code's structured tool results (``toolUseResult``) are kept, not dropped.

A user line carrying a ``tool_result`` block also carries the tool's own
structured result: a Read's file and line range, a Bash run's stdout/stderr and
interrupted flag, an Edit's patch, a Task's agent id and usage. It is kept on the
tool_result event as ``metadata["tool_use_result"]`` (unless it is only the same
text again), checked here against every corpus file read raw.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from import_corpus import corpus, json_values
from infai.imports import commit, importer_for
from infai.store import Store, ToolResultRecord

TOOL = importer_for("claude-code")
FILES = [
    "claude-code/feipi/8a283a61-e3f0-4e8f-ba06-6711e2fcf2ed.jsonl",
    "claude-code/d-kimuson/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    "claude-code/d-kimuson/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    "claude-code/spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
]


def _expected(path: Path) -> dict[str, object]:
    """Each tool_use_id's structured result, read raw from the file."""
    out: dict[str, object] = {}
    for obj in json_values(path):
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if obj.get("type") != "user" or not isinstance(content, list):
            continue
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if len(results) == 1 and "toolUseResult" in obj and not obj.get("isSidechain"):
            out[results[0]["tool_use_id"]] = obj["toolUseResult"]
    return out


@pytest.mark.parametrize("name", FILES)
def test_structured_tool_results_are_kept_on_the_result(name: str) -> None:
    path = corpus() / name
    expected = _expected(path)
    (session,) = TOOL.load(path)
    results = {
        spec[5].call_id: spec[5] for spec in session.events if isinstance(spec[5], ToolResultRecord)
    }
    assert any(not isinstance(v, str) for v in expected.values())  # the file has some
    for call_id, value in expected.items():
        record = results[call_id]
        kept = record.metadata.get("tool_use_result")
        # kept as it was, or left out only where it repeats the result's text
        assert kept == value or (kept is None and value == record.content), call_id


def test_a_task_result_keeps_its_agent_id_through_the_store(tmp_path: Path) -> None:
    path = corpus() / FILES[3]
    store = Store(tmp_path)
    (session,) = TOOL.load(path)
    commit(store, session)
    with store.open_reader(session.session_id) as reader:
        agents = [
            record.metadata["tool_use_result"].get("agentId")
            for record in (reader.resolve(reader.event(e.id)) for e in reader.entries())
            if isinstance(record, ToolResultRecord)
            and isinstance(record.metadata.get("tool_use_result"), dict)
            and "agentId" in record.metadata["tool_use_result"]
        ]
    assert agents == ["aac57f5"]

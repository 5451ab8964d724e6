"""Codex rollouts import as sessions: every corpus file, a synthetic compaction, bad lines.

The corpus files are read from ``../shared/corpus/codex`` at test time (never
copied here); the counts checked against them are the ones their PROVENANCE
file states, so a miscount in the importer cannot agree with itself.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from import_corpus import corpus
from infai.imports import ForeignSession, ImportOutcome, commit
from infai.imports.codex import CodexImporter
from infai.store import (
    CompactionRecord,
    InvalidInput,
    MessageRecord,
    Store,
    StoreOptions,
    ToolCallRecord,
    ToolResultRecord,
)

CODEX = "codex"


def corpus_dir(tool: str) -> Path:
    return corpus() / tool


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home", StoreOptions(lock_timeout=0.2))


def load(path: Path) -> list[ForeignSession]:
    importer = CodexImporter()
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
    """A rollout is linear: one root, each event after the one before, HEAD last."""
    with store.open_reader(sid) as reader:
        entries = list(reader.entries())
        assert len(reader.roots()) == 1
        assert len(reader.leaves()) == 1
        for before, after in itertools.pairwise(entries):
            assert after.parent_id == before.id
        assert reader.path(to_boundary=False)[-1].id == entries[-1].id


def assert_replies_first(evs: list[Any]) -> None:
    """infai's own layout: calls follow an assistant message, results follow calls."""
    for before, event in itertools.pairwise(evs):
        if isinstance(event.record, ToolCallRecord):
            assert before.role == "assistant"
            assert isinstance(before.record, MessageRecord | ToolCallRecord)


def unanswered(evs: list[Any]) -> list[str]:
    calls = [e.record.call_id for e in evs if isinstance(e.record, ToolCallRecord)]
    results = {e.record.call_id for e in evs if isinstance(e.record, ToolResultRecord)}
    return [c for c in calls if c not in results]


# -- the corpus -------------------------------------------------------------------------


def test_legacy_rollout(store: Store) -> None:
    path = corpus_dir(CODEX) / "acidicsoil-legacy" / "example.jsonl"
    (foreign,) = load(path)
    (outcome,) = import_all(store, path)
    assert outcome.status == "created"
    evs = events(store, outcome.session_id)
    counts = kinds(evs)
    # PROVENANCE: 246 function_call / 246 function_call_output, 106 messages
    assert counts["tool_call"] == 246 and counts["tool_result"] == 246
    assert not unanswered(evs)
    assert_chain(store, outcome.session_id)
    assert_replies_first(evs)
    report = foreign.report.to_obj()
    assert report["skipped"]["record_type/state"]["count"] == 628
    info = store.info(outcome.session_id)
    assert info.extra["import"]["format"] == "legacy"
    assert info.created_at.startswith("2025-09-10T18:58:38")
    assert info.name and info.name.startswith("What's the next task")
    reasoning = [e for e in evs if getattr(e.record, "reasoning", None)]
    assert len(reasoning) >= 100  # 143 reasoning items, several per reply at most


def test_envelope_rollout_usage_is_not_double_counted(store: Store) -> None:
    path = corpus_dir(CODEX) / "acidicsoil"
    (foreign,) = load(path)
    (outcome,) = import_all(store, path)
    sid = outcome.session_id
    evs = events(store, sid)
    counts = kinds(evs)
    assert counts["tool_call"] == 39 and counts["tool_result"] == 39  # PROVENANCE: 39 pairs
    assert_chain(store, sid)
    assert_replies_first(evs)
    info = store.info(sid)
    assert info.model == "gpt-5.1-codex"
    assert info.working_dir is None  # the tool's directory: recorded, not trusted
    assert info.extra["import"]["working_dir"] == "/home/user/projects/temp/chatbot-ui"
    assert info.extra["import"]["cli_version"] == "0.58.0"
    # token_count is written twice per request (the second a repeat): the usage on
    # the replies must add up to Codex's own running total, not twice it
    last_total = None
    for line in path.glob("*.jsonl").__next__().read_text().splitlines():
        obj = json.loads(line)
        info_obj = obj["payload"].get("info") if obj["type"] == "event_msg" else None
        if isinstance(info_obj, dict):
            last_total = info_obj["total_token_usage"]
    assert last_total is not None
    replies = [
        e.record for e in evs if e.role == "assistant" and isinstance(e.record, MessageRecord)
    ]
    assert sum(r.usage.output_tokens for r in replies if r.usage) == last_total["output_tokens"]
    assert sum(r.usage.input_tokens for r in replies if r.usage) == last_total["input_tokens"]
    assert all(r.reasoning for r in replies[:5])  # the reasoning summaries ride on the reply
    assert foreign.report.skipped["event_msg/agent_reasoning"] == 39  # the UI copies
    assert foreign.report.kept["response_item/ghost_snapshot"] == 1
    ghost = [
        e for e in evs if any(n["type"] == "response_item/ghost_snapshot" for n in _notes(e.record))
    ]
    assert len(ghost) == 1


def _notes(record: Any) -> list[dict[str, Any]]:
    meta = getattr(record, "metadata", {}) or {}
    notes: list[dict[str, Any]] = meta.get("codex", {}).get("notes", [])
    return notes


def test_redacted_rollout_reports_the_type_change_and_the_unanswered_call(store: Store) -> None:
    path = corpus_dir(CODEX) / "jerometremblay"
    (foreign,) = load(path)
    (outcome,) = import_all(store, path)
    sid = outcome.session_id
    evs = events(store, sid)
    counts = kinds(evs)
    # PROVENANCE: 92 function_call + 13 custom_tool_call; the last call has no output
    assert counts["tool_call"] == 105
    assert counts["tool_result"] == 104
    assert len(unanswered(evs)) == 1 and foreign.report.unanswered == 1
    assert_chain(store, sid)
    patches = [
        e.record
        for e in evs
        if isinstance(e.record, ToolCallRecord) and e.record.name == "apply_patch"
    ]
    assert len(patches) == 13
    assert all(p.arguments["input"].startswith("*** Begin Patch") for p in patches)
    # token_count.info.last_token_usage is the string "[REDACTED]": one warning, counted
    warnings = [w for w in foreign.report.warnings if "last_token_usage is a str" in w]
    assert len(warnings) == 1 and "more lines like it" in warnings[0]
    assert (store.info(sid).name or "").startswith("i want to run this")


def test_subagent_threads_become_linked_children(store: Store) -> None:
    path = corpus_dir(CODEX) / "feipi-subagents"
    roots = load(path)
    assert len(roots) == 1  # the two subagent rollouts hang from their parent
    (parent,) = roots
    assert any("pretty-printed" in w for w in parent.report.warnings)
    outcome = commit(store, parent)
    assert [c.status for c in outcome.children] == ["created", "created"]
    sid = outcome.session_id
    assert kinds(events(store, sid))["tool_call"] == 5  # tool_search, 2 spawn_agent, 2 wait_agent
    parent_events = {e.id: e for e in events(store, sid)}
    for child in outcome.children:
        info = store.info(child.session_id)
        assert info.parent_session == sid
        call = parent_events[info.parent_event].record
        assert isinstance(call, ToolCallRecord) and call.name == "spawn_agent"
        # the spawn call's result names exactly this child thread
        result = next(
            e.record
            for e in parent_events.values()
            if isinstance(e.record, ToolResultRecord) and e.record.call_id == call.call_id
        )
        assert json.loads(result.content)["agent_id"] == child.source_id
        assert kinds(events(store, child.session_id)) == {
            "message": 5,
            "tool_call": 1,
            "tool_result": 1,
        }
        assert_chain(store, child.session_id)
        assert store.info(child.session_id).extra["import"]["agent_role"] == "implementer"


def test_a_parent_file_named_alone_still_brings_its_subagents(store: Store) -> None:
    (parent,) = (corpus_dir(CODEX) / "feipi-subagents").glob("*019ede24*.jsonl")
    (foreign,) = load(parent)
    assert len(foreign.children) == 2
    assert all(c.parent_event for c in foreign.children)


def test_every_corpus_file_reimports_as_a_no_op(store: Store) -> None:
    root = corpus_dir(CODEX)
    first = [o for d in sorted(root.iterdir()) if d.is_dir() for o in import_all(store, d)]
    assert {o.status for out in first for o in out.walk()} == {"created"}
    assert len([o for out in first for o in out.walk()]) == 6  # every corpus rollout
    again = [o for d in sorted(root.iterdir()) if d.is_dir() for o in import_all(store, d)]
    assert {(o.status, o.added) for out in again for o in out.walk()} == {("unchanged", 0)}


def test_a_grown_rollout_adds_only_its_new_entries(store: Store, tmp_path: Path) -> None:
    (source,) = (corpus_dir(CODEX) / "acidicsoil").glob("*.jsonl")
    data = source.read_bytes()
    lines = data.split(b"\n")
    target = tmp_path / "rollout-grow.jsonl"
    # first Codex had written 120 lines and was half-way through the next one
    target.write_bytes(b"\n".join(lines[:120]) + b"\n" + lines[120][:50])
    (outcome,) = import_all(store, target)
    (partial,) = load(target)
    assert any("cut mid-line" in w for w in partial.report.warnings)
    before = [e.id for e in events(store, outcome.session_id)]
    target.write_bytes(data)
    (grown,) = import_all(store, target)
    assert grown.status == "grown"
    after = [e.id for e in events(store, outcome.session_id)]
    assert after[: len(before)] == before
    fresh = Store(tmp_path / "fresh", StoreOptions(lock_timeout=0.2))
    (whole,) = import_all(fresh, source)
    assert whole.session_id == outcome.session_id
    assert after == [e.id for e in events(fresh, whole.session_id)]
    assert grown.added == len(after) - len(before)
    # the same tree, not only the same events: each event after the same parent
    with (
        store.open_reader(outcome.session_id) as grown_reader,
        fresh.open_reader(whole.session_id) as fresh_reader,
    ):
        assert [(e.id, e.parent_id) for e in grown_reader.entries()] == [
            (e.id, e.parent_id) for e in fresh_reader.entries()
        ]
    (again,) = import_all(store, target)
    assert (again.status, again.added) == ("unchanged", 0)


# -- synthetic rollouts -----------------------------------------------------------------


def line(kind: str, payload: dict[str, Any], second: int) -> dict[str, Any]:
    return {"timestamp": f"2026-01-02T03:04:{second:02d}.000Z", "type": kind, "payload": payload}


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


THREAD = "019b0000-0000-7000-8000-000000000001"


def rollout(tmp_path: Path, body: list[tuple[str, dict[str, Any]]], name: str = "a") -> Path:
    meta = {"id": THREAD, "timestamp": "2026-01-02T03:04:00.000Z", "cwd": "/w"}
    records = [line("session_meta", meta, 0)]
    records += [line(kind, payload, i + 1) for i, (kind, payload) in enumerate(body)]
    path = tmp_path / f"rollout-{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def early_history() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("turn_context", {"cwd": "/w", "model": "gpt-5"}),
        ("response_item", user("<environment_context>cwd</environment_context>")),
        ("response_item", user("first prompt")),
        ("response_item", assistant("first answer")),
        (
            "response_item",
            {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        ),
        ("response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}),
        ("response_item", user("second prompt")),
        ("response_item", assistant("second answer")),
    ]


def test_compacted_with_replacement_history_bounds_the_context(
    store: Store, tmp_path: Path
) -> None:
    replacement = [user("second prompt"), user("SUMMARY: did things")]
    body = [
        *early_history(),
        ("compacted", {"message": "", "replacement_history": replacement}),
        ("event_msg", {"type": "context_compacted"}),
        ("response_item", user("third prompt")),
        ("response_item", assistant("third answer")),
    ]
    (outcome,) = import_all(store, rollout(tmp_path, body))
    sid = outcome.session_id
    with store.open_reader(sid) as reader:
        context = reader.context()
        assert context.boundary is not None
        assert isinstance(context.boundary.record, CompactionRecord)
        texts = [getattr(e.record, "content", None) for e in context.events[1:]]
        assert reader.count == len(events(store, sid))
    # exactly what Codex replays after the compaction: its replacement, then what followed
    assert texts == ["second prompt", "SUMMARY: did things", "third prompt", "third answer"]
    everything = [getattr(e.record, "content", None) for e in events(store, sid)]
    assert "first prompt" in everything  # the old lines stay in the session
    assert_chain(store, sid)


def test_compacted_without_replacement_keeps_the_recent_prompts(
    store: Store, tmp_path: Path
) -> None:
    body = [
        *early_history(),
        ("compacted", {"message": "the summary"}),
        ("response_item", user("third prompt")),
    ]
    (outcome,) = import_all(store, rollout(tmp_path, body))
    with store.open_reader(outcome.session_id) as reader:
        context = reader.context()
    assert context.boundary is not None
    assert isinstance(context.boundary.record, CompactionRecord)
    assert context.boundary.record.summary == "the summary"
    texts = [getattr(e.record, "content", None) for e in context.events[1:]]
    # Codex rebuilds the history from the user's own prompts (not injected context)
    assert texts == ["first prompt", "second prompt", "third prompt"]


def test_odd_lines_are_reported_and_the_rest_imported(store: Store, tmp_path: Path) -> None:
    body = [
        ("response_item", user("hello")),
        (
            "response_item",
            {"type": "function_call", "name": "f", "arguments": "{oops", "call_id": "c"},
        ),
        ("response_item", {"type": "function_call_output", "call_id": "nope", "output": "x"}),
        ("event_msg", {"type": "token_count", "info": {"last_token_usage": [1]}}),
        ("world_state", {"anything": 1}),
        ("response_item", {"type": "brand_new_item", "x": 1}),
        ("response_item", assistant("bye")),
        ("response_item", {"type": "local_shell_call", "call_id": "ls", "action": {"cmd": "ls"}}),
        ("response_item", {"type": "function_call_output", "call_id": "ls", "output": "a b"}),
        ("response_item", {"type": "local_shell_call", "call_id": "ls", "action": {"cmd": "pwd"}}),
    ]
    path = rollout(tmp_path, body)
    text = path.read_text().splitlines()
    text[1] = text[1] + text[1].replace("hello", "hello again")  # two values on one line
    path.write_text("\n".join(text) + "\n")
    (foreign,) = load(path)
    warnings = "\n".join(foreign.report.warnings)
    assert "several JSON values on one line" in warnings
    assert "arguments is not JSON" in warnings
    assert "no call before it" in warnings
    assert "last_token_usage is a list" in warnings
    assert foreign.report.kept["world_state"] == 1
    assert foreign.report.kept["response_item/brand_new_item"] == 1
    assert "call_id ls appears twice" in warnings
    (outcome,) = import_all(store, path)
    contents = [getattr(e.record, "content", None) for e in events(store, outcome.session_id)]
    assert contents[:2] == ["hello", "hello again"]
    call = next(
        e.record for e in events(store, outcome.session_id) if isinstance(e.record, ToolCallRecord)
    )
    assert call.arguments == {"raw": "{oops"}
    shell = [
        e.record
        for e in events(store, outcome.session_id)
        if getattr(e.record, "call_id", "") == "ls"
    ]
    assert [type(r).__name__ for r in shell] == [
        "ToolCallRecord",
        "ToolResultRecord",
        "ToolCallRecord",
    ]
    assert shell[0].arguments == {"action": {"cmd": "ls"}} and shell[1].content == "a b"
    # the unknown entries ride on the next event as metadata
    last = next(
        e.record
        for e in events(store, outcome.session_id)
        if getattr(e.record, "content", 0) == "bye"
    )
    assert {n["type"] for n in _notes(last)} >= {"world_state", "response_item/brand_new_item"}


def test_garbage_mid_file_imports_nothing(store: Store, tmp_path: Path) -> None:
    path = rollout(tmp_path, [("response_item", user("hi")), ("response_item", assistant("yo"))])
    lines = path.read_text().splitlines()
    lines.insert(2, "}{ not json")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidInput, match=r"rollout-a\.jsonl:3"):
        import_all(store, path)
    assert store.list_sessions() == []


def test_a_file_without_session_meta_is_refused(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "rollout-x.jsonl"
    path.write_text(json.dumps(line("response_item", user("hi"), 1)) + "\n")
    with pytest.raises(InvalidInput, match="not a Codex rollout"):
        import_all(store, path)
    assert store.list_sessions() == []


def test_default_location_honours_codex_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "ch"))
    home = tmp_path / "ch"
    assert CodexImporter().default_paths() == [home / "sessions", home / "archived_sessions"]
    monkeypatch.delenv("CODEX_HOME")
    assert CodexImporter().default_paths()[0] == Path.home() / ".codex" / "sessions"


def test_find_searches_rollouts_recursively(tmp_path: Path) -> None:
    day = tmp_path / "sessions" / "2026" / "01" / "02"
    day.mkdir(parents=True)
    path = rollout(day, [("response_item", user("hi"))])
    shutil.copy(path, day / "notes.txt")
    assert CodexImporter().find(tmp_path / "sessions") == [path]
    assert CodexImporter().find(path) == [path]
    with pytest.raises(InvalidInput, match="no such file"):
        CodexImporter().find(tmp_path / "missing")


def test_a_rollback_leaves_the_dropped_turns_on_a_branch(store: Store, tmp_path: Path) -> None:
    body = [
        *early_history(),
        ("response_item", user("third prompt, soon regretted")),
        ("response_item", assistant("third answer")),
        ("event_msg", {"type": "thread_rolled_back", "num_turns": 2}),
        ("response_item", user("second prompt, asked better")),
        ("response_item", assistant("better answer")),
    ]
    (outcome,) = import_all(store, rollout(tmp_path, body))
    with store.open_reader(outcome.session_id) as reader:
        path = [reader.event(e.id).record for e in reader.path(to_boundary=False)]
        leaves = reader.leaves()
    texts = [getattr(r, "content", None) for r in path]
    # HEAD's path: the first turn, then the new second turn (the two dropped are not on it)
    assert [t for t in texts if t and "prompt" in t] == [
        "first prompt",
        "second prompt, asked better",
    ]
    assert texts[-1] == "better answer"
    assert len(leaves) == 2  # the dropped turns stay, as the branch that was left
    evs = events(store, outcome.session_id)
    left = [e for e in evs if getattr(e.record, "content", None) == "third answer"]
    assert left and left[0].id in {leaf.id for leaf in leaves}


def test_the_name_from_a_prompt_carries_no_control_characters(tmp_path: Path) -> None:
    body = [("response_item", user("\x1b]0;owned\x07\x1b[31mfix the bug\x1b[0m\nmore"))]
    (foreign,) = load(rollout(tmp_path, body))
    assert foreign.name is not None and "fix the bug" in foreign.name
    assert foreign.name.isprintable()


def test_a_subagent_rollout_imported_alone_is_linked_once_its_parent_is(store: Store) -> None:
    folder = corpus_dir(CODEX) / "feipi-subagents"
    (child_file,) = folder.glob("*019ede26-ff03*.jsonl")
    (child,) = load(child_file)
    first = commit(store, child)  # before its parent: a session of its own for now
    assert store.info(first.session_id).parent_session is None
    assert any("not imported yet" in w for w in child.report.warnings)
    (parent,) = import_all(store, folder)  # the parent, with both subagents below it
    info = store.info(first.session_id)
    assert info.parent_session == parent.session_id
    spawn = next(e for e in events(store, parent.session_id) if e.id == info.parent_event)
    assert isinstance(spawn.record, ToolCallRecord) and spawn.record.name == "spawn_agent"
    # named alone once the parent is in, the subagent links to the same call
    (again,) = load(child_file)
    assert (again.parent_session, again.parent_event) == (parent.session_id, info.parent_event)


def test_entries_whose_fields_changed_type_import_without_a_traceback(
    store: Store, tmp_path: Path
) -> None:
    body: list[tuple[str, dict[str, Any]]] = [
        ("response_item", {"type": ["message"], "role": "user"}),  # found by fuzzing
        ("event_msg", {"type": {"kind": "token_count"}}),
        ("response_item", {"type": "message", "role": "user", "content": 5}),
        ("response_item", {"type": "message", "role": 7, "content": True}),
        ("response_item", {"type": "reasoning", "summary": "flat text", "content": 3}),
        ("response_item", {"type": "function_call", "name": 9, "call_id": "c", "arguments": 1}),
    ]
    (foreign,) = load(rollout(tmp_path, body))
    assert foreign.report.kept["response_item/<list>"] == 1
    assert foreign.report.kept["event_msg/<dict>"] == 1
    outcome = commit(store, foreign)
    call = next(
        e.record for e in events(store, outcome.session_id) if isinstance(e.record, ToolCallRecord)
    )
    assert (call.name, call.arguments) == ("function", {"value": 1})


def test_a_rollout_cut_inside_a_character_imports_its_complete_lines(tmp_path: Path) -> None:
    (source,) = (corpus_dir(CODEX) / "feipi-subagents").glob("*019ede26-ff03*.jsonl")
    data = source.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    cut = next(i for i in range(last, len(data)) if data[i] >= 0xC0) + 1  # inside a character
    target = tmp_path / "rollout-cut.jsonl"
    target.write_bytes(data[:cut])
    (foreign,) = load(target)
    assert any("cut mid-line" in w for w in foreign.report.warnings)

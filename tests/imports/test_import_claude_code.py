"""Claude Code transcripts import whole, typed, with their tree, subagents and compaction.

Every corpus file is imported and checked against counts taken from the raw
file by a plain reader (tool calls, results, one message per API response,
typed prompts, compactions), against the tree the store then holds (one root
and one leaf, since none of these files has a rewind; HEAD on the tool's own
leaf), and against the links the format defines (subagents hang from their Task
call, the compaction follows the line its boundary names). Synthetic files
cover what the corpus lacks: a rewind branch, parallel calls, a dangling
parent, a file cut mid-line, garbage, growth after import.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from import_corpus import corpus, json_values
from infai.imports import ForeignSession, commit, importer_for
from infai.store import (
    CompactionRecord,
    InvalidInput,
    MessageRecord,
    SessionStore,
    Store,
    ToolCallRecord,
    ToolResultRecord,
)
from infai.store.records import encode_record, record_to_obj

TOOL = importer_for("claude-code")


def _cc() -> Path:
    return corpus() / "claude-code"


def _corpus_files() -> list[str]:
    root = corpus() / "claude-code"
    return [str(p.relative_to(root)) for p in TOOL.find(root)]


def _raw_counts(lines: list[dict[str, Any]]) -> Counter[str]:
    """What a file's chain lines should become, counted from the raw JSON."""
    counts: Counter[str] = Counter()
    responses = set()
    for obj in lines:
        message: dict[str, Any] = obj.get("message") or {}
        content: Any = message.get("content")
        if obj.get("type") == "assistant":
            responses.add(message["id"])
            counts["tool_call"] += [b.get("type") for b in content].count("tool_use")
        elif obj.get("type") == "user" and not obj.get("isCompactSummary"):
            blocks = content if isinstance(content, list) else [content]
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            counts["tool_result"] += len(results)
            counts["message"] += len(results) < len(blocks)
        elif obj.get("subtype") == "compact_boundary":
            counts["compaction"] += 1
    counts["message"] += len(responses)
    return counts


def _chain(path: Path) -> list[dict[str, Any]]:
    return [o for o in json_values(path) if "uuid" in o]


def _import(tmp_path: Path, path: Path) -> tuple[Store, ForeignSession]:
    store = Store(tmp_path / "home")
    foreign = TOOL.load(path)[0]
    assert commit(store, foreign).status == "created"
    return store, foreign


def _stored_kinds(store: SessionStore, session_id: str) -> Counter[str]:
    with store.open_reader(session_id) as reader:
        return Counter(entry.kind for entry in reader.entries())


def _check_tree(store: SessionStore, foreign: ForeignSession) -> None:
    """One root, one leaf, HEAD the importer's head, every result after its call."""
    with store.open_reader(foreign.session_id) as reader:
        assert len(reader.roots()) == 1
        assert len(reader.leaves()) == 1  # no rewind in the corpus: fan-out is not a branch
        assert reader.head == foreign.head == reader.leaves()[0].id
        calls: set[str] = set()
        for entry in reader.path(to_boundary=False):
            record = reader.event(entry.id, resolve=True).record
            if isinstance(record, ToolCallRecord):
                calls.add(record.call_id)
            elif isinstance(record, ToolResultRecord):
                assert record.call_id in calls, "a result before (or without) its call"


@pytest.mark.parametrize("name", _corpus_files())
def test_every_corpus_transcript_imports_with_its_counts_and_tree(
    tmp_path: Path, name: str
) -> None:
    path = _cc() / name
    store, foreign = _import(tmp_path, path)
    sessions = list(foreign.walk())
    inline = [s for s in sessions if s.paths == [str(path)]]
    chain = _chain(path)
    got: Counter[str] = Counter()
    for session in inline:
        got += _stored_kinds(store, session.session_id)
        _check_tree(store, session)
    assert got == _raw_counts(chain)
    for session in sessions:  # subagent files: each one its own session
        if session.paths != [str(path)]:
            sub = Path(session.paths[0])
            assert _stored_kinds(store, session.session_id) == _raw_counts(_chain(sub))
            _check_tree(store, session)
        assert foreign.report.unanswered == 0
        info = store.info(session.session_id)
        assert set(info.extra) == {"import"}  # no permission rules, nothing else
    main_cwd = next(o["cwd"] for o in chain if not o.get("isSidechain") or o is chain[-1])
    info = store.info(foreign.session_id)  # the tool's directory: recorded, not trusted
    assert (info.working_dir, info.extra["import"]["working_dir"]) == (None, main_cwd)
    # importing again writes nothing
    again = commit(store, TOOL.load(path)[0])
    assert [o.status for o in again.walk()] == ["unchanged"] * len(sessions)


def test_inline_sidechains_become_children_of_their_task_calls(tmp_path: Path) -> None:
    path = _cc() / "d-kimuson" / "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    store, foreign = _import(tmp_path, path)
    assert len(foreign.children) == 5
    with store.open_reader(foreign.session_id) as parent:
        for child in foreign.children:
            info = store.info(child.session_id)
            assert info.parent_session == foreign.session_id
            assert info.parent_event is not None
            call = parent.event(info.parent_event).record
            assert isinstance(call, ToolCallRecord) and call.name == "Task"
            with store.open_reader(child.session_id) as reader:
                first = reader.event(reader.roots()[0].id).record
            assert isinstance(first, MessageRecord)
            assert first.content.strip() == call.arguments["prompt"].strip()
    assert len({c.parent_event for c in foreign.children}) == 5


def test_subagent_files_hang_from_their_task_call_and_compaction_point(tmp_path: Path) -> None:
    path = _cc() / "spotter" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
    store, foreign = _import(tmp_path, path)
    children = {Path(c.paths[0]).name: c for c in foreign.children}
    assert set(children) == {"agent-aac57f5.jsonl", "agent-acompact-946d2b.jsonl"}
    with store.open_reader(foreign.session_id) as reader:
        task = store.info(children["agent-aac57f5.jsonl"].session_id)
        assert task.parent_session == foreign.session_id
        call = reader.event(str(task.parent_event)).record
        assert isinstance(call, ToolCallRecord)
        assert call.call_id == "toolu_01Hf8v1Za7y4af8VUwSR4CXU" and call.name == "Task"
        # the compaction helper forked from the line the boundary names, as did the boundary
        helper = store.info(children["agent-acompact-946d2b.jsonl"].session_id)
        context = reader.context()
        boundary = context.boundary
        assert boundary is not None and helper.parent_event == boundary.parent_id
        assert isinstance(boundary.record, CompactionRecord)
        assert boundary.record.tokens_before == 142431
        assert boundary.record.summary.startswith("This session is being continued")
        # what is large (here the summary) went to a blob, by the store's own threshold
        big = [e for e in reader.entries() if e.blob]
        # (adapted, issue 15: tool results now keep Claude Code's structured result,
        # an Edit's whole original file among them, so some go to blobs too)
        assert boundary.id in {e.id for e in big}
        assert {e.kind for e in big} == {"compaction", "tool_result"}
        assert len(encode_record(boundary.record)) > store.options.blob_threshold
        before = reader.path(boundary.id, to_boundary=False)
        assert len(before) > 400  # the whole pre-compaction history is kept, out of context
        assert len(context.events) < len(reader.path(to_boundary=False)) - 400


def test_usage_is_the_last_line_of_a_response_never_a_sum() -> None:
    path = _cc() / "spotter" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
    by_response: dict[str, list[int]] = {}
    for obj in _chain(path):
        if obj.get("type") == "assistant" and not obj.get("isSidechain"):
            by_response.setdefault(obj["message"]["id"], []).append(
                obj["message"]["usage"]["output_tokens"]
            )
    multi = {mid: outs for mid, outs in by_response.items() if sum(outs) != outs[-1]}
    assert multi, "the corpus has responses whose lines repeat usage"
    foreign = TOOL.load(path)[0]  # the records as they will be written
    seen = 0
    for _id, _parent, _branch, role, _time, record in foreign.events:
        if isinstance(record, MessageRecord) and role == "assistant":
            mid = record.metadata["source"]["message_id"]
            assert record.usage is not None
            assert record.usage.output_tokens == by_response[mid][-1]
            seen += mid in multi
    assert seen == len(multi)


def test_head_is_the_last_prompt_leaf(tmp_path: Path) -> None:
    # feipi: last-prompt names an away_summary line, itself after a turn_duration
    # line: both are no event, so HEAD is the reply they follow.
    path = _cc() / "feipi" / "8a283a61-e3f0-4e8f-ba06-6711e2fcf2ed.jsonl"
    store, foreign = _import(tmp_path, path)
    assert foreign.extra["head_rule"] == "last-prompt"
    assert foreign.name == "Optimize readme for end users"  # ai-title
    with store.open_reader(foreign.session_id) as reader:
        head = reader.event(str(reader.head)).record
    assert isinstance(head, MessageRecord)
    assert head.metadata["source"]["message_id"] == "msg_88fbcabb-e84a-474e-9a93-22d42ecacd84"
    assert foreign.report.skipped["permission-mode"] == 3
    assert foreign.report.kept["ai-title"] == 3


# -- synthetic files -----------------------------------------------------------------


def _line(uuid: str, parent: str | None, kind: str, content: Any, **more: Any) -> str:
    obj: dict[str, Any] = {
        "parentUuid": parent,
        "isSidechain": False,
        "type": kind,
        "uuid": uuid,
        "sessionId": "s-1",
        "cwd": "/work/demo",
        "timestamp": f"2026-01-01T00:00:{int(uuid[1:]):02d}.000Z",
    }
    if kind == "assistant":
        obj["message"] = {"id": more.pop("mid", uuid), "role": "assistant", "content": content}
        obj["message"]["model"] = "claude-x"
        obj["message"]["usage"] = {"input_tokens": 10, "output_tokens": 5}
    else:
        obj["message"] = {"role": "user", "content": content}
    obj.update(more)
    return json.dumps(obj) + "\n"


def _use(call_id: str) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": call_id, "name": "Read", "input": {"path": call_id}}]


def _result(call_id: str, is_error: Any = False) -> list[dict[str, Any]]:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": f"out {call_id}"}
    return [{**block, "is_error": is_error}]


def _parallel_and_rewind() -> list[str]:
    """Two parallel calls (each result under its own call line), then a rewind."""
    return [
        _line("u01", None, "user", "read two files"),
        _line("u02", "u01", "assistant", [{"type": "text", "text": "reading"}], mid="m1"),
        _line("u03", "u02", "assistant", _use("ta"), mid="m1"),
        _line("u04", "u03", "assistant", _use("tb"), mid="m1"),
        _line("u05", "u03", "user", _result("ta")),
        _line("u06", "u04", "user", _result("tb")),
        _line("u07", "u06", "assistant", [{"type": "text", "text": "done"}], mid="m2"),
        _line("u08", "u07", "user", "now something else"),
        _line("u09", "u08", "assistant", [{"type": "text", "text": "abandoned"}], mid="m3"),
        _line("u10", "u07", "user", "rewound: try this instead"),  # /rewind to u07
        _line("u11", "u10", "assistant", [{"type": "text", "text": "ok"}], mid="m4"),
    ]


def test_parallel_calls_are_a_line_and_a_rewind_is_a_branch(tmp_path: Path) -> None:
    path = tmp_path / "s-1.jsonl"
    path.write_text("".join(_parallel_and_rewind()))
    store, foreign = _import(tmp_path, path)
    with store.open_reader(foreign.session_id) as reader:
        assert len(reader.leaves()) == 2  # the rewind; the parallel calls made none
        path_kinds = [(e.kind, e.preview) for e in reader.path()]
        assert [k for k, _ in path_kinds] == [
            "message",
            "message",
            "tool_call",
            "tool_call",
            "tool_result",
            "tool_result",
            "message",
            "message",
            "message",
        ]
        assert path_kinds[-1][1] == "ok" and path_kinds[-2][1] == "rewound: try this instead"
        branched = [e for e in reader.entries() if e.branch_from is not None]
        assert len(branched) == 1
        abandoned = [e for e in reader.leaves() if e.id != reader.head]
        assert abandoned[0].preview == "abandoned"


def test_a_dangling_parent_hangs_from_the_line_before_with_a_warning(tmp_path: Path) -> None:
    lines = [*_parallel_and_rewind()[:2], _line("u03", "gone", "user", "orphan")]
    path = tmp_path / "s-1.jsonl"
    path.write_text("".join(lines))
    store, foreign = _import(tmp_path, path)
    assert any("'gone' is not in the file" in w and ":3:" in w for w in foreign.report.warnings)
    with store.open_reader(foreign.session_id) as reader:
        assert len(reader.roots()) == 1 and len(reader.leaves()) == 1


def test_a_type_changed_field_is_reported_and_read(tmp_path: Path) -> None:
    lines = [
        _line("u01", None, "user", "go"),
        _line("u02", "u01", "assistant", _use("ta")),
        _line("u03", "u02", "user", _result("ta", is_error="yes")),
    ]
    path = tmp_path / "s-1.jsonl"
    path.write_text("".join(lines))
    store, foreign = _import(tmp_path, path)
    assert any("is_error is str" in w for w in foreign.report.warnings)
    with store.open_reader(foreign.session_id) as reader:
        result = reader.event(str(reader.head)).record
    assert isinstance(result, ToolResultRecord) and result.is_error


def test_a_file_grown_after_import_adds_only_its_new_entries(tmp_path: Path) -> None:
    source = _cc() / "feipi" / "8a283a61-e3f0-4e8f-ba06-6711e2fcf2ed.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    grown = tmp_path / source.name
    grown.write_bytes(b"".join(lines[:14]))
    store = Store(tmp_path / "home")
    first = commit(store, TOOL.load(grown)[0])
    assert first.status == "created"
    with store.open_reader(first.session_id) as reader:
        before = [e.id for e in reader.entries()]
    with grown.open("ab") as f:
        f.write(b"".join(lines[14:]))
    loaded = TOOL.load(grown)[0]
    second = commit(store, loaded)
    assert second.status == "grown" and second.session_id == first.session_id
    whole = Store(tmp_path / "whole")
    commit(whole, TOOL.load(source)[0])

    # Adapted (issue 15): line 14 ends inside a response (its usage and stop reason are
    # on a later line), so that reply is revised: appended again complete, with what
    # follows it, and the partial one stays as an abandoned branch. The HEAD path says
    # what a fresh import of the whole file says.
    def path(s: Store) -> list[tuple[str, str, dict[str, Any]]]:
        with s.open_reader(first.session_id) as reader:
            return [
                (e.kind, e.role, record_to_obj(reader.resolve(e)))
                for e in (reader.event(x.id) for x in reader.path(to_boundary=False))
            ]

    assert path(store) == path(whole)
    with store.open_reader(first.session_id) as a, whole.open_reader(first.session_id) as b:
        assert set(before) <= {e.id for e in a.entries()}  # nothing imported is lost
        on_path = {e.id for e in a.path(to_boundary=False)}
        abandoned = [x for x in before if x not in on_path]  # the partial reply and its calls
        assert 0 < len(abandoned) < 5
        assert first.added + second.added == a.count == b.count + len(abandoned)
    assert any("still being written" in w for w in loaded.report.warnings)
    assert commit(store, TOOL.load(grown)[0]).status == "unchanged"


def test_a_file_cut_mid_line_imports_its_whole_lines_and_says_so(tmp_path: Path) -> None:
    lines = _parallel_and_rewind()
    path = tmp_path / "s-1.jsonl"
    path.write_text("".join(lines[:6]) + lines[6][:40])
    store, foreign = _import(tmp_path, path)
    assert any(":7: the file ends inside a record" in w for w in foreign.report.warnings)
    assert _stored_kinds(store, foreign.session_id)["tool_result"] == 2
    path.write_text("".join(lines))  # the tool finished the line, and went on
    assert commit(store, TOOL.load(path)[0]).status == "grown"


def test_garbage_in_the_middle_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    lines = _parallel_and_rewind()
    path = tmp_path / "s-1.jsonl"
    path.write_text("".join(lines[:3]) + "{not json at all\n" + "".join(lines[3:]))
    with pytest.raises(InvalidInput, match=r"s-1\.jsonl:4: byte offset \d+: not JSON"):
        TOOL.load(path)


def test_a_failure_midway_removes_every_session_it_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _cc() / "spotter" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
    foreign = TOOL.load(path)[0]
    store = Store(tmp_path / "home")
    real = store.create_session
    made: list[str] = []

    def failing(**kwargs: Any) -> Any:
        if len(made) == 2:  # the second child
            raise OSError(28, "No space left on device")
        made.append(kwargs["session_id"])
        return real(**kwargs)

    monkeypatch.setattr(store, "create_session", failing)
    with pytest.raises(OSError):
        commit(store, foreign)
    assert store.list_sessions() == []
    assert len(made) == 2


def test_subagent_file_named_alone_imports_its_parent(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    shutil.copytree(_cc() / "spotter", root)
    sub = next((root / "ae4a77f8-aedd-4bc1-888f-c94edc91af04" / "subagents").glob("*.jsonl"))
    assert TOOL.find(sub) == [root / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"]
    assert TOOL.find(root) == [root / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"]


def test_a_file_of_summary_lines_only_holds_no_session(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text('{"type":"summary","summary":"A title","leafUuid":"x"}\n')
    assert TOOL.load(path) == []

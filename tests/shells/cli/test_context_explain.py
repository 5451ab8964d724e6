"""``infai session context SESSION --explain`` (and ``--json``): each event on the
path with the rule that kept, shortened or dropped it, and the messages sent."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from infai.shells.cli.main import main
from infai.store import (
    CompactionRecord,
    HookRecord,
    MessageRecord,
    SnapshotRecord,
    Store,
    ToolCallRecord,
    ToolResultRecord,
)


def _session(home: Path, work: Path) -> tuple[str, list[str]]:
    store = Store(home)
    sid = store.create_session(working_dir=str(work)).id
    ids = []
    with store.open_writer(sid) as w:
        for record, role in (
            (MessageRecord(content="before the summary"), "user"),
            (CompactionRecord(summary="we did things", facts=["f1"]), "assistant"),
            (MessageRecord(content="go on"), "user"),
            (HookRecord(event="UserPromptSubmit", command="x", context="branch: main"), "system"),
            (ToolCallRecord(call_id="a", name="bash", arguments={"command": "ls"}), "assistant"),
            (SnapshotRecord(tree="0" * 64, reason="after bash"), "system"),
            (ToolCallRecord(call_id="b", name="bash", arguments={}), "assistant"),
            (ToolResultRecord(call_id="zz", name="bash", content="stray"), "tool"),
        ):
            ids.append(w.append(record, role).id)
    return sid, ids


def test_explain_says_which_rule_decided_each_event(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    sid, ids = _session(tmp_path / "home", work)
    run = CliRunner().invoke(
        main, ["--home", str(tmp_path / "home"), "session", "context", sid, "--explain"]
    )
    assert run.exit_code == 0, run.output
    lines = run.stdout.splitlines()
    assert lines[0].startswith("rules: compaction-boundary, workspace-files, hook-context")
    by_seq = [line for line in lines[1:] if line[:5].strip().isdigit()]
    assert [line.split()[1] for line in by_seq] == [i[:8] for i in ids]
    by_id = dict(zip(ids, by_seq, strict=True))
    assert "dropped   compaction-boundary: before the compaction" in by_id[ids[0]]
    assert "kept      compaction-boundary: the summary of what came before it" in by_id[ids[1]]
    assert "kept      as stored" in by_id[ids[2]]
    assert "kept      hook-context: what the UserPromptSubmit hook added" in by_id[ids[3]]
    assert "kept      assembly: no result follows it: answered as interrupted" in by_id[ids[4]]
    assert "dropped   workspace-files: files on disk" in by_id[ids[5]]
    assert "dropped   assembly: its call is not on the path" in by_id[ids[7]]
    assert lines[-1] == "8 events: 5 kept, 0 shortened, 3 dropped; 6 messages sent"


def test_explain_json_has_each_event_and_the_messages(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".infai").mkdir(parents=True)
    config = tmp_path / "user.toml"
    config.write_text(f'trusted_projects = ["{work}"]\n')
    (work / ".infai" / "config.toml").write_text('[context]\nrules = ["elsewhere"]\n')
    sid, ids = _session(tmp_path / "home", work)
    run = CliRunner(env={"INFAI_CONFIG": str(config)}).invoke(
        main,
        ["--home", str(tmp_path / "home"), "session", "context", sid, "--explain", "--json"],
    )
    assert run.exit_code == 0, run.output
    obj = json.loads(run.stdout)
    assert obj["missing_rules"] == ["elsewhere"]  # registered by some program, not here
    assert [e["id"] for e in obj["events"]] == ids
    assert [e["action"] for e in obj["events"]] == [
        "dropped", "kept", "kept", "kept", "kept", "dropped", "kept", "dropped",
    ]  # fmt: skip
    summary = obj["events"][1]["sent"]
    assert summary["role"] == "user" and "- f1" in summary["content"]
    roles = [m["role"] for m in obj["messages"]]
    assert roles == ["user", "user", "user", "assistant", "tool", "tool"]
    assert obj["messages"][2]["content"] == "[UserPromptSubmit hook]\nbranch: main"
    assert [c["id"] for c in obj["messages"][3]["tool_calls"]] == ["a", "b"]
    assert obj["messages"][4]["is_error"] is True


def test_explain_shows_an_event_no_model_takes_instead_of_failing(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(MessageRecord(content="hi"), "user")
        odd = w.append(MessageRecord(content="from an import"), "tool").id
    base = ["--home", str(tmp_path / "home"), "session", "context", sid, "--explain"]
    run = CliRunner().invoke(main, base)
    assert run.exit_code == 0, run.output
    lines = run.stdout.splitlines()
    assert "dropped   assembly: no model takes a message with this role" in lines[2]
    assert lines[-1].startswith(f"no model can be sent this context: event {odd} is a message")
    obj = json.loads(CliRunner().invoke(main, [*base, "--json"]).stdout)
    assert "role 'tool'" in obj["error"] and len(obj["messages"]) == 1

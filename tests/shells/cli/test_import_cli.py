"""``infai import``: exit codes, the summary, ``--json``, default locations, partial failure.

Bad input (an unknown tool, a missing path) exits 2 with nothing imported, even
for the paths that were fine; a file that cannot be imported exits 1 while the
others import; a second run imports nothing new.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from import_corpus import corpus
from infai.shells.cli.main import main
from infai.store import Store


def _run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--home", str(home), *args])


def _table(out: str) -> dict[str, int]:
    """The summary table's one row, by column name."""
    rows = [
        [cell.strip() for cell in line.strip("┃│ ").replace("┃", "│").split("│")]
        for line in out.splitlines()
        if line.startswith(("┃", "│"))
    ]
    header, values = rows[0], rows[1]
    return {name: int(value) for name, value in zip(header, values, strict=True)}


def _pi_dir(tmp_path: Path) -> Path:
    """Two small Pi sessions (a corpus file's head, and a synthetic v3 one)."""
    where = tmp_path / "pi"
    where.mkdir()
    lines = (corpus() / "pi" / "pi-mono" / "large-session.jsonl").read_bytes().splitlines(True)
    (where / "a.jsonl").write_bytes(b"".join(lines[:40]))
    header = {"type": "session", "version": 3, "id": "s-b", "timestamp": "2026-03-01T10:00:00Z"}
    entry = {
        "type": "message",
        "id": "b1",
        "parentId": None,
        "timestamp": "2026-03-01T10:00:01Z",
        "message": {"role": "user", "content": "hi"},
    }
    (where / "b.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n")
    (where / "empty.jsonl").write_text("")  # Pi buffers a new session: no file content yet
    return where


def test_import_prints_a_summary_and_a_second_run_adds_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    source = _pi_dir(tmp_path)
    first = _run(home, "import", "pi", str(source))
    assert first.exit_code == 0, first.output
    assert "files" in first.stdout and "created" in first.stdout
    table = _table(first.stdout)
    assert (table["files"], table["failed"], table["created"], table["unchanged"]) == (3, 0, 2, 0)
    assert table["events"] > 40
    assert len(Store(home).list_sessions()) == 2
    again = _run(home, "import", "pi", str(source), "--json")
    assert again.exit_code == 0
    data = json.loads(again.stdout)
    assert data["totals"]["unchanged"] == 2 and data["totals"]["events"] == 0
    assert len(Store(home).list_sessions()) == 2


def test_json_gives_a_result_per_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    source = corpus() / "claude-code" / "spotter"
    result = _run(home, "import", "claude-code", str(source), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["tool"] == "claude-code" and data["totals"]["files"] == 1
    (only,) = data["files"]
    assert only["ok"] and only["path"].endswith("ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl")
    (session,) = only["sessions"]
    assert session["status"] == "created" and len(session["children"]) == 2
    assert data["totals"]["created"] == 3
    reports = {Path(r["path"]).name: r for r in only["reports"]}
    main_report = reports["ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"]
    assert main_report["events"]["compaction"] == 1
    assert main_report["skipped"]["progress/hook_progress"]["count"] == 1447
    info = Store(home).info(session["session"])
    assert set(info.extra) == {"import"}  # no permission rules ride along


def test_an_unknown_tool_or_a_missing_path_changes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    source = _pi_dir(tmp_path)
    unknown = _run(home, "import", "gemini", str(source))
    assert unknown.exit_code == 2
    missing = _run(home, "import", "pi", str(source), str(tmp_path / "nope"))
    assert missing.exit_code == 2
    assert "nope: no such file or directory" in missing.stderr
    assert Store(home).list_sessions() == []  # not even the path that was fine


def test_a_bad_file_exits_1_and_the_others_still_import(tmp_path: Path) -> None:
    home = tmp_path / "home"
    source = _pi_dir(tmp_path)
    good = (source / "a.jsonl").read_text().splitlines(True)
    (source / "c.jsonl").write_text("".join(good[:5]) + "garbage here\n" + "".join(good[5:]))
    result = _run(home, "import", "pi", str(source))
    assert result.exit_code == 1
    assert "c.jsonl:6: byte offset" in result.stderr and "not JSON" in result.stderr
    assert len(Store(home).list_sessions()) == 2  # a and b; c not half-imported


def test_without_a_path_the_tool_default_location_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_home = tmp_path / "user"
    monkeypatch.setenv("HOME", str(fake_home))
    home = tmp_path / "home"
    none = _run(home, "import", "pi")
    assert none.exit_code == 2 and ".pi/agent/sessions" in none.stderr
    sessions = fake_home / ".pi" / "agent" / "sessions" / "--work-demo--"
    sessions.parent.mkdir(parents=True)
    shutil.copytree(_pi_dir(tmp_path), sessions)
    found = _run(home, "import", "pi", "--json")
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["totals"]["created"] == 2
    projects = fake_home / ".claude" / "projects" / "-work-demo"
    shutil.copytree(corpus() / "claude-code" / "feipi", projects)
    claude = _run(home, "import", "claude-code", "--json")
    assert claude.exit_code == 0 and json.loads(claude.stdout)["totals"]["created"] == 1


def test_warnings_from_foreign_text_never_reach_the_terminal_raw(tmp_path: Path) -> None:
    source = tmp_path / "cc"
    source.mkdir()
    line = {
        "type": "user",
        "uuid": "u1",
        "parentUuid": None,
        "sessionId": "s",
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "\x1b]0;owned\x07", "content": "x"}],
        },
    }
    (source / "s.jsonl").write_text(json.dumps(line) + "\n")
    result = _run(tmp_path / "home", "import", "claude-code", str(source))
    assert result.exit_code == 0, result.output
    assert "whose call is not in the file" in result.stderr
    assert "\x1b" not in result.stderr and "\\x1b]0;owned" in result.stderr

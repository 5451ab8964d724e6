"""``infai session ls`` groups a session imported from another tool under the
directory the tool recorded, though the session names none (display only: the
recorded directory never decides where it works)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main
from infai.shells.listing import NO_DIRECTORY, shown_dir
from infai.store import Store


def infai(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def _pi_file(path: Path, cwd: str) -> Path:
    header = {"type": "session", "version": 3, "id": "0197aaaa-0000-7000-8000-0000000000b2",
              "timestamp": "2026-03-01T10:00:00.000Z", "cwd": cwd}  # fmt: skip
    prompt = {"type": "message", "id": "c0000001", "parentId": None,
              "timestamp": "2026-03-01T10:00:01.000Z",
              "message": {"role": "user", "content": "an imported prompt"}}  # fmt: skip
    path.write_text(json.dumps(header) + "\n" + json.dumps(prompt) + "\n")
    return path


def test_an_imported_session_is_listed_under_the_tools_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, project, elsewhere = tmp_path / "home", tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    project = project.resolve()
    mine = Store(home).create_session(name="mine", working_dir=str(project)).id
    Store(home).create_session(name="nowhere")
    monkeypatch.chdir(elsewhere)
    infai(home, "import", "pi", str(_pi_file(tmp_path / "s.jsonl", str(project))))
    (imported,) = [i for i in Store(home).list_sessions() if "import" in i.extra]
    assert imported.working_dir is None  # recorded, not trusted ...
    assert shown_dir(imported) == str(project)  # ... but shown
    listed = json.loads(infai(home, "session", "ls", "--json").stdout)
    assert {s["id"]: s["working_dir"] for s in listed}[imported.id] is None
    monkeypatch.chdir(project)
    lines = infai(home, "session", "ls").stdout.splitlines()
    assert lines[1] == f"{project} (this directory)"
    assert sorted(line.split()[0] for line in lines[2:4]) == sorted([mine, imported.id])
    assert lines[4] == "(no directory)" and lines[5].endswith("nowhere") and len(lines) == 6


def test_a_session_with_no_directory_recorded_anywhere_stays_in_none(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    plain = store.create_session()
    assert shown_dir(plain) == NO_DIRECTORY
    odd = store.update_info(plain.id, extra={"import": {"tool": "pi", "working_dir": 7}})
    assert shown_dir(odd) == NO_DIRECTORY  # a value of the wrong type is not shown

"""``infai session import`` of an infai export records the directory it drops.

An export file comes from outside, so the session's ``working_dir`` is dropped
(a checkout writes there, tools run there: the file must not choose it). It is
kept, as the importers of other tools keep theirs, in the import metadata
(``extra["import"]["working_dir"]``): ``session ls`` groups the session under it
(display only), and it is never where the session works. ``store copy`` (the
user's own stores, ``trusted``) keeps the working directory as it was.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from infai.imports import commit, importer_for
from infai.shells.cli import main
from infai.shells.listing import shown_dir
from infai.store import MessageRecord, Store, export_lines, import_session


def infai(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def _exported(store: Store, sid: str) -> bytes:
    """``sid`` exported, then removed from ``store`` (importing creates it again)."""
    data = b"".join(export_lines(store, sid))
    store.remove_session(sid)
    return data


def _session(store: Store, working_dir: str | None, **extra: Any) -> str:
    sid = store.create_session(name="shared", working_dir=working_dir).id
    with store.open_writer(sid) as writer:
        writer.append(MessageRecord(content="hello"), "user")
    if extra:
        store.update_info(sid, extra=extra)
    return sid


def test_the_dropped_directory_is_recorded_for_display(tmp_path: Path) -> None:
    victim = str(tmp_path / "victim" / ".ssh")
    store = Store(tmp_path / "home")
    data = _exported(store, _session(store, victim, note="kept"))
    said: list[str] = []
    info = import_session(store, io.BytesIO(data), "x.jsonl", report=said.append)
    assert info.working_dir is None  # never trusted ...
    assert info.extra == {"note": "kept", "import": {"working_dir": victim}}  # ... but kept
    assert shown_dir(info) == victim
    (note,) = said
    assert f"working_dir {victim!r} dropped" in note and "extra.import.working_dir" in note


def test_an_exported_foreign_import_keeps_its_mark_and_gains_the_directory(
    tmp_path: Path,
) -> None:
    """A Pi import an older infai made (the tool's directory as the session's own,
    none in the mark), exported and imported again: the mark's keys travel and
    the directory is recorded in it, so a later ``infai import pi`` of the same
    file finds nothing to drop and leaves it working nowhere."""
    tool_dir = str(tmp_path / "app")
    path = _pi_file(tmp_path / "s.jsonl", tool_dir)
    store = Store(tmp_path / "home")
    (foreign,) = importer_for("pi").load(path)
    commit(store, foreign)
    sid = foreign.session_id
    old = store.info(sid)
    mark = {k: v for k, v in old.extra["import"].items() if k != "working_dir"}
    store.restore_info(old.replace(working_dir=tool_dir, extra={"import": mark}))  # as before
    data = _exported(store, sid)
    said: list[str] = []
    info = import_session(store, io.BytesIO(data), report=said.append)
    assert info.working_dir is None
    assert info.extra["import"] == {**mark, "working_dir": tool_dir}
    (again,) = importer_for("pi").load(path)
    assert commit(store, again).status == "unchanged"
    assert not again.report.warnings  # nothing left to drop
    after = store.info(sid)
    assert after.working_dir is None and after.extra["import"]["working_dir"] == tool_dir


def test_a_re_import_still_drops_a_directory_a_copy_kept(tmp_path: Path) -> None:
    """``store copy`` (trusted) keeps an older infai's working directory as it was;
    the next ``infai import`` of the tool's file drops it, as it does in the store
    the older infai filled (the behaviour this change must leave alone)."""
    tool_dir = str(tmp_path / "app")
    path = _pi_file(tmp_path / "s.jsonl", tool_dir)
    store = Store(tmp_path / "home")
    (foreign,) = importer_for("pi").load(path)
    commit(store, foreign)
    sid = foreign.session_id
    old = store.info(sid)
    mark = {k: v for k, v in old.extra["import"].items() if k != "working_dir"}
    store.restore_info(old.replace(working_dir=tool_dir, extra={"import": mark}))
    data = _exported(store, sid)
    info = import_session(store, io.BytesIO(data), trusted=True)
    assert info.working_dir == tool_dir and info.extra == {"import": mark}  # kept as it was
    (again,) = importer_for("pi").load(_pi_file(path, str(tmp_path / "elsewhere")))
    commit(store, again)
    assert store.info(sid).working_dir is None
    assert any("dropped" in w for w in again.report.warnings)


@pytest.mark.parametrize("odd", ["a string", 7, ["x"], None])
def test_a_mark_that_is_not_an_object_is_replaced(tmp_path: Path, odd: object) -> None:
    store = Store(tmp_path / "home")
    data = _exported(store, _session(store, "/src/app"))
    header, rest = data.split(b"\n", 1)
    obj = json.loads(header)
    obj["session"]["extra"] = {"import": odd}
    info = import_session(store, io.BytesIO(json.dumps(obj).encode() + b"\n" + rest))
    assert info.extra == {"import": {"working_dir": "/src/app"}}


def test_a_file_naming_no_directory_gains_no_mark(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    data = _exported(store, _session(store, None, note="n"))
    said: list[str] = []
    info = import_session(store, io.BytesIO(data), report=said.append)
    assert info.extra == {"note": "n"} and not said


def test_session_ls_groups_an_imported_export_under_its_recorded_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, project, elsewhere = tmp_path / "home", tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    project = project.resolve()
    store = Store(home)
    export = tmp_path / "s.jsonl"
    export.write_bytes(_exported(store, _session(store, str(project))))
    mine = store.create_session(name="mine", working_dir=str(project)).id
    monkeypatch.chdir(elsewhere)
    result = infai(home, "session", "import", str(export))
    assert "recorded as extra.import.working_dir" in result.stderr
    listed = json.loads(infai(home, "session", "ls", "--json").stdout)
    (imported,) = [s for s in listed if s["id"] != mine]
    assert imported["working_dir"] is None
    monkeypatch.chdir(project)
    lines = infai(home, "session", "ls").stdout.splitlines()
    assert lines[1] == f"{project} (this directory)"
    assert sorted(line.split()[0] for line in lines[2:]) == sorted([mine, imported["id"]])


def _pi_file(path: Path, cwd: str) -> Path:
    header = {"type": "session", "version": 3, "id": "0197aaaa-0000-7000-8000-0000000000d4",
              "timestamp": "2026-03-01T10:00:00.000Z", "cwd": cwd}  # fmt: skip
    prompt = {"type": "message", "id": "d0000001", "parentId": None,
              "timestamp": "2026-03-01T10:00:01.000Z",
              "message": {"role": "user", "content": "an imported prompt"}}  # fmt: skip
    path.write_text(json.dumps(header) + "\n" + json.dumps(prompt) + "\n")
    return path

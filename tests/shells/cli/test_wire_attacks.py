"""Attacks through the command line on files on the timeline, judged by their effect.

An export file comes from outside: its session's ``working_dir`` is where a
checkout of its files would write (and where its tools would run). A crafted
file naming a directory of the user's (``~/.ssh``) must not get its files
written there: an imported session works where it is continued from.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from infai.checkpoints import Checkpoints
from infai.shells.cli import main
from infai.store import Store


@pytest.fixture(autouse=True)
def checkpoints_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-wide config turns snapshots off; these tests are about them."""
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "no-such-config.toml"))


def infai(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def _crafted_export(tmp_path: Path, victim: Path) -> tuple[Path, str, str]:
    """An export made by real infai on the attacker's machine: one snapshot of
    ``.ssh/authorized_keys`` holding the attacker's key, in a session whose
    working directory names the victim's. (export file, session, event)"""
    attacker_home, evil = tmp_path / "attacker-home", tmp_path / "evil"
    (evil / ".ssh").mkdir(parents=True)
    (evil / ".ssh" / "authorized_keys").write_text("ssh-ed25519 ATTACKER\n")
    store = Store(attacker_home)
    cp = Checkpoints(store.objects, evil, attacker_home, watch=False)
    snap = cp.snapshot()
    cp.close()
    sid = store.create_session(working_dir=str(victim)).id
    with store.open_writer(sid) as writer:
        event = writer.append(snap.record("turn start"), "system")
    exported = tmp_path / "shared.jsonl"
    infai(attacker_home, "session", "export", sid, "-o", str(exported))
    assert json.loads(exported.read_text().splitlines()[0])["session"]["working_dir"] == str(victim)
    return exported, sid, event.id


def test_an_imported_session_cannot_choose_where_checkout_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = tmp_path / "victim"
    (victim / ".ssh").mkdir(parents=True)
    (victim / ".ssh" / "authorized_keys").write_text("ssh-ed25519 MINE\n")
    exported, sid, event = _crafted_export(tmp_path, victim)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    home = tmp_path / "home"
    imported = infai(home, "session", "import", str(exported))
    assert imported.stdout.strip() == sid
    infai(home, "session", "checkout", "--force", sid, event)
    assert (victim / ".ssh" / "authorized_keys").read_text() == "ssh-ed25519 MINE\n"
    assert sorted(p.name for p in victim.rglob("*")) == [".ssh", "authorized_keys"]
    # the files went where the user asked for them: the directory it was run in
    assert (here / ".ssh" / "authorized_keys").read_text() == "ssh-ed25519 ATTACKER\n"
    assert f"working_dir {str(victim)!r} dropped" in imported.stderr  # and it was said


def test_a_file_name_with_a_newline_prints_no_line_of_its_choosing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file named ``x<newline>  skipped: ...`` (a tool can make one) must not add a
    line to `session files`, `session diff` or a checkout plan: it is quoted, as
    git quotes such names."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    forged = 'x\n  skipped: secret.env (ignored)\n+++ "quoted\tname"'
    (work / forged).write_text("one\n")
    store = Store(home)
    cp = Checkpoints(store.objects, work, home, watch=False)
    snap = cp.snapshot()
    cp.close()
    sid = store.create_session(working_dir=str(work)).id
    with store.open_writer(sid) as writer:
        event = writer.append(snap.record("turn start"), "system").id
    monkeypatch.chdir(work)
    shown = json.dumps(forged, ensure_ascii=False)
    listed = infai(home, "session", "files", sid).stdout.splitlines()
    assert len(listed) == 2 and listed[1].endswith(shown)
    (work / forged).write_text("two\n")
    diff = infai(home, "session", "diff", sid, event).stdout.splitlines()
    assert diff[:2] == [f"--- {json.dumps('a/' + forged)}", f"+++ {json.dumps('b/' + forged)}"]
    assert not any(line.startswith("  skipped") for line in diff)
    plan = infai(home, "session", "checkout", "--dry-run", sid, event).stdout.splitlines()
    assert plan == [f"  write {shown}", "dry run: 1 path(s) would change; nothing changed"]


#: a crafted tree: (name, type, bytes of a file or link target, or a dir's rows)
Rows = list[tuple[str, str, Any]]


def _forge(exported: Path, rows: Rows) -> None:
    """Edit a real export file: its (one) snapshot now names a tree of ``rows``,
    every object line replaced by those it reaches."""
    objects: dict[str, bytes] = {}

    def put(data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        objects[digest] = data
        return digest

    def tree(rows: Rows) -> str:
        entries = [
            [name, kind, tree(data) if kind == "dir" else put(data), 1, 0]
            for name, kind, data in sorted(rows)
        ]
        return put(json.dumps({"v": 1, "entries": entries}, separators=(",", ":")).encode())

    root = tree(rows)
    lines: list[dict[str, Any]] = []
    for line in exported.read_text().splitlines():
        obj = json.loads(line)
        if "object" in obj:
            continue
        if obj.get("kind") == "snapshot":
            obj["record"]["tree"] = root
        lines.append(obj)
    lines += [{"object": d, "data": base64.b64encode(b).decode()} for d, b in objects.items()]
    exported.write_text("".join(json.dumps(obj) + "\n" for obj in lines))


def test_a_link_target_no_snapshot_makes_is_refused_and_nothing_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crafted link whose target holds a NUL: the restore used to stop with a
    traceback (ValueError) halfway, the user's file removed and a journal left."""
    exported, sid, event = _crafted_export(tmp_path, tmp_path / "elsewhere")
    _forge(exported, [("a.txt", "file", b"A\n"), ("l", "link", b"x\0y"), ("z", "file", b"Z")])
    here = tmp_path / "here"
    here.mkdir()
    (here / "mine.txt").write_text("mine\n")
    monkeypatch.chdir(here)
    home = tmp_path / "home"
    infai(home, "session", "import", str(exported))
    out = infai(home, "session", "checkout", "--force", sid, event, code=1)
    assert "'l': the snapshot's link target" in out.stderr and "was undone" in out.stderr
    assert sorted(p.name for p in here.iterdir()) == ["mine.txt"]
    assert (here / "mine.txt").read_text() == "mine\n"
    assert not list((home / "journal").glob("*.json"))  # nothing left to recover


def _imported(tmp_path: Path, rows: Rows) -> tuple[Path, Path, str, str]:
    """A crafted export of ``rows`` made by :func:`_forge`; (home, export, session, event)."""
    exported, sid, event = _crafted_export(tmp_path, tmp_path / "elsewhere")
    _forge(exported, rows)
    return tmp_path / "home", exported, sid, event


def test_a_name_no_file_can_have_is_refused_at_import(tmp_path: Path) -> None:
    """A lone surrogate cannot be encoded: the restore used to crash on it before
    the first write with a journal kept, and every later restore or recovery in
    that directory crashed the same way."""
    home, exported, _, _ = _imported(tmp_path, [("b\ud800", "file", b"x")])
    out = infai(home, "session", "import", str(exported), code=2)
    assert "bad entry name 'b\\ud800'" in out.stderr
    assert infai(home, "session", "ls", "--json").stdout.strip() == "[]"


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_a_name_too_long_for_the_filesystem_is_undone_and_leaves_no_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A 300-byte name: the write fails, and the undo used to fail on the same
    name, leaving the user's file removed and a journal no recovery could finish."""
    long = "n" * 300
    row = (long, "file", b"x") if kind == "file" else (long, "dir", [("f", "file", b"x")])
    home, exported, sid, event = _imported(tmp_path, [("a.txt", "file", b"A"), row])
    here = tmp_path / "here"
    here.mkdir()
    (here / "mine.txt").write_text("mine\n")
    monkeypatch.chdir(here)
    infai(home, "session", "import", str(exported))
    out = infai(home, "session", "checkout", "--force", sid, event, code=1)
    assert "was undone" in out.stderr
    assert sorted(p.name for p in here.iterdir()) == ["mine.txt"]
    assert not list((home / "journal").glob("*.json"))
    infai(home, "session", "checkout", "--dry-run", sid, event)  # nothing to recover

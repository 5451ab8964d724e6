"""What a session's files on the timeline may not be made to do: print a line of
a file name's choosing, or hash and write the whole home directory.

A session that names no working directory (an imported one) works in the current
one, so ``diff`` against the files now and ``checkout`` run from ``~`` would
snapshot every file the user has, or write among them: they refuse there, as
opening a session there snapshots nothing. Reading what the store holds
(``files_at``, a diff of two recorded events) still works anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infai.agent import OnRestore, RestoreRefused, checkout, diff_at, files_at
from infai.checkpoints import Checkpoints
from infai.store import InvalidInput, Store

#: a name a tool can give a file: with it, a message listing paths one a line
#: would print a line of the name's choosing
FORGED = "x\n  skipped: secret.env (ignored)"


@pytest.fixture(autouse=True)
def checkpoints_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-wide config turns snapshots off; these tests are about them."""
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "no-such-config.toml"))


def _recorded(store: Store, work: Path, working_dir: str | None) -> tuple[str, str]:
    """A session whose one snapshot holds ``work``'s files: (session, event)."""
    cp = Checkpoints(store.objects, work, store.home, watch=False)
    snap = cp.snapshot()
    cp.close()
    sid = store.create_session(working_dir=working_dir).id
    with store.open_writer(sid) as writer:
        event = writer.append(snap.record("turn start"), "system").id
    return sid, event


def test_a_refused_checkout_quotes_a_name_holding_a_newline(tmp_path: Path) -> None:
    store, work = Store(tmp_path / "store"), tmp_path / "work"
    work.mkdir()
    (work / FORGED).write_text("one\n")
    (work / "plain.txt").write_text("one\n")
    sid, event = _recorded(store, work, str(work))
    (work / FORGED).write_text("changed outside the agent\n")
    (work / "plain.txt").write_text("changed too\n")
    with pytest.raises(RestoreRefused) as refused:
        checkout(store, sid, event)
    lines = str(refused.value).splitlines()
    assert lines == [
        "restore refused (nothing changed); files changed outside the agent since its "
        "last snapshot:",
        "  plain.txt",
        f"  {json.dumps(FORGED, ensure_ascii=False)}",
    ]
    assert refused.value.conflicts == ["plain.txt", FORGED]  # the data keeps the name
    assert (work / FORGED).read_text() == "changed outside the agent\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's home directory, a fresh one, and the current directory."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert Path.home() == home  # what the refusal goes by follows $HOME
    monkeypatch.chdir(home)
    return home


def _project(tmp_path: Path) -> Path:
    work = tmp_path / "project"
    work.mkdir()
    (work / "app.py").write_text("print('v1')\n")
    return work


def test_diff_with_the_files_now_refuses_in_the_home_directory(tmp_path: Path, home: Path) -> None:
    store = Store(tmp_path / "store")
    sid, event = _recorded(store, _project(tmp_path), None)  # an imported session: no dir
    (home / "private.txt").write_text("not to be hashed\n")
    stored = set(store.objects.digests())
    with pytest.raises(InvalidInput) as refused:
        diff_at(store, sid, event)
    said = str(refused.value)
    assert str(home) in said and "home directory" in said and "project's directory" in said
    assert set(store.objects.digests()) == stored  # nothing of ~ was hashed into the store


def test_checkout_refuses_in_the_home_directory_and_writes_nothing(
    tmp_path: Path, home: Path
) -> None:
    store = Store(tmp_path / "store")
    sid, event = _recorded(store, _project(tmp_path), None)
    stored, length = set(store.objects.digests()), store.info(sid)
    for choice, dry_run in ((OnRestore(force=True), False), (OnRestore(), True)):
        with pytest.raises(InvalidInput, match="run it from the project's directory"):
            checkout(store, sid, event, choice, dry_run=dry_run)
    assert list(home.iterdir()) == []  # no app.py written, no journal left
    assert set(store.objects.digests()) == stored
    with store.open_reader(sid) as view:
        assert [e.id for e in view.path(None)] == [event]  # no restore recorded
    assert store.info(sid) == length


def test_a_session_naming_the_home_directory_is_refused_from_anywhere(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "store")
    sid, event = _recorded(store, _project(tmp_path), str(home))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="home directory"):
        checkout(store, sid, event, OnRestore(force=True))
    assert list(home.iterdir()) == []


def test_reading_the_store_still_works_in_the_home_directory(tmp_path: Path, home: Path) -> None:
    store, work = Store(tmp_path / "store"), _project(tmp_path)
    sid, first = _recorded(store, work, None)
    (work / "app.py").write_text("print('v2')\n")
    cp = Checkpoints(store.objects, work, store.home, watch=False)
    snap = cp.snapshot()
    cp.close()
    with store.open_writer(sid) as writer:
        second = writer.append(snap.record("turn start"), "system").id
    assert [f["path"] for f in files_at(store, sid, first)["files"]] == ["app.py"]
    got = diff_at(store, sid, first, second)  # two recorded events: the store only
    assert [c["path"] for c in got["changes"]] == ["app.py"]
    assert list(home.iterdir()) == []


def test_diff_and_checkout_work_from_a_project_directory(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal is the home directory's only: the same session from a project works."""
    store, work = Store(tmp_path / "store"), _project(tmp_path)
    sid, event = _recorded(store, work, None)
    (work / "app.py").write_text("print('v2')\n")
    monkeypatch.chdir(work)
    assert [c["path"] for c in diff_at(store, sid, event)["changes"]] == ["app.py"]
    checkout(store, sid, event, OnRestore(force=True))
    assert (work / "app.py").read_text() == "print('v1')\n"


def test_a_notice_naming_a_path_not_restored_quotes_a_newline(tmp_path: Path) -> None:
    """A file the target snapshot skipped (over its size cap) is left alone and
    named in a notice: the name is quoted there too."""
    store, work = Store(tmp_path / "store"), tmp_path / "work"
    work.mkdir()
    (work / FORGED).write_text("x" * 100)
    (work / "a.txt").write_text("v1\n")
    sid = store.create_session(working_dir=str(work)).id
    events = []
    for content, reason in (("v1\n", "turn start"), ("v2\n", "after bash")):
        (work / "a.txt").write_text(content)  # v2: as a tool would write it
        cp = Checkpoints(store.objects, work, store.home, size_cap=50, watch=False)
        snap = cp.snapshot()
        cp.close()
        assert FORGED in snap.record(reason).skipped
        with store.open_writer(sid) as writer:
            events.append(writer.append(snap.record(reason), "system").id)
    done = checkout(store, sid, events[0])
    assert (work / "a.txt").read_text() == "v1\n"
    assert done.notices == [
        "restored 1 file: a.txt (+1 -1)",
        "1 path(s) cannot be restored (not recorded): " + json.dumps(FORGED, ensure_ascii=False),
    ]

"""``infai session checkout | diff`` judged by what a person sees: a refused
checkout prints no line a file name chose, and the home directory is refused
with a reason and exit code 2, nothing hashed or written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.checkpoints import Checkpoints
from infai.shells.cli import main
from infai.store import Store

FORGED = "x\n  skipped: secret.env (ignored)\ninfai: restored: 0 path(s) changed"


@pytest.fixture(autouse=True)
def checkpoints_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-wide config turns snapshots off; these tests are about them."""
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "no-such-config.toml"))


def infai(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def _recorded(store: Store, work: Path, working_dir: str | None) -> tuple[str, str]:
    cp = Checkpoints(store.objects, work, store.home, watch=False)
    snap = cp.snapshot()
    cp.close()
    sid = store.create_session(working_dir=working_dir).id
    with store.open_writer(sid) as writer:
        event = writer.append(snap.record("turn start"), "system").id
    return sid, event


def test_a_refused_checkout_prints_no_line_a_file_name_chose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_home, work = tmp_path / "store", tmp_path / "work"
    work.mkdir()
    (work / FORGED).write_text("one\n")
    sid, event = _recorded(Store(store_home), work, str(work))
    (work / FORGED).write_text("changed outside the agent\n")
    monkeypatch.chdir(work)
    refused = infai(store_home, "session", "checkout", sid, event, code=2)
    lines = refused.stderr.splitlines()
    assert lines[-1] == f"  {json.dumps(FORGED, ensure_ascii=False)}"
    assert not any(line.startswith(("  skipped", "infai: restored")) for line in lines)
    assert (work / FORGED).read_text() == "changed outside the agent\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert Path.home() == home
    monkeypatch.chdir(home)
    return home


def test_diff_and_checkout_from_the_home_directory_exit_2_saying_why(
    tmp_path: Path, home: Path
) -> None:
    store_home, work = tmp_path / "store", tmp_path / "project"
    work.mkdir()
    (work / "app.py").write_text("print('v1')\n")
    store = Store(store_home)
    sid, event = _recorded(store, work, None)  # no directory: works in the current one
    (home / "private.txt").write_text("mine\n")
    stored = set(store.objects.digests())
    diff = infai(store_home, "session", "diff", sid, event, code=2)
    assert f"in {home} (your home directory, one above it, or /)" in diff.stderr
    assert "run it from the project's directory" in diff.stderr
    assert diff.stdout == ""
    checkout = infai(store_home, "session", "checkout", "--force", sid, event, code=2)
    assert f"checkout refused in {home}" in checkout.stderr
    assert sorted(p.name for p in home.iterdir()) == ["private.txt"]
    assert set(Store(store_home).objects.digests()) == stored

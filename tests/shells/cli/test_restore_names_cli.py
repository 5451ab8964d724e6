"""Going back never deletes a file the user made by hand without asking, and says
what it changed (issue 24, item 3), end to end through ``infai run --from`` and
``infai session checkout``.

A file written by hand between two turns is recorded by the next turn's start
snapshot, not by one after a tool: a restore that would remove or overwrite it
refuses without ``--force`` and names it; a restore names every file it
changes; an ignored file nobody touched is never "cannot be restored".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main
from infai.store import Store

ALLOW = ("--allow", "write_file *")


@pytest.fixture(autouse=True)
def checkpoints_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-wide config turns snapshots off; these tests are about them."""
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "no-such-config.toml"))


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.txt").write_text("one\ntwo\n")
    (root / ".gitignore").write_text("secret.env\n")
    (root / "secret.env").write_text("TOKEN=1\n")
    monkeypatch.chdir(root)
    return root


def infai(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def run_json(home: Path, *args: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in infai(home, "run", "--json", *args).stdout.splitlines()]


def last_message(lines: list[dict[str, Any]]) -> str:
    saved = [x["event"] for x in lines if x["type"] == "saved"]
    return str([e for e in saved if e["kind"] == "message"][-1]["id"])


def by_hand_then_by_a_tool(
    home: Path, work: Path, tmp: Path, by_hand: bool = True
) -> tuple[str, str, str]:
    """Turn one (the offline model); mine.txt written by hand (unless not
    ``by_hand``); turn two, whose start records mine.txt and whose write_file
    call rewrites a.txt. Returns (the session, the end of turn one, of turn two)."""
    first = run_json(home, "--model", "offline", "first")
    sid, end_one = first[0]["session"], last_message(first)
    if by_hand:
        (work / "mine.txt").write_text("made by hand\n")
    script = tmp / "two.json"
    call = {"id": "c1", "name": "write_file", "arguments": {"path": "a.txt", "content": "1\n"}}
    script.write_text(json.dumps([{"content": "", "tool_calls": [call]}, "done"]))
    second = run_json(home, "--model", f"scripted:{script}", *ALLOW, "--session", sid, "two")
    reasons = [
        x["event"]["record"]["reason"]
        for x in second
        if x["type"] == "saved" and x["event"]["kind"] == "snapshot"
    ]
    # mine.txt: recorded by the turn's start; a.txt: after the tool
    assert reasons == ["turn start", "after write_file"][not by_hand :]
    return sid, end_one, last_message(second)


def events(home: Path, sid: str) -> int:
    with Store(home).open_reader(sid) as reader:
        return len(list(reader.entries()))


def test_run_from_refuses_over_a_file_made_by_hand_and_force_names_what_it_changed(
    tmp_path: Path, work: Path
) -> None:
    home = tmp_path / "home"
    sid, end_one, _ = by_hand_then_by_a_tool(home, work, tmp_path)
    count = events(home, sid)
    refused = infai(
        home, "run", "--model", "offline", "--session", sid, "--from", end_one, "back", code=2
    )
    assert "restore refused (nothing changed)" in refused.stderr
    assert refused.stderr.splitlines()[-1] == "  mine.txt"  # named; a.txt, the tool's, not
    assert "a.txt" not in refused.stderr
    assert (work / "mine.txt").read_text() == "made by hand\n" and events(home, sid) == count
    forced = infai(
        home, "run", "--model", "offline", "--session", sid, "--from", end_one, "--force", "back"
    )
    assert not (work / "mine.txt").exists() and (work / "a.txt").read_text() == "one\ntwo\n"
    assert "infai: restored 2 files: a.txt (+2 -1), mine.txt (removed)" in forced.stderr
    assert "cannot be restored" not in forced.stderr  # secret.env: ignored, untouched
    assert (work / "secret.env").read_text() == "TOKEN=1\n"


def test_run_from_over_files_only_the_tools_changed_restores_without_asking(
    tmp_path: Path, work: Path
) -> None:
    """No file made by hand: only a.txt, the tool's change, is replaced, with no
    question and no word about the ignored secret.env nobody touched."""
    home = tmp_path / "home"
    sid, end_one, _ = by_hand_then_by_a_tool(home, work, tmp_path, by_hand=False)
    out = infai(home, "run", "--model", "offline", "--session", sid, "--from", end_one, "back")
    assert "infai: restored 1 file: a.txt (+2 -1)" in out.stderr
    assert "cannot be restored" not in out.stderr and "secret.env" not in out.stderr
    assert (work / "a.txt").read_text() == "one\ntwo\n"


def test_checkout_refuses_over_a_file_made_by_hand_and_force_names_it(
    tmp_path: Path, work: Path
) -> None:
    home = tmp_path / "home"
    sid, end_one, _ = by_hand_then_by_a_tool(home, work, tmp_path)
    count = events(home, sid)
    dry = json.loads(infai(home, "session", "checkout", sid, end_one, "--dry-run", "--json").stdout)
    assert dry["plan"]["conflicts"] == dry["plan"]["hand_made"] == ["mine.txt"]
    refused = infai(home, "session", "checkout", sid, end_one, code=2)
    assert refused.stderr.splitlines()[-1] == "  mine.txt"
    assert (work / "mine.txt").exists() and events(home, sid) == count
    done = infai(home, "session", "checkout", sid, end_one, "--force")
    assert done.stdout.splitlines()[-1] == "restored 2 files: a.txt (+2 -1), mine.txt (removed)"
    assert "cannot be restored" not in done.stdout + done.stderr
    assert not (work / "mine.txt").exists() and (work / "secret.env").exists()


def test_checkout_json_lists_every_file_changed(tmp_path: Path, work: Path) -> None:
    home = tmp_path / "home"
    sid, end_one, end_two = by_hand_then_by_a_tool(home, work, tmp_path)
    done = json.loads(infai(home, "session", "checkout", sid, end_one, "--force", "--json").stdout)
    assert done["changed"] == [
        {"path": "a.txt", "change": "modified", "added": 2, "removed": 1},
        {"path": "mine.txt", "change": "removed"},
    ]
    assert done["plan"]["not_restorable"] == {} and done["plan"]["ignored"] == []
    # and back: the file made by hand comes back, said as added
    again = json.loads(infai(home, "session", "checkout", sid, end_two, "--json").stdout)
    assert {"path": "mine.txt", "change": "added"} in again["changed"]
    assert (work / "mine.txt").read_text() == "made by hand\n"

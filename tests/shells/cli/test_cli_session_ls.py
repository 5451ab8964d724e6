"""Issue 13: `session ls` for people: a header, each session's title, last activity in
local relative time, event count, grouped by directory with this one first; `--json`
keeps its shape and gains fields only."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main
from infai.shells.listing import relative_time
from infai.store import Store


def infai(home: Path, *args: str) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """A home with sessions in two directories and one with none; cwd is ``here``."""
    home, here, other = tmp_path / "home", tmp_path / "here", tmp_path / "other"
    here.mkdir()
    other.mkdir()
    monkeypatch.chdir(here)
    infai(home, "run", "fix the flaky listing test")
    infai(home, "run", "--continue", "and its neighbour")
    monkeypatch.chdir(other)
    infai(home, "run", "a prompt elsewhere")  # the newest session of all
    infai(home, "session", "new", "--name", "a named one")
    monkeypatch.chdir(here)
    return home, here, other


def test_ls_groups_by_directory_this_one_first_with_title_time_and_count(
    dirs: tuple[Path, Path, Path],
) -> None:
    home, here, other = dirs
    lines = infai(home, "session", "ls").stdout.splitlines()
    assert lines[0].split() == ["SESSION", "ACTIVE", "EVENTS", "TITLE"]
    ids = {i.working_dir: i.id for i in Store(home).list_sessions()}
    assert lines[1] == f"{here} (this directory)"
    mine = lines[2].split(maxsplit=1)
    assert mine[0] == ids[str(here)]
    # two turns of two messages, and the first turn's files snapshot (the second's unchanged)
    assert mine[1].split() == ["just", "now", "5", "fix", "the", "flaky", "listing", "test"]
    assert lines[3] == str(other)
    assert lines[4].split()[0] == ids[str(other)] and lines[4].endswith("a prompt elsewhere")
    assert lines[5] == "(no directory)"
    assert lines[6].split()[0] == ids[None] and lines[6].endswith("0  a named one")
    assert len(lines) == 7


def test_ls_from_another_directory_puts_that_one_first(
    dirs: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, here, other = dirs
    monkeypatch.chdir(other)
    lines = infai(home, "session", "ls").stdout.splitlines()
    assert [line for line in lines if not line.startswith(" ")] == [
        f"{other} (this directory)", str(here), "(no directory)",
    ]  # fmt: skip


def test_ls_json_keeps_every_field_and_adds_title_and_count(
    dirs: tuple[Path, Path, Path],
) -> None:
    home, here, _ = dirs
    listed = json.loads(infai(home, "session", "ls", "--json").stdout)
    infos = Store(home).list_sessions()
    assert [s["id"] for s in listed] == [i.id for i in infos]  # most recent first, as before
    for obj, info in zip(listed, infos, strict=True):
        assert {k: obj[k] for k in info.to_obj()} == info.to_obj()
        assert set(obj) - set(info.to_obj()) == {"title", "first_prompt", "events"}
    mine = next(s for s in listed if s["working_dir"] == str(here))
    assert (mine["title"], mine["first_prompt"], mine["events"]) == (
        "fix the flaky listing test", "fix the flaky listing test", 5,
    )  # fmt: skip


def test_ls_of_an_empty_store_says_so(tmp_path: Path) -> None:
    assert infai(tmp_path / "home", "session", "ls").stdout == "no sessions\n"


NOW = datetime(2026, 12, 3, 10, 30, tzinfo=UTC)
PLUS_TWO = timezone(timedelta(hours=2))  # the local zone: 12:30 there


@pytest.mark.parametrize(
    ("ago", "said"),
    [
        (timedelta(seconds=5), "just now"),
        (timedelta(seconds=-30), "just now"),  # a clock a little ahead
        (timedelta(minutes=3, seconds=10), "3 min ago"),
        (timedelta(hours=2, minutes=5), "2 h ago"),
        (timedelta(hours=11), "11 h ago"),  # 01:30 local: still today
        (timedelta(hours=13), "yesterday 23:30"),  # local time, not UTC (21:30)
        (timedelta(days=3), "Mon 12:30"),
        (timedelta(days=30), "2026-11-03"),
    ],
)
def test_relative_time_in_local_words(ago: timedelta, said: str) -> None:
    stamp = (NOW - ago).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert relative_time(stamp, NOW, PLUS_TWO) == said


def test_relative_time_of_a_stamp_it_cannot_read_shows_it() -> None:
    assert relative_time("not a time", NOW, PLUS_TWO) == "not a time"

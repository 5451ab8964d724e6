"""One damaged session never costs the others their hits: the search index keeps what
verifies, skips the damaged events, and every search and rebuild names the session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infai.shells.cli import main
from infai.store import MessageRecord, Store, StoreOptions, ToolResultRecord


def _flip(path: Path, line: int) -> int:
    """Flip one byte inside line ``line`` (0-based) of ``path``; the line's offset."""
    data = bytearray(path.read_bytes())
    offset = 0
    for _ in range(line):
        offset = data.index(b"\n", offset) + 1
    data[offset + 30] ^= 0x04
    path.write_bytes(bytes(data))
    return offset


def _two_sessions(store: Store) -> tuple[str, str, list[str]]:
    """Two sessions of six messages each, all about apples; the first's ids."""
    sids: list[str] = []
    first: list[str] = []
    for n in range(2):
        sid = store.create_session(name=f"s{n}").id
        with store.open_writer(sid) as w:
            ids = [w.append(MessageRecord(content=f"apple {i}"), "user").id for i in range(6)]
        sids.append(sid)
        first = first or ids
    return sids[0], sids[1], first


def _search(home: Path, *args: str) -> tuple[dict[str, Any], str]:
    result = CliRunner().invoke(main, ["--home", str(home), "search", *args, "--json"])
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return json.loads(result.stdout), result.stderr


def test_a_flipped_byte_in_one_session_leaves_every_other_hit(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    bad, good, ids = _two_sessions(store)
    chunk = store.paths(bad).chunk(0)
    offset = _flip(chunk, 2)  # the third of six events
    answer, err = _search(store.home, "apple", "--limit", "50")
    hits = answer["hits"]
    assert isinstance(hits, list)
    found = {(h["session_id"], h["event_id"]) for h in hits}
    assert len([h for h in hits if h["session_id"] == good]) == 6
    assert {e for s, e in found if s == bad} == set(ids) - {ids[2]}
    # the events after the damaged one are still known to be on HEAD's path
    assert all(h["on_head_path"] for h in hits)
    [damaged] = answer["damaged"]
    assert damaged["session_id"] == bad and damaged["events"] == 1
    assert str(chunk) in damaged["problem"] and f"offset {offset}" in damaged["problem"]
    assert f"session {bad}" in err and "1 damaged event(s)" in err
    again, _ = _search(store.home, "apple", "--limit", "50")  # caught up: still named
    assert again["damaged"] == answer["damaged"] and len(again["hits"]) == 11
    scoped, _ = _search(store.home, "apple", "--session", good)
    assert scoped["damaged"] == []  # another session's damage is not this search's


def test_rebuild_without_a_query_names_the_damaged_session(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    bad, _good, ids = _two_sessions(store)
    assert len(store.search("apple", limit=50)) == 12  # the index exists, whole
    _flip(store.paths(bad).chunk(0), 2)
    result = CliRunner().invoke(main, ["--home", str(store.home), "search", "--rebuild"])
    assert result.exit_code == 0, (result.output, result.stderr)
    assert "search index rebuilt" in result.stderr and f"session {bad}" in result.stderr
    as_json = CliRunner().invoke(main, ["--home", str(store.home), "search", "--rebuild", "--json"])
    assert as_json.exit_code == 0
    [damaged] = json.loads(as_json.stdout)["damaged"]
    assert damaged["session_id"] == bad and damaged["events"] == 1
    hits = Store(store.home).search("apple", limit=50)
    assert len(hits) == 11 and ids[2] not in {h.event_id for h in hits}
    no_query = CliRunner().invoke(main, ["--home", str(store.home), "search"])
    assert no_query.exit_code == 2 and "QUERY" in no_query.stderr


def test_events_appended_after_the_damage_are_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    bad, _good, _ = _two_sessions(Store(home))
    assert len(Store(home).search("apple", limit=50)) == 12
    other = Store(home)  # another process's writer (an older infai): it indexes nothing
    monkeypatch.setattr(other, "_in_use", lambda *_: False)
    with other.open_writer(bad) as w:
        w.append(MessageRecord(content="pear one"), "user")
        w.append(MessageRecord(content="pear two"), "user")
    _flip(other.paths(bad).chunk(0), 6)  # "pear one", before any search indexed it
    hits = Store(home).search("pear")
    assert [h.snippet for h in hits] == ["pear two"] and hits.damaged[0].events == 1
    with other.open_writer(bad) as w:  # after the damaged event, then after the last indexed
        later = w.append(MessageRecord(content="pear three"), "user")
    found = Store(home).search("pear")  # the catch-up goes on past the damage
    assert later.id in {h.event_id for h in found} and len(found) == 2
    assert [(d.session_id, d.events) for d in found.damaged] == [(bad, 1)]


def test_a_damaged_blob_leaves_only_its_event_out(tmp_path: Path) -> None:
    store = Store(tmp_path / "home", StoreOptions(blob_threshold=200))
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(MessageRecord(content="kiwi before"), "user")
        w.append(ToolResultRecord(call_id="1", name="read", content="kiwi " + "R" * 500), "tool")
        w.append(MessageRecord(content="kiwi after"), "assistant")
    [blob] = list(store.paths(sid).blobs.iterdir())
    blob.write_bytes(blob.read_bytes().replace(b"RRRR", b"RRRX", 1))
    hits = store.search("kiwi")
    assert sorted(h.snippet for h in hits) == ["kiwi after", "kiwi before"]
    [damaged] = hits.damaged
    assert damaged.session_id == sid and "blob" in damaged.problem


def test_a_session_that_cannot_be_opened_is_named_and_the_others_searched(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "home")
    bad, good, _ = _two_sessions(store)
    _flip(store.paths(bad).chunk(0), 5)  # the last line: opening the session refuses it
    hits = store.search("apple", limit=50)
    assert {h.session_id for h in hits} == {good} and len(hits) == 6
    [damaged] = hits.damaged
    assert damaged.session_id == bad and damaged.events is None
    assert "could not be read" in damaged.note()

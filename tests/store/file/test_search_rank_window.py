"""The file store's search ranks a bounded window of matches: a query matching more
documents than ``RANK_WINDOW`` ranks the most recently indexed ones, filters widen the
window until they find ``limit`` hits (or run out of matches), and a session filter
looks only at that session's documents. Matching itself is unchanged: the contract
tests hold both backends to the same set of matches."""

from __future__ import annotations

from pathlib import Path

import pytest

from infai.store import MessageRecord, Store, ToolResultRecord
from infai.store.file import search_rank


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_rank, "RANK_WINDOW", 4)


def test_a_common_word_ranks_the_newest_matches(tmp_path: Path, small_window: None) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        # The oldest events are the better bm25 matches (the word three times in a
        # short text); with a window of 4, only the newest 4 matches are ranked.
        old = [w.append(MessageRecord(content="ember ember ember"), "user").id for _ in range(6)]
        new = [
            w.append(MessageRecord(content=f"ember and many other words {i}"), "user").id
            for i in range(6)
        ]
    hits = store.search("ember", limit=3)
    assert len(hits) == 3
    assert {h.event_id for h in hits} <= set(new[-4:])
    assert not {h.event_id for h in hits} & set(old)
    # Fewer matches than the window: ranked as before, the best first.
    assert store.search('"ember ember ember"', limit=3)[0].event_id in old


def test_a_filter_widens_the_window_until_it_finds_hits(tmp_path: Path, small_window: None) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        result = w.append(ToolResultRecord(call_id="c1", name="bash", content="quartz"), "tool")
        for i in range(20):  # far more than the window, all newer, none a tool result
            w.append(MessageRecord(content=f"quartz {i}"), "user")
    hits = store.search("quartz", kind="tool_result", limit=5)
    assert [h.event_id for h in hits] == [result.id]
    assert len(store.search("quartz", limit=50)) == 21  # every match, when asked for


def test_a_session_filter_finds_an_old_sessions_hits(tmp_path: Path, small_window: None) -> None:
    store = Store(tmp_path / "home")
    first = store.create_session().id
    with store.open_writer(first) as w:
        mine = {w.append(MessageRecord(content=f"basalt {i}"), "user").id for i in range(3)}
    for _ in range(3):  # newer sessions full of the same word
        other = store.create_session().id
        with store.open_writer(other) as w:
            for i in range(10):
                w.append(MessageRecord(content=f"basalt {i}"), "user")
    hits = store.search("basalt", session=first, limit=10)
    assert {h.event_id for h in hits} == mine


def test_blob_documents_are_windowed_and_found(tmp_path: Path, small_window: None) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    big = "granite " + "filler words " * 40_000  # past the blob threshold
    with store.open_writer(sid) as w:
        blob_event = w.append(ToolResultRecord(call_id="c", name="cat", content=big), "tool")
        for i in range(10):
            w.append(MessageRecord(content=f"granite {i}"), "user")
    assert blob_event.digest is not None
    hits = store.search("granite", kind="tool_result")
    assert [h.event_id for h in hits] == [blob_event.id]
    assert blob_event.id in {h.event_id for h in store.search("granite", limit=20)}


def test_an_excluded_word_is_kept_out_of_hits_not_only_out_of_ranking(tmp_path: Path) -> None:
    # The ranking query leaves the excluded word out (bm25 would walk its document
    # list for nothing); the walk's candidates keep the exclusion exact.
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        best = w.append(MessageRecord(content="kiwi kiwi kiwi"), "user").id
        w.append(MessageRecord(content="kiwi kiwi kiwi kiwi apple"), "user")  # better, excluded
        plain = w.append(MessageRecord(content="kiwi and a long tail of other words"), "user").id
        w.append(MessageRecord(content="apple alone"), "user")
    hits = store.search("kiwi -apple")
    assert [h.event_id for h in hits] == [best, plain] and hits.window is None
    assert hits[0].score > hits[1].score  # ranked, not merely listed

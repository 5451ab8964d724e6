"""Search, run against both backends: what matches, where hits are, filters and errors.

Ranking may differ between the backends (bm25 against ts_rank); which events
match, their fields and the snippets do not.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.store import (
    CompactionRecord,
    InvalidInput,
    MessageRecord,
    SearchHit,
    SessionNotFound,
    SessionStore,
    StoreOptions,
    ToolCallRecord,
    ToolResultRecord,
    open_store,
)

#: small, so a tool output of a few KiB goes to a blob
OPTIONS = StoreOptions(blob_threshold=512)


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    location = str(tmp_path / "home") if request.param == "file" else None
    with open_store(location or request.getfixturevalue("pg_url"), OPTIONS) as opened:
        yield opened


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


def ids(hits: list[SearchHit]) -> set[str]:
    return {h.event_id for h in hits}


def test_a_word_only_in_a_blob_on_an_abandoned_branch_is_found(store: SessionStore) -> None:
    sid = store.create_session(name="work", working_dir="/src/app").id
    with store.open_writer(sid) as w:
        root = w.append(msg("let us look at the logs"), "user")
        w.append(
            ToolCallRecord(call_id="c1", name="bash", arguments={"cmd": "cat log"}), "assistant"
        )
        filler = "nothing to see here\n" * 200  # well past the blob threshold
        hidden = w.append(
            ToolResultRecord(
                call_id="c1", name="bash", content=filler + "zanzibar quokka\n" + filler
            ),
            "tool",
        )
        assert hidden.digest is not None  # it went to a blob
        w.select(root.id)  # rewind: the branch holding the blob is abandoned
        tip = w.append(msg("never mind the logs"), "user")
    hits = store.search("quokka")
    assert [(h.session_id, h.event_id) for h in hits] == [(sid, hidden.id)]
    hit = hits[0]
    assert hit.on_head_path is False and hit.kind == "tool_result" and hit.role == "tool"
    assert hit.session_name == "work" and hit.working_dir == "/src/app"
    assert hit.timestamp == hidden.timestamp and hit.seq == hidden.seq
    assert "[quokka]" in hit.marked() and "\n" not in hit.snippet
    assert hit.snippet[hit.marks[0][0] : hit.marks[0][1]] == "quokka"
    on_path = store.search("logs")
    assert ids(on_path) == {root.id, tip.id}
    assert all(h.on_head_path for h in on_path)


def test_the_query_grammar(store: SessionStore) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        a = w.append(msg("the parser crashes on a Café menu"), "user")
        b = w.append(msg("fixed the parser; see src/infai/store.py"), "assistant")
        c = w.append(msg("a parsing question about foo-bar"), "user")
        d = w.append(CompactionRecord(summary="we talked", decisions=["ship parser now"]), "system")
    assert ids(store.search("parser")) == {a.id, b.id, d.id}
    assert ids(store.search("pars*")) == {a.id, b.id, c.id, d.id}
    assert ids(store.search("parser -crashes")) == {b.id, d.id}
    assert ids(store.search('parser -"the parser"')) == {d.id}
    assert ids(store.search('"parser crashes"')) == {a.id}
    assert ids(store.search('"crashes parser"')) == set()
    assert ids(store.search("cafe")) == {a.id}  # diacritics and case folded
    assert ids(store.search("CAFÉ")) == {a.id}
    assert ids(store.search("store.py")) == {b.id}  # a phrase of its words
    assert ids(store.search("store")) == {b.id}  # inside a path too
    assert ids(store.search("foo-bar")) == {c.id}
    assert ids(store.search("crashes OR question")) == {a.id, c.id}
    assert ids(store.search("menu parser OR foo")) == {a.id, c.id}
    assert ids(store.search("ship")) == {d.id}  # a compaction's lists are searched


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ('"unclosed', "never closed"),
        ("", "nothing to search for"),
        ("-only", "only excluded"),
        ("OR this", "nothing before it"),
        ("this OR", "nothing after it"),
        ('"!!"', "no words"),
    ],
)
def test_bad_queries_are_refused_naming_the_query(
    store: SessionStore, query: str, says: str
) -> None:
    with pytest.raises(InvalidInput, match=says) as caught:
        store.search(query)
    assert repr(query) in str(caught.value)


def test_filters_by_session_directory_and_kind(store: SessionStore) -> None:
    one = store.create_session(working_dir="/w/app").id
    two = store.create_session(working_dir="/w/app/sub").id
    three = store.create_session(working_dir="/w/apple").id
    found: dict[str, Any] = {}
    for sid in (one, two, three):
        with store.open_writer(sid) as w:
            found[sid] = (
                w.append(msg("walrus talk"), "user").id,
                w.append(ToolResultRecord(call_id="x", name="t", content="walrus out"), "tool").id,
            )
    every = {i for pair in found.values() for i in pair}
    assert ids(store.search("walrus")) == every
    assert ids(store.search("walrus", session=two)) == set(found[two])
    assert ids(store.search("walrus", working_dir="/w/app")) == {*found[one], *found[two]}
    assert ids(store.search("walrus", working_dir="/w/app/")) == {*found[one], *found[two]}
    assert ids(store.search("walrus", working_dir="/nowhere")) == set()
    assert ids(store.search("walrus", kind="tool_result")) == {p[1] for p in found.values()}
    assert len(store.search("walrus", limit=2)) == 2
    with pytest.raises(InvalidInput, match="unknown event kind 'nope'"):
        store.search("walrus", kind="nope")
    with pytest.raises(InvalidInput, match="limit"):
        store.search("walrus", limit=0)
    with pytest.raises(SessionNotFound):
        store.search("walrus", session="01234567-89ab-7def-8123-456789abcdef")


def test_appends_and_removals_are_seen_by_the_next_search(store: SessionStore) -> None:
    sid = store.create_session().id
    other = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(msg("first narwhal"), "user")
    assert len(store.search("narwhal")) == 1
    with store.open_writer(sid) as w:
        later = w.append(msg("second narwhal"), "assistant")
    with store.open_writer(other) as w:
        w.append(msg("third narwhal"), "user")
    hits = store.search("narwhal")
    assert len(hits) == 3 and later.id in ids(hits)
    head = {h.event_id: h.on_head_path for h in hits}
    assert all(head.values())
    store.remove_session(other)
    assert {h.session_id for h in store.search("narwhal")} == {sid}


def test_one_blob_named_by_two_sessions_is_found_in_both(store: SessionStore) -> None:
    big = ToolResultRecord(call_id="c", name="read", content="pangolin " + "x" * 2000)
    events = []
    for _ in range(2):
        sid = store.create_session().id
        with store.open_writer(sid) as w:
            events.append(w.append(big, "tool"))
    assert events[0].digest == events[1].digest is not None
    assert ids(store.search("pangolin")) == {e.id for e in events}


def test_rebuild_reports_progress_and_finds_the_same(store: SessionStore) -> None:
    for word in ("ibis", "ibis", "heron"):
        sid = store.create_session().id
        with store.open_writer(sid) as w:
            w.append(msg(f"a {word} flew by"), "user")
    before = ids(store.search("ibis"))
    seen: list[tuple[int, int]] = []
    store.rebuild_search_index(lambda done, total: seen.append((done, total)))
    assert seen[-1] == (3, 3)
    assert ids(store.search("ibis")) == before and len(before) == 2


def test_a_filter_finds_hits_ranked_below_many_others(store: SessionStore) -> None:
    loud, quiet = store.create_session().id, store.create_session().id
    with store.open_writer(loud) as w:
        for _ in range(40):
            w.append(msg("marmot marmot marmot"), "user")
    with store.open_writer(quiet) as w:
        rare = w.append(msg("one marmot among many other words said here at length"), "user")
    assert len(store.search("marmot", limit=100)) == 41
    assert [h.event_id for h in store.search("marmot", session=quiet, limit=1)] == [rare.id]
    assert [h.event_id for h in store.search("marmot", kind="message", limit=41)][-1] == rare.id

"""`list_summaries` on both backends: each session's metadata, first prompt and event
count, as cheap as `list_sessions` (issue 13: `session ls` shows a title and a count)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.store import MessageRecord, SessionStore, Store, ToolResultRecord, open_store
from infai.store.file import listing


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    location = (
        str(tmp_path / "home") if request.param == "file" else request.getfixturevalue("pg_url")
    )
    opened = open_store(location)
    checked: SessionStore = opened
    try:
        yield checked
    finally:
        opened.close()


def test_summaries_carry_title_first_prompt_and_count(store: Any) -> None:
    plain = store.create_session(working_dir="/w")
    named = store.create_session(name="named")
    empty = store.create_session()
    with store.open_writer(plain.id) as writer:
        writer.append(MessageRecord(content="be terse"), "system")
        writer.append(MessageRecord(content="fix the flaky test"), "user")
        writer.append(MessageRecord(content="done"), "assistant")
        writer.append(MessageRecord(content="and the other one"), "user")
    with store.open_writer(named.id) as writer:
        writer.append(MessageRecord(content="a prompt"), "user")
    summaries = {s.info.id: s for s in store.list_summaries()}
    assert [s.info for s in store.list_summaries()] == store.list_sessions()  # same order
    assert summaries[plain.id].first_prompt == "fix the flaky test"
    assert summaries[plain.id].title == "fix the flaky test"
    assert summaries[plain.id].events == 4
    assert summaries[named.id].title == "named" and summaries[named.id].first_prompt == "a prompt"
    assert (summaries[empty.id].title, summaries[empty.id].events) == ("", 0)
    obj = summaries[plain.id].to_obj()
    assert {k: obj[k] for k in plain.to_obj()} == store.info(plain.id).to_obj() | {
        "updated_at": obj["updated_at"]
    }
    assert (obj["title"], obj["first_prompt"], obj["events"]) == ("fix the flaky test",) * 2 + (4,)


def test_the_count_follows_appends_and_the_title_stays(store: Any) -> None:
    sid = store.create_session().id
    assert store.list_summaries()[0].events == 0  # listed before anything was appended
    with store.open_writer(sid) as writer:
        writer.append(MessageRecord(content="first prompt"), "user")
        writer.append(ToolResultRecord(call_id="c", name="read_file", content="x"), "tool")
    [summary] = store.list_summaries()
    assert (summary.first_prompt, summary.events) == ("first prompt", 2)
    with store.open_writer(sid) as writer:
        writer.append(MessageRecord(content="second prompt"), "user")
        [open_] = store.list_summaries()  # a writer of this store still open
        assert open_.events == 3
    [summary] = store.list_summaries()
    assert (summary.first_prompt, summary.events) == ("first prompt", 3)


def test_a_warm_file_listing_reads_no_session_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing warm in the index opens nothing of any session (so hundreds list fast)."""
    store = Store(tmp_path / "home")
    for n in range(30):
        sid = store.create_session(working_dir=f"/w{n % 3}").id
        with store.open_writer(sid) as writer:
            writer.append(MessageRecord(content=f"prompt {n}"), "user")
    store.close()
    store = Store(tmp_path / "home")
    assert len(store.list_summaries()) == 30  # warms the index (or re-reads it)
    reads: list[Path] = []
    real = listing._first_prompt

    def counted(path: Path) -> str | None:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(listing, "_first_prompt", counted)
    summaries = store.list_summaries()
    assert reads == []
    assert {s.first_prompt for s in summaries} == {f"prompt {n}" for n in range(30)}
    assert {s.events for s in summaries} == {1}
    store.close()

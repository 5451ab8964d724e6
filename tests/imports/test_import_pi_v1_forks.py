"""A Pi v1 fork hangs from the entry it was forked at, found by what it copied.

Pi v1 entries have no ids. Its ``/branch`` wrote a new file whose header names
the parent file (``branchedFrom``) and which starts with a copy: either the
parent's entries verbatim, or the messages of the live context written again
under new entry timestamps (after a compaction, that context starts with a
summary message and then the kept messages). The parents here are the real
corpus files (read in place); the forks are written into ``tmp_path`` in those
two shapes, as Pi wrote them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from import_corpus import corpus, json_values
from infai.imports import commit, importer_for
from infai.store import MessageRecord, Store

TOOL = importer_for("pi")
FORK_ID = "0197bbbb-0000-7000-8000-00000000000f"
STAMP = "2026-02-01T10:00:00.000Z"
COPIED = "2026-02-01T10:00:00.500Z"  # when Pi wrote the copy


def _parent(name: str) -> Path:
    return corpus() / "pi" / "pi-mono" / name


def _header(parent: Path) -> dict[str, Any]:
    return {"type": "session", "id": FORK_ID, "timestamp": STAMP, "cwd": "/w"} | {
        "branchedFrom": str(parent)
    }


def _own(text: str, second: int) -> dict[str, Any]:
    stamp = f"2026-02-01T10:00:{second:02d}.000Z"
    message = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": second}
    return {"type": "message", "timestamp": stamp, "message": message}


def _copied(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pi's ``createBranchedSession``: each message again, under a new entry timestamp."""
    return [
        {"type": "message", "timestamp": COPIED, "message": e["message"]}
        for e in entries
        if e["type"] == "message"
    ]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _import(store: Store, path: Path) -> Any:
    (foreign,) = TOOL.load(path)
    return foreign, commit(store, foreign)


def _fork_event(store: Store, parent: Any, fork: Any) -> Any:
    info = store.info(fork.session_id)
    assert info.parent_session == parent.session_id
    assert info.parent_event is not None
    with store.open_reader(parent.session_id) as reader:
        return reader.event(info.parent_event, resolve=True), reader.path(
            info.parent_event, to_boundary=False
        )


def _entry(event: Any) -> str:
    """The source entry an event was imported from (``e<index>``, header = 0)."""
    return str(event.record.metadata["source"]["entry"])


def _plain(entries: list[dict[str, Any]], start: int, stop: int) -> int:
    """The first index in [start, stop) of a user prompt or a tool result (whose
    events name their entry), counting down from ``stop`` when start > stop."""
    step = 1 if start < stop else -1
    return next(
        i
        for i in range(start, stop, step)
        if entries[i]["type"] == "message"
        and entries[i]["message"]["role"] in ("user", "toolResult")
    )


def test_a_v1_fork_of_copied_messages_hangs_from_the_last_copied_one(tmp_path: Path) -> None:
    source = _parent("session.jsonl")
    entries = json_values(source)  # header at 0
    users = [i for i, e in enumerate(entries) if e.get("message", {}).get("role") == "user"]
    at = users[19]  # Pi branches at a user message: here the 20th of 44
    fork = _write(
        tmp_path / "fork.jsonl",
        [_header(source), *_copied(entries[1 : at + 1]), _own("no, the other way", 5)],
    )
    store = Store(tmp_path / "home")
    _, parent = _import(store, source)
    foreign, child = _import(store, fork)
    event, _path = _fork_event(store, parent, child)
    assert isinstance(event.record, MessageRecord)
    assert _entry(event) == f"e{at}"  # the fork point, not the parent's end
    assert foreign.extra["fork_point"]["rule"] == "messages matched by content"
    assert not [w for w in foreign.report.warnings if "forked from" in w]
    # idempotent, and the fork's new entries alone are added when it grows
    assert _import(store, fork)[1].status == "unchanged"
    with fork.open("a") as f:
        f.write(json.dumps(_own("and one more thing", 6)) + "\n")
    _, grown = _import(store, fork)
    assert (grown.status, grown.added) == ("grown", 1)
    assert store.info(child.session_id).parent_event == event.id


def test_a_v1_fork_made_after_a_compaction_hangs_from_the_compacted_path(tmp_path: Path) -> None:
    """The live context was: summary, kept messages, later ones; the fork point is
    the later message as imported after the compaction (on its bounded path)."""
    source = _parent("compact.jsonl")
    entries = json_values(source)  # header at 0: Pi's v1 indexes
    at = next(i for i, e in enumerate(entries) if e["type"] == "compaction")
    first_kept = entries[at]["firstKeptEntryIndex"]
    upto = _plain(entries, at + 30, len(entries))
    text = "The conversation history before this point was compacted into this summary: ..."
    summary = {"role": "user", "content": text, "timestamp": 1}
    context = [{"type": "message", "timestamp": STAMP, "message": summary}]
    context += _copied(entries[first_kept:at]) + _copied(entries[at + 1 : upto + 1])
    fork = _write(tmp_path / "fork.jsonl", [_header(source), *context, _own("branch", 7)])
    store = Store(tmp_path / "home")
    _, parent = _import(store, source)
    foreign, child = _import(store, fork)
    event, path = _fork_event(store, parent, child)
    assert _entry(event) == f"e{upto}"
    assert any(e.kind == "compaction" for e in path)  # after the boundary
    assert foreign.extra["fork_point"]["unmatched_before"] == 1  # Pi's summary message
    # forked at the end of the kept messages: the kept copy after the boundary, not the
    # original before it (both hold the same message)
    end = _plain(entries, at - 1, first_kept)
    kept = _copied(entries[first_kept : end + 1])
    header2 = _header(source) | {"id": FORK_ID[:-1] + "e"}
    fork2 = _write(tmp_path / "fork2.jsonl", [header2, context[0], *kept, _own("x", 8)])
    _, child2 = _import(store, fork2)
    event2, path2 = _fork_event(store, parent, child2)
    assert _entry(event2) == f"e{end}" and "copy_of" in event2.record.metadata
    assert any(e.kind == "compaction" for e in path2)


def test_a_v1_fork_of_verbatim_entries_hangs_from_the_last_shared_entry(tmp_path: Path) -> None:
    source = _parent("large-session.jsonl")
    entries = json_values(source)[1:]
    copied = entries[:120]
    while copied[-1]["type"] != "message" or copied[-1]["message"]["role"] != "user":
        copied.pop()
    fork = _write(tmp_path / "fork.jsonl", [_header(source), *copied, _own("instead", 9)])
    store = Store(tmp_path / "home")
    _, parent = _import(store, source)
    foreign, child = _import(store, fork)
    event, _path = _fork_event(store, parent, child)
    assert _entry(event) == f"e{len(copied)}"
    assert foreign.extra["fork_point"] == {
        "rule": "entries copied verbatim from the parent",
        "entries": len(copied),
    }


def test_a_v1_fork_that_shares_nothing_is_linked_to_the_session_and_says_so(
    tmp_path: Path,
) -> None:
    source = _parent("session.jsonl")
    fork = _write(tmp_path / "fork.jsonl", [_header(source), _own("hello", 1), _own("x", 2)])
    store = Store(tmp_path / "home")
    _, parent = _import(store, source)
    foreign, child = _import(store, fork)
    info = store.info(child.session_id)
    assert info.parent_session == parent.session_id and info.parent_event is None
    assert any(
        "none of its messages is in that session: linked to the session only" in w
        for w in foreign.report.warnings
    )


def test_a_v1_fork_matching_two_places_equally_is_not_guessed(tmp_path: Path) -> None:
    """A parent that says the same thing twice (synthetic): the fork copied only that."""
    (tmp_path / "s").mkdir()
    same = {"role": "user", "content": "continue", "timestamp": 5}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "timestamp": 6}
    parent_header = {"type": "session", "id": "0197bbbb-0000-7000-8000-000000000001"}
    parent_header |= {"timestamp": STAMP, "cwd": "/w"}
    body = [{"type": "message", "timestamp": STAMP, "message": m} for m in (same, reply)]
    source = _write(tmp_path / "s" / "parent.jsonl", [parent_header, *body, *body])
    fork = _write(
        tmp_path / "s" / "fork.jsonl", [_header(source), *_copied(body[:1]), _own("then", 3)]
    )
    store = Store(tmp_path / "home")
    _import(store, source)
    foreign, child = _import(store, fork)
    assert store.info(child.session_id).parent_event is None
    assert any("match 2 places" in w for w in foreign.report.warnings)

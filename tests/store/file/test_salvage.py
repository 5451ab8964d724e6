"""Damage, said once and where; a check's findings stop appends; salvage keeps what verifies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from infai.shells.cli import main
from infai.store import (
    CorruptionError,
    GapRecord,
    MessageRecord,
    Store,
    StoreOptions,
    ToolResultRecord,
    salvage_session,
)


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home", StoreOptions(lock_timeout=0, blob_threshold=200))


def _flip(path: Path, line: int) -> int:
    """Flip one byte inside line ``line`` (0-based) of ``path``; returns the line's offset."""
    data = bytearray(path.read_bytes())
    offset = 0
    for _ in range(line):
        offset = data.index(b"\n", offset) + 1
    data[offset + 30] ^= 0x04
    path.write_bytes(bytes(data))
    return offset


def _branchy(store: Store) -> tuple[str, dict[str, str]]:
    """a -> b -> c (HEAD's branch) and a -> d (an older branch); e follows d."""
    sid = store.create_session(name="work").id
    with store.open_writer(sid) as w:
        a = w.append(msg("a"), "user")
        d = w.append(msg("d"), "assistant")
        e = w.append(msg("e"), "user")
        w.select(a.id)
        b = w.append(msg("b"), "assistant")
        c = w.append(msg("c"), "user")
    return sid, {"a": a.id, "b": b.id, "c": c.id, "d": d.id, "e": e.id}


def test_one_flipped_byte_is_one_problem_even_after_more_appends(store: Store) -> None:
    sid, _ = _branchy(store)
    chunk = store.paths(sid).chunk(0)
    offset = _flip(chunk, 1)  # "d": a parent of others
    with store.open_writer(sid) as w:  # nobody has looked yet: the append goes through
        w.append(msg("later"), "user")
    report = store.fsck(sid)
    assert [(p.path, p.offset) for p in report.problems] == [(str(chunk), offset)]
    assert report.status == "damaged"


def test_a_crash_leftover_needs_recovery_and_is_not_called_failed(store: Store) -> None:
    sid, _ = _branchy(store)
    paths = store.paths(sid)
    with paths.chunk(0).open("ab") as f:
        f.write(b'{"torn": tr')  # a line cut by a kill -9
    paths.index.write_bytes(paths.index.read_bytes()[:-512])  # an index entry not yet written
    result = CliRunner().invoke(main, ["--home", str(store.home), "session", "fsck", sid])
    assert result.exit_code == 1
    assert "needs recovery" in result.stdout and "FAILED" not in result.stdout
    assert "would truncate" in result.stdout and "would rebuild" in result.stdout
    assert " rebuilt " not in result.stdout and "truncated" not in result.stdout


def test_repair_of_a_damaged_chunk_prints_a_report(store: Store) -> None:
    sid, _ = _branchy(store)
    chunk = store.paths(sid).chunk(0)
    before = chunk.read_bytes()
    _flip(chunk, 3)
    damaged = chunk.read_bytes()
    result = CliRunner().invoke(
        main, ["--home", str(store.home), "session", "fsck", "--repair", sid]
    )
    assert result.exit_code == 1
    assert "nothing repaired" in result.stdout and "salvage" in result.stdout
    assert "problem:" in result.stdout and f"{sid}: damaged" in result.stdout
    assert chunk.read_bytes() == damaged != before


def test_a_session_found_damaged_takes_no_more_events(store: Store) -> None:
    sid, _ = _branchy(store)
    _flip(store.paths(sid).chunk(0), 2)
    assert not store.fsck(sid).ok
    with pytest.raises(CorruptionError, match="salvage"):
        store.open_writer(sid)
    result = CliRunner().invoke(
        main,
        ["--home", str(store.home), "session", "append", sid, "--kind", "message",
         "--role", "user", "--content", "more"],
    )  # fmt: skip
    assert result.exit_code == 1 and f"infai session fsck {sid}" in result.stderr


def test_salvage_keeps_every_branch_not_built_on_the_damage(store: Store) -> None:
    sid, ids = _branchy(store)
    chunk = store.paths(sid).chunk(0)
    _flip(chunk, 3)  # "b": c hangs from it; d and e do not
    damaged = chunk.read_bytes()
    report = salvage_session(store, sid)
    assert report.kept == 4 and [e for e, _ in report.lost] == [ids["b"]]
    assert "checksum" in report.lost[0][1]
    [(gap, lost)] = report.gaps
    assert lost == [ids["b"]]
    assert report.target is not None
    with store.open_reader(report.target) as reader:
        copied = {e.id: e for e in reader.entries()}
    assert set(copied) == {ids["a"], ids["d"], ids["e"], ids["c"], gap}
    assert copied[ids["d"]].parent_id == ids["a"] and copied[ids["e"]].parent_id == ids["d"]
    assert copied[ids["c"]].parent_id == gap and copied[gap].parent_id == ids["a"]
    assert store.fsck(report.target).ok
    info = store.info(report.target)
    assert info.name == "work (salvaged)" and info.extra["salvaged_from"] == sid
    assert chunk.read_bytes() == damaged  # the damaged session is left as it was


def test_salvage_drops_an_event_whose_blob_is_damaged(store: Store) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        a = w.append(msg("a"), "user")
        big = w.append(ToolResultRecord(call_id="1", name="read", content="R" * 500), "tool")
        after = w.append(msg("after the blob"), "assistant")
    [blob] = list(store.paths(sid).blobs.iterdir())
    blob.write_bytes(blob.read_bytes().replace(b"RRRR", b"RRRX", 1))
    report = salvage_session(store, sid)
    assert report.kept == 2 and [e for e, _ in report.lost] == [big.id]
    [(gap, _)] = report.gaps
    assert report.target is not None
    with store.open_reader(report.target) as reader:
        assert [e.id for e in reader.entries()] == [a.id, gap, after.id]


def test_salvage_from_the_command_line(store: Store) -> None:
    sid, ids = _branchy(store)
    _flip(store.paths(sid).chunk(0), 3)
    result = CliRunner().invoke(
        main, ["--home", str(store.home), "session", "salvage", sid, "--json"]
    )
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["kept"] == 4 and [x["event"] for x in out["lost"]] == [ids["b"]]
    assert [g["lost"] for g in out["gaps"]] == [[ids["b"]]]
    assert Store(store.home).exists(out["target"])


def test_one_flipped_byte_in_the_third_of_six_events_loses_only_that_event(
    store: Store,
) -> None:
    """A chain of six: the four after the damaged third verify, so they are kept,
    hung from a gap (naming the lost id) under the second; the model is told."""
    sid = store.create_session(name="six").id
    with store.open_writer(sid) as w:
        ids = [w.append(msg(f"event {i}"), "user" if i % 2 == 0 else "assistant").id
               for i in range(6)]  # fmt: skip
    _flip(store.paths(sid).chunk(0), 2)
    report = salvage_session(store, sid)
    assert report.kept == 5 and [e for e, _ in report.lost] == [ids[2]]
    [(gap, lost)] = report.gaps
    assert lost == [ids[2]]
    assert report.target is not None
    with store.open_reader(report.target) as reader:
        path = [e.id for e in reader.path(to_boundary=False)]
        assert path == [ids[0], ids[1], gap, ids[3], ids[4], ids[5]]
        assert reader.head == ids[5]
        gap_event = reader.event(gap, resolve=True)
        assert isinstance(gap_event.record, GapRecord) and gap_event.kind == "gap"
        assert gap_event.record.lost == [ids[2]] and ids[2] in gap_event.preview
        context = reader.context()
    assert store.fsck(report.target).ok
    assert store.info(report.target).format == 3  # an older infai refuses, not misreads
    from infai.agent.context import to_messages

    sent = to_messages(list(context.events))
    assert [m.content for m in sent][:2] == ["event 0", "event 1"]
    assert ids[2] in sent[2].content and sent[2].role == "user"
    assert [m.content for m in sent][3:] == ["event 3", "event 4", "event 5"]
    home = ["--home", str(store.home), "session"]
    for command, shown in (("log", "gap/system"), ("tree", "gap/system"), ("fsck", ": ok")):
        result = CliRunner().invoke(main, [*home, command, report.target])
        assert result.exit_code == 0, (command, result.output, result.stderr)
        assert shown in result.stdout and (command == "fsck" or ids[2] in result.stdout)

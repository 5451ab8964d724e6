"""Whose a file's last change was, as a restore asks (issue 24, item 3): a change
first recorded by a snapshot between turns (turn start, before restore) is the
user's and is asked about; one recorded after a tool, or before the point the
branch left shares with the event restored, is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from infai.agent import OnRestore, RestoreRefused, checkout
from infai.checkpoints import Checkpoints
from infai.checkpoints.notes import by_the_agent
from infai.store import MessageRecord, RestoreRecord, SnapshotRecord, Store


@pytest.fixture(autouse=True)
def checkpoints_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-wide config turns snapshots off; these tests are about them."""
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "no-such-config.toml"))


def snapshot(store: Store, work: Path, reason: str) -> SnapshotRecord:
    cp = Checkpoints(store.objects, work, store.home, watch=False)
    try:
        return cp.snapshot().record(reason)
    finally:
        cp.close()


def test_the_agents_change_on_another_branch_to_a_file_made_before_the_fork_is_not_asked(
    tmp_path: Path,
) -> None:
    """a.txt was the user's before the session; the agent changed it on branch X
    only. Checking X out from branch Y takes X's a.txt, as asked: the user's a.txt
    is the state both branches share. A hand edit of b.txt on Y is asked about."""
    store, work = Store(tmp_path / "store"), tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("mine\n")
    (work / "b.txt").write_text("b\n")
    sid = store.create_session(working_dir=str(work)).id
    with store.open_writer(sid) as writer:
        writer.append(snapshot(store, work, "turn start"), "system")
        fork = writer.append(MessageRecord(content="go"), "user").id
        (work / "a.txt").write_text("the agent's\n")
        on_x = writer.append(snapshot(store, work, "after bash"), "system").id
        (work / "a.txt").write_text("mine\n")  # back on branch Y, as it was at the fork
        writer.append(MessageRecord(content="other"), "user", parent=fork)
        writer.append(snapshot(store, work, "turn start"), "system")  # unchanged tree
    done = checkout(store, sid, on_x)
    assert (work / "a.txt").read_text() == "the agent's\n"
    assert done.notices == ["restored 1 file: a.txt (+1 -1)"]
    # b.txt edited by hand on Y, recorded by a turn's start: asked about
    (work / "a.txt").write_text("mine\n")
    (work / "b.txt").write_text("b by hand\n")
    with store.open_writer(sid) as writer:
        writer.append(MessageRecord(content="more"), "user", parent=done.event_id)
        writer.append(snapshot(store, work, "turn start"), "system")
    with pytest.raises(RestoreRefused) as refused:
        checkout(store, sid, on_x)
    assert refused.value.plan["hand_made"] == ["a.txt", "b.txt"]
    kept = checkout(store, sid, on_x, OnRestore(keep=("b.txt",), force=True))
    assert kept.touched == ["a.txt"] and (work / "b.txt").read_text() == "b by hand\n"
    assert "kept as they are: b.txt" in kept.notices


def test_whose_change_a_record_is() -> None:
    assert by_the_agent(SnapshotRecord(tree="t", reason="after write_file"))
    assert by_the_agent(RestoreRecord(tree="t", source="e"))
    for reason in ("turn start", "before restore", "before switch"):
        assert not by_the_agent(SnapshotRecord(tree="t", reason=reason))

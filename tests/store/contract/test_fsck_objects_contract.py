"""fsck of a session checks the objects its snapshots and manifests name (both
backends): a missing or damaged tree, or a missing file content, is a problem
named with the event; the session itself stays writable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.store import MessageRecord, SessionStore, SnapshotRecord, open_store
from infai.store.codec import digest_of
from objtrees import put_tree


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    location = str(tmp_path / "home") if request.param == "file" else None
    with open_store(location or request.getfixturevalue("pg_url")) as opened:
        yield opened


def test_fsck_names_the_snapshot_whose_objects_are_gone(store: SessionStore) -> None:
    good, _ = put_tree(store.objects, {"ok.txt": b"fine", "d/x": b"deep"})
    hollow, reached = put_tree(store.objects, {"a.txt": b"content that gc lost"})
    not_tree = store.objects.put(b"plain bytes, not a tree")
    sid = store.create_session().id
    with store.open_writer(sid) as writer:
        writer.append(SnapshotRecord(tree=good), "system")
        clean = store.fsck(sid)
        assert clean.ok, [str(p) for p in clean.problems]
        lost = writer.append(SnapshotRecord(tree=digest_of(b"never stored")), "system")
        bad = writer.append(SnapshotRecord(tree=not_tree), "system")
        gap = writer.append(SnapshotRecord(tree=hollow), "system")
        named = writer.append(
            MessageRecord(content="m", metadata={"tool_manifest": digest_of(b"no manifest")}),
            "assistant",
        )
    store.objects.remove(reached - {hollow})
    report = store.fsck(sid)
    found = {p.path.rsplit(" ", 1)[-1]: p.detail for p in report.problems}
    assert set(found) == {lost.id, bad.id, gap.id, named.id}
    assert "no object" in found[lost.id] and "not a tree object" in found[bad.id]
    assert "1 missing object" in found[gap.id] and "tool manifest" in found[named.id]
    assert not report.ok
    with store.open_writer(sid) as writer:  # the conversation goes on
        writer.append(MessageRecord(content="still writable"), "user")


def test_salvage_keeps_snapshots_and_their_files(store: SessionStore) -> None:
    from infai.store import salvage_session

    tree, reached = put_tree(store.objects, {"a": b"kept by the salvaged copy"})
    sid = store.create_session().id
    with store.open_writer(sid) as writer:
        writer.append(MessageRecord(content="hi"), "user")
        writer.append(SnapshotRecord(tree=tree), "system")
    report = salvage_session(store, sid)
    assert report.target is not None and report.kept == 2 and not report.lost
    assert store.info(report.target).format == 2 and store.fsck(report.target).ok
    store.remove_session(sid)
    from infai.store import collect_garbage

    assert collect_garbage(store, grace=0).removed == 0  # the copy still reaches them
    assert store.objects.missing(reached) == set()

"""Tree objects and the workspace record kinds (snapshot, restore): codecs and gc walk."""

from __future__ import annotations

from pathlib import Path

import pytest

from infai.store import InvalidInput, RestoreRecord, SnapshotRecord
from infai.store.file import Store
from infai.store.records import decode_record, encode_record, preview
from infai.store.trees import TreeEntry, decode_tree, encode_tree, reachable


def test_a_tree_is_canonical_and_round_trips_odd_names() -> None:
    a = TreeEntry("b.sh", "file", "sha256:" + "1" * 64, 10, executable=True)
    b = TreeEntry("caf\udce9", "link", "sha256:" + "2" * 64, 3)  # not UTF-8 on disk
    assert encode_tree([a, b]) == encode_tree([b, a])
    assert decode_tree(encode_tree([b, a])) == [a, b]
    with pytest.raises(InvalidInput, match="appears twice"):
        encode_tree([a, a])
    for bad in ("..", "x/y", ""):
        with pytest.raises(InvalidInput, match="bad entry name"):
            encode_tree([TreeEntry(bad, "file", a.digest, 1)])
    with pytest.raises(InvalidInput, match="entry 0: size"):
        decode_tree(b'{"v":1,"entries":[["a","file","sha256:' + b"1" * 64 + b'",-1,0]]}')


def test_reachable_walks_nested_trees_once(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        content = store.objects.put(b"data")
        inner = store.objects.put(encode_tree([TreeEntry("f", "file", content, 4)]))
        root = store.objects.put(
            encode_tree([TreeEntry("d", "dir", inner, 4), TreeEntry("e", "dir", inner, 4)])
        )
        store.objects.put(b"garbage")
        assert reachable(store.objects, [root]) == {root, inner, content}


def test_snapshot_and_restore_records_round_trip_and_preview() -> None:
    snap = SnapshotRecord(tree="sha256:" + "3" * 64, reason="after bash", files=3, changed=1)
    snap.skipped["big.bin"] = "over the size cap"
    assert decode_record("snapshot", encode_record(snap)) == snap
    assert "1 changed" in preview(snap)
    restore = RestoreRecord(tree=snap.tree, source="e1", touched=["a.txt"])
    assert decode_record("restore", encode_record(restore)) == restore
    with pytest.raises(InvalidInput, match="missing required field 'tree'"):
        decode_record("snapshot", b'{"reason":"x"}')
    with pytest.raises(InvalidInput, match="files: expected an integer"):
        decode_record("snapshot", b'{"tree":"t","files":"3"}')

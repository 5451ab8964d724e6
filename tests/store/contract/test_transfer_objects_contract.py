"""Export carries the objects a session's snapshots reach; import brings them into
a fresh store (either backend), verified; a forged or incomplete file changes
nothing; a session naming no object is still a version 1 file."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.store import (
    InvalidInput,
    MessageRecord,
    RestoreRecord,
    SessionStore,
    SnapshotRecord,
    Store,
    export_lines,
    import_session,
    open_store,
)
from infai.store.codec import digest_of
from infai.store.trees import reachable
from objtrees import put_tree


@pytest.fixture(params=["file", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    location = str(tmp_path / "target") if request.param == "file" else None
    with open_store(location or request.getfixturevalue("pg_url")) as opened:
        yield opened


def _session_with_snapshots(store: Store) -> tuple[str, set[str]]:
    one, reach_one = put_tree(store.objects, {"a.txt": b"one", "bin/x": b"\x00\xff" * 50})
    two, reach_two = put_tree(store.objects, {"a.txt": b"two", "bin/x": b"\x00\xff" * 50})
    manifest = store.objects.put(b'{"tools":["read_file"]}')
    store.objects.put(b"an object no event of this session names")
    sid = store.create_session(name="with files").id
    with store.open_writer(sid) as writer:
        first = writer.append(MessageRecord(content="go"), "user")
        writer.append(SnapshotRecord(tree=one, files=2), "system")
        writer.append(SnapshotRecord(tree=two, files=2), "system", parent=first.id)
        writer.append(RestoreRecord(tree=one, source=first.id), "system")
        meta = {"tool_manifest": manifest}
        writer.append(MessageRecord(content="ok", metadata=meta), "assistant")
    return sid, reach_one | reach_two | {manifest}


def test_export_import_carries_every_object_into_a_fresh_store(
    tmp_path: Path, target: SessionStore
) -> None:
    with Store(tmp_path / "source") as source:
        sid, reached = _session_with_snapshots(source)
        data = b"".join(export_lines(source, sid))
    lines = data.splitlines()
    assert json.loads(lines[0])["infai_export"] == 2
    carried = {json.loads(line)["object"] for line in lines if line.startswith(b'{"object"')}
    assert carried == reached  # every one reached, and nothing else
    imported = import_session(target, io.BytesIO(data), "export.jsonl")
    assert imported.id == sid
    assert target.objects.missing(reached) == set()
    with target.open_reader(sid) as view:
        roots = [view.event(e.id, resolve=True).record for e in view.entries()]
    trees = [r.tree for r in roots if isinstance(r, SnapshotRecord | RestoreRecord)]
    assert reachable(target.objects, trees) <= reached  # walks: every tree present and valid
    assert all(target.objects.get(d) for d in reached - {digest_of(b"")})  # verified reads
    assert target.fsck(sid).ok


def test_a_session_without_objects_is_still_version_1(tmp_path: Path) -> None:
    with Store(tmp_path / "s") as store:
        sid = store.create_session().id
        with store.open_writer(sid) as writer:
            writer.append(MessageRecord(content="plain talk"), "user")
        lines = list(export_lines(store, sid))
    assert json.loads(lines[0])["infai_export"] == 1 and len(lines) == 2


def _forge(data: bytes, change: str) -> bytes:
    lines = data.splitlines()
    objects = [n for n, line in enumerate(lines) if line.startswith(b'{"object"')]
    if change == "drop":
        del lines[objects[0]]
    elif change == "flip":
        obj = json.loads(lines[objects[-1]])
        raw = bytearray(base64.b64decode(obj["data"]))
        raw[0] ^= 1
        obj["data"] = base64.b64encode(bytes(raw)).decode()
        lines[objects[-1]] = json.dumps(obj).encode()
    elif change == "extra":
        stray = b"smuggled"
        extra = {"object": digest_of(stray), "data": base64.b64encode(stray).decode()}
        lines.append(json.dumps(extra).encode())
    elif change == "v1":
        lines[0] = lines[0].replace(b'"infai_export":2', b'"infai_export":1')
    return b"\n".join(lines) + b"\n"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("drop", "not in the file"),
        ("flip", "does not hash to its name"),
        ("extra", "reached by no event"),
        ("v1", "version 1 export holds no objects"),
    ],
)
def test_a_forged_or_incomplete_file_imports_nothing(
    tmp_path: Path, change: str, message: str
) -> None:
    with Store(tmp_path / "source") as source:
        sid, _ = _session_with_snapshots(source)
        data = b"".join(export_lines(source, sid))
    with Store(tmp_path / "fresh") as fresh:
        with pytest.raises(InvalidInput, match=message):
            import_session(fresh, io.BytesIO(_forge(data, change)), "forged.jsonl")
        assert fresh.list_sessions() == [] and fresh.objects.stats() == (0, 0)


def test_a_tree_with_a_hostile_name_is_refused(tmp_path: Path) -> None:
    content = b"x"
    evil = json.dumps(
        {"v": 1, "entries": [["..", "file", digest_of(content), 1, 0]]}, separators=(",", ":")
    ).encode()
    with Store(tmp_path / "s") as store:
        good, _ = put_tree(store.objects, {"ok": content})
        sid = store.create_session().id
        with store.open_writer(sid) as writer:
            writer.append(SnapshotRecord(tree=good), "system")
        data = b"".join(export_lines(store, sid))
    forged = data.replace(good.encode(), digest_of(evil).encode())
    forged = forged.replace(base64.b64encode(store_tree_bytes(content)), base64.b64encode(evil))
    assert digest_of(evil).encode() in forged and base64.b64encode(evil) in forged
    with Store(tmp_path / "fresh") as fresh:
        with pytest.raises(InvalidInput, match="bad entry name"):
            import_session(fresh, io.BytesIO(forged), "evil.jsonl")
        assert fresh.objects.stats() == (0, 0)


def store_tree_bytes(content: bytes) -> bytes:
    """The bytes of the one-file tree ``{"ok": content}`` (as put_tree writes it)."""
    from infai.store.trees import TreeEntry, encode_tree

    return encode_tree([TreeEntry("ok", "file", digest_of(content), len(content))])

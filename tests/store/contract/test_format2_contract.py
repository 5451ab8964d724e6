"""Store format 2: a session becomes format 2 with its first snapshot or restore
event (both backends); a format 1 session written the old way reads as it is; a
newer format is refused, never misread."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from infai.store import (
    FORMAT_VERSION,
    GapRecord,
    MessageRecord,
    SessionStore,
    SnapshotRecord,
    Store,
    UnsupportedFormat,
    export_lines,
    import_session,
    open_store,
)
from infai.store.pg import PgStore


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    location = str(tmp_path / "home") if request.param == "file" else None
    with open_store(location or request.getfixturevalue("pg_url")) as opened:
        yield opened


def test_the_first_workspace_event_makes_a_session_format_2(store: SessionStore) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as writer:
        writer.append(MessageRecord(content="talk only"), "user")
        assert store.info(sid).format == 1  # still readable by an older infai
        tree = store.objects.put(b'{"v":1,"entries":[]}')
        writer.append(SnapshotRecord(tree=tree), "system")
        assert store.info(sid).format == 2 == FORMAT_VERSION - 2  # 3: gaps (salvage), 4: hooks
        writer.append(MessageRecord(content="more"), "user")
    assert store.info(sid).format == 2
    data = io.BytesIO(b"".join(export_lines(store, sid)))
    store.remove_session(sid)
    assert import_session(store, data, "x.jsonl").format == 2  # import keeps it honest


def test_a_gap_makes_a_session_format_3_after_a_snapshot_made_it_2(
    store: SessionStore,
) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as writer:
        writer.append(SnapshotRecord(tree=store.objects.put(b'{"v":1,"entries":[]}')), "system")
        assert store.info(sid).format == 2
        writer.append(GapRecord(summary="1 event lost here", lost=[sid]), "system")
        assert store.info(sid).format == 3 == FORMAT_VERSION - 1
    with store.open_reader(sid) as reader:
        gap = reader.event(reader.head or "", resolve=True)
    assert gap.kind == "gap" and gap.record == GapRecord(summary="1 event lost here", lost=[sid])


def test_a_newer_format_is_refused(store: SessionStore) -> None:
    sid = store.create_session().id
    if isinstance(store, Store):
        meta = store.home / "sessions" / sid / "session.json"
        obj = json.loads(meta.read_bytes())
        obj["format"] = FORMAT_VERSION + 1
        meta.write_bytes(json.dumps(obj).encode())
    else:
        assert isinstance(store, PgStore)
        with psycopg.connect(store.url, autocommit=True) as pg:
            pg.execute(
                "UPDATE infai_sessions SET info = jsonb_set(info, '{format}', to_jsonb(%s))"
                " WHERE id = %s",
                (FORMAT_VERSION + 1, sid),
            )
    with pytest.raises(UnsupportedFormat, match="upgrade infai"):
        store.info(sid)


V1_SESSION_JSON = {
    "id": "01a23c00-0000-7000-8000-000000000001",
    "format": 1,
    "name": "written by infai with format 1",
    "working_dir": "/w",
    "model": "offline",
    "created_at": "2026-11-01T10:00:00.000000Z",
    "updated_at": "2026-11-01T10:00:00.000000Z",
    "parent_session": None,
    "parent_event": None,
    "extra": {},
}


def test_a_format_1_session_written_the_old_way_reads_as_it_is(tmp_path: Path) -> None:
    """Built by an infai of format 1 (session.json format 1, no objects database),
    then read, continued and snapshotted by this one."""
    home = tmp_path / "home"
    with Store(home) as old:  # the bytes a format 1 infai wrote: events, then metadata
        sid = old.create_session(session_id=V1_SESSION_JSON["id"]).id  # type: ignore[arg-type]
        with old.open_writer(sid) as writer:
            first = writer.append(MessageRecord(content="hello from v1"), "user")
    meta = home / "sessions" / sid / "session.json"
    meta.write_bytes(json.dumps(V1_SESSION_JSON).encode() + b"\n")
    assert not (home / "objects").exists()
    with Store(home) as store:
        info = store.info(sid)
        assert info.format == 1 and info.name == "written by infai with format 1"
        with store.open_reader(sid) as view:
            assert [e.record.content for e in view.context().events] == ["hello from v1"]  # type: ignore[union-attr]
        assert store.fsck(sid).ok
        assert json.loads(b"".join(export_lines(store, sid)).splitlines()[0])["infai_export"] == 1
        with store.open_writer(sid) as writer:
            tree = store.objects.put(b'{"v":1,"entries":[]}')
            writer.append(SnapshotRecord(tree=tree), "system", parent=first.id)
        assert store.info(sid).format == 2

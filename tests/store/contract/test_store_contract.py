"""The storage contract, run against both backends: the file store and PostgreSQL.

Whatever is not about files (chunks, fsyncs, byte offsets) is tested here once
and must hold for every backend the agent and the shells may be given.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.store import (
    NIL_ID,
    CompactionRecord,
    EventNotFound,
    InvalidInput,
    MessageRecord,
    SessionExists,
    SessionLog,
    SessionNotFound,
    SessionStore,
    SessionView,
    Store,
    ToolResultRecord,
    open_store,
)
from infai.store.pg import PgStore
from infai.store.transfer import export_lines, import_session


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "file":
        location = str(tmp_path / "home")
    else:
        location = request.getfixturevalue("pg_url")
    opened = open_store(location)
    checked: SessionStore = opened  # both backends satisfy the protocol (mypy checks)
    try:
        yield checked
    finally:
        opened.close()


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


def test_sessions_are_created_listed_renamed_and_removed(store: Any) -> None:
    first = store.create_session(name="first", working_dir="/w", model="offline")
    second = store.create_session(name="second")
    assert store.info(first.id) == first and store.exists(first.id)
    assert [i.id for i in store.list_sessions()] == [second.id, first.id]  # newest first
    renamed = store.update_info(first.id, name="renamed")
    assert renamed.name == "renamed" and store.info(first.id).name == "renamed"
    assert store.list_sessions()[0].id == first.id  # activity moves it up
    with pytest.raises(InvalidInput):
        store.update_info(first.id, id="x")
    store.remove_session(first.id)
    assert not store.exists(first.id)
    with pytest.raises(SessionNotFound):
        store.info(first.id)
    with pytest.raises(SessionNotFound):
        store.remove_session(first.id)
    with pytest.raises(InvalidInput):
        store.info("../etc")
    with pytest.raises(SessionExists):
        store.create_session(session_id=second.id)
    with pytest.raises(SessionNotFound):
        store.create_session(parent_session=first.id)


def test_appends_build_a_tree_with_head_and_two_phase_branches(store: Any) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        assert w.head is None and w.count == 0 and w.context().events == []
        a = w.append(msg("a"), "user")
        b = w.append(msg("b"), "assistant")
        assert (a.parent_id, a.parent_seq, b.parent_id) == (NIL_ID, -1, a.id)
        assert w.head == b.id and w.count == 2 and b.branch_from is None
        w.select(a.id)  # two-phase: nothing moves yet
        assert w.pending_parent == a.id and w.head == b.id
        c = w.append(msg("c"), "user")
        assert c.parent_id == a.id and c.branch_from == a.id and w.head == c.id
        assert w.pending_parent is None
        w.select(c.id)
        assert w.pending_parent is None  # selecting HEAD is no selection
        d, e = w.append_batch([(msg("d"), "assistant"), (msg("e"), "user")])
        assert (d.parent_id, e.parent_id) == (c.id, d.id) and w.head == e.id
        assert [x.record.content for x in w.context().events] == ["a", "c", "d", "e"]
        assert [x.id for x in w.path()] == [a.id, c.id, d.id, e.id]
        assert [x.id for x in w.path(b.id)] == [a.id, b.id]
        assert {x.id for x in w.leaves()} == {b.id, e.id}
        assert [x.id for x in w.children(a.id)] == [b.id, c.id]
        assert [x.id for x in w.roots()] == [a.id]
        assert w.entry(c.id).branch_from == a.id and w.entry_at(2).id == c.id
        assert w.seq_of(e.id) == 4 and [x.seq for x in w.entries()] == [0, 1, 2, 3, 4]
    with store.open_reader(sid) as r:
        assert r.head == e.id and r.count == 5
        assert r.event(b.id).record == msg("b")
        assert [x.record.content for x in r.context(b.id).events] == ["a", "b"]


def test_bad_appends_change_nothing(store: Any) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(msg("a"), "user")
        with pytest.raises(EventNotFound):
            w.append(msg("x"), "user", parent="01234567-89ab-7def-8123-456789abcdef")
        with pytest.raises(InvalidInput):
            w.append(msg("x"), "Bad Role!")
        with pytest.raises(InvalidInput):
            w.append("not a record", "user")
        with pytest.raises(EventNotFound):
            w.select("01234567-89ab-7def-8123-456789abcdef")
        assert w.count == 1
    with store.open_reader(sid) as r:
        assert r.count == 1
        with pytest.raises(EventNotFound):
            r.event("01234567-89ab-7def-8123-456789abcdef")


def test_large_records_are_blobs_loaded_only_when_asked(store: Any) -> None:
    sid = store.create_session().id
    big = ToolResultRecord(call_id="c1", name="read_file", content="x" * 40_000)
    with store.open_writer(sid) as w:
        w.append(msg("read it"), "user")
        event = w.append(big, "tool")
    assert event.digest is not None and event.digest.startswith("sha256:")
    with store.open_reader(sid) as r:
        lazy = r.event(event.id)
        assert lazy.record is None and lazy.preview.startswith("read_file: xxx")
        assert r.resolve(lazy) == big
        assert r.event(event.id, resolve=True).record == big
        assert r.context().events[-1].record == big
        assert r.context(resolve=False).events[-1].record is None
    assert store.fsck(sid).ok


def test_compaction_is_a_context_boundary(store: Any) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(msg("old"), "user")
        boundary = w.append(CompactionRecord(summary="so far"), "assistant")
        w.append(msg("new"), "user")
        context = w.context()
        assert context.boundary is not None and context.boundary.id == boundary.id
        assert [e.kind for e in context.events] == ["compaction", "message"]
        assert len(w.path(to_boundary=False)) == 3


def test_a_reader_sees_the_session_as_it_was_when_opened(store: Any) -> None:
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(msg("one"), "user")
        with store.open_reader(sid) as r:
            w.append(msg("two"), "assistant")
            assert r.count == 1 and [e.seq for e in r.entries()] == [0]
            assert [e.record.content for e in r.context().events] == ["one"]


def test_export_and_import_keep_ids_branches_and_head(store: Any) -> None:
    sid = store.create_session(name="src").id
    big = ToolResultRecord(call_id="c", name="grep", content="y" * 30_000)
    with store.open_writer(sid) as w:
        a = w.append(msg("a"), "user")
        w.append(big, "tool")
        w.append(msg("c"), "user", parent=a.id)
    data = b"".join(export_lines(store, sid))
    with pytest.raises(SessionExists):
        import_session(store, io.BytesIO(data))
    store.remove_session(sid)
    info = import_session(store, io.BytesIO(data))
    assert info.id == sid and info.name == "src"
    with store.open_reader(sid) as r:
        assert r.count == 3 and r.context().events[0].id == a.id
        assert r.event(r.entry_at(1).id, resolve=True).record == big
        assert r.entry_at(2).branch_from == a.id
    assert store.fsck(sid).ok


def test_both_backends_satisfy_the_protocols(store: Any) -> None:
    """mypy checks the assignments in ``_conforms``; here they run on real objects."""
    sid = store.create_session().id
    with store.open_writer(sid) as writer, store.open_reader(sid) as reader:
        _conforms(store, writer, reader)


def _conforms(store: Store | PgStore, writer: Any, reader: Any) -> None:
    if isinstance(store, Store):
        checked: SessionStore = store
        log: SessionLog = store.open_writer(store.create_session().id)
        view: SessionView = store.open_reader(store.create_session().id)
    else:
        checked = store
        log = store.open_writer(store.create_session().id)
        view = store.open_reader(store.create_session().id)
    log.close()
    view.close()
    assert checked.exists(writer.session_id) and reader.session_id == writer.session_id


def test_metadata_no_backend_could_hold_is_refused_and_nothing_changes(store: Any) -> None:
    with pytest.raises(InvalidInput, match="field 'name' contains a NUL character"):
        store.create_session(name="a\x00b")
    assert store.list_sessions() == []
    sid = store.create_session(name="ok").id
    with pytest.raises(InvalidInput, match="field 'model' contains a NUL character"):
        store.update_info(sid, model="m\x00")
    with pytest.raises(InvalidInput, match="field 'extra' contains a NUL character"):
        store.update_info(sid, extra={"allowed": ["bash \x00"]})
    with pytest.raises(InvalidInput, match="field 'extra' is not plain JSON"):
        store.update_info(sid, extra={"n": float("nan")})
    info = store.info(sid)
    assert info.name == "ok" and info.model is None and info.extra == {}
    with pytest.raises(InvalidInput, match="field 'working_dir' contains a NUL character"):
        store.restore_info(info.replace(working_dir="/a\x00"))
    assert store.info(sid).working_dir is None


def test_an_unknown_event_is_named_once_in_the_error(store: Any) -> None:
    sid = store.create_session().id
    missing = "0190e0d4-0000-7000-8000-000000000000"
    with store.open_reader(sid) as reader, pytest.raises(EventNotFound) as caught:
        reader.event(missing)
    assert str(caught.value) == f"no event {missing} in session {sid}"


def test_both_backends_raise_the_same_errors(store: Any) -> None:
    """A sequence number outside the view is no event (not damage); metadata for a
    session that is not there is refused, and nothing is made."""
    sid = store.create_session(name="errs").id
    with store.open_writer(sid) as w:
        w.append(msg("one"), "user")
        w.append(msg("two"), "assistant")
    with store.open_reader(sid) as reader:
        assert reader.entry_at(1).seq == 1
        for seq in (-1, 2, 10_000):
            with pytest.raises(EventNotFound, match=f"#{seq}"):
                reader.entry_at(seq)
    info = store.info(sid)
    ghost = info.replace(id="01a24300-0000-7000-8000-000000000001", name="ghost")
    with pytest.raises(SessionNotFound):
        store.restore_info(ghost)
    assert not store.exists(ghost.id)
    with pytest.raises(SessionNotFound):
        store.update_info(ghost.id, name="ghost")
    store.restore_info(info.replace(name="restored"))
    assert store.info(sid).name == "restored" and store.info(sid).updated_at == info.updated_at
    with store.open_writer(sid):  # this store's own writer: its lock is used, no wait
        store.restore_info(info)
    assert store.info(sid).name == "errs"


def test_file_restore_info_waits_for_the_writer_lock(tmp_path: Path) -> None:
    """Metadata written by restore_info is written under the session's writer lock,
    like update_info: another process's writer holds it, so it is refused after the
    lock timeout, not written beside a live writer."""
    from infai.store import StoreOptions, WriterLocked

    home = tmp_path / "home"
    writer_side = Store(home)
    sid = writer_side.create_session(name="held").id
    other = Store(home, StoreOptions(lock_timeout=0))
    info = other.info(sid)
    with writer_side.open_writer(sid), pytest.raises(WriterLocked):
        other.restore_info(info.replace(name="sneaked"))
    assert other.info(sid).name == "held"
    other.restore_info(info.replace(name="after"))  # the writer is gone: it goes through
    assert other.info(sid).name == "after"

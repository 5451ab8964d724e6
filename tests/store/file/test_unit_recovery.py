"""Unit tests of infai.store.file.recovery: what a crash can leave, and what open does about it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infai.store import (
    CorruptionError,
    MessageRecord,
    Store,
    StoreOptions,
    WriterLocked,
)
from infai.store.file.format import INDEX_WIDTH, decode_head
from infai.store.file.layout import SessionPaths
from infai.store.file.recovery import analyze, apply


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home", StoreOptions(lock_timeout=0, blob_threshold=300))


def make_session(store: Store, n: int = 5) -> tuple[str, SessionPaths, list[str]]:
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        ids = [w.append(msg(f"event {i}"), "user").id for i in range(n)]
    return sid, store.paths(sid), ids


def files(paths: SessionPaths) -> dict[str, bytes]:
    return {
        str(p.relative_to(paths.root)): p.read_bytes()
        for p in paths.root.rglob("*")
        if p.is_file() and p.name != "LOCK"
    }


def recover_and_check_idempotent(store: Store, paths: SessionPaths) -> None:
    plan = analyze(paths)
    apply(store.io, paths, plan)
    again = analyze(paths)
    assert again.empty, again
    assert again.notes == []


# -- clean sessions -------------------------------------------------------------------------------


def test_new_session_needs_nothing(store: Store) -> None:
    sid = store.create_session().id
    plan = analyze(store.paths(sid))
    assert plan.empty and plan.notes == [] and plan.count == 0 and plan.last is None


def test_clean_session_needs_nothing(store: Store) -> None:
    sid, paths, ids = make_session(store)
    plan = analyze(paths)
    assert plan.empty and plan.notes == []
    assert plan.count == 5
    assert plan.last is not None and plan.last.id == ids[-1]
    with store.open_writer(sid):
        pass
    assert store.recovery_notes[sid] == []


def test_analyze_changes_nothing(store: Store) -> None:
    _, paths, _ = make_session(store)
    with paths.chunk(0).open("ab") as f:
        f.write(b'{"seq":5,"id":"torn')
    paths.head.write_bytes(b"junk")
    before = files(paths)
    plan = analyze(paths)
    assert not plan.empty
    assert files(paths) == before


# -- damaged sessions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "junk", [b'{"seq":5,"id":"01', b"\x00" * 700, b"\x00" * 20 + b"\n", b"{" * 3]
)
def test_torn_tail_is_truncated_with_a_note(store: Store, junk: bytes) -> None:
    sid, paths, ids = make_session(store)
    good = paths.chunk(0).stat().st_size
    with paths.chunk(0).open("ab") as f:
        f.write(junk)
    plan = analyze(paths)
    assert plan.truncate_chunks == {0: good}
    assert any("truncated" in n and str(len(junk)) in n for n in plan.notes)
    with store.open_writer(sid) as w:
        assert w.head == ids[-1]
        assert any("truncated" in n for n in store.recovery_notes[sid])
        w.append(msg("after"), "user")
    assert store.fsck(sid).ok


def test_uncommitted_batch_is_dropped(store: Store) -> None:
    sid, paths, ids = make_session(store, 2)
    size = paths.chunk(0).stat().st_size
    with store.open_writer(sid) as w:
        w.append_batch([(msg("b0"), "user"), (msg("b1"), "user"), (msg("b2"), "user")])
    data = paths.chunk(0).read_bytes()
    lines = data[size:].splitlines(keepends=True)
    paths.chunk(0).write_bytes(data[:size] + lines[0] + lines[1])  # the closing line is lost
    plan = analyze(paths)
    assert plan.truncate_chunks == {0: size} and plan.count == 2
    recover_and_check_idempotent(store, paths)
    with store.open_reader(sid) as r:
        assert r.head == ids[-1] and r.count == 2
    assert store.fsck(sid).ok


def test_complete_bad_line_at_tail_is_corruption(store: Store) -> None:
    sid, paths, _ = make_session(store)
    data = bytearray(paths.chunk(0).read_bytes())
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    data[last_start + 40] ^= 0x04
    paths.chunk(0).write_bytes(bytes(data))
    before = files(paths)
    with pytest.raises(CorruptionError) as info:
        analyze(paths)
    assert info.value.path == str(paths.chunk(0)) and info.value.offset == last_start
    for _ in range(2):  # the lock is released after the failure: the error repeats
        with pytest.raises(CorruptionError):
            store.open_writer(sid)
    assert files(paths) == before  # nothing was "fixed"


def test_missing_first_chunk_is_corruption(tmp_path: Path) -> None:
    store = Store(tmp_path, StoreOptions(chunk_size=300))
    _sid, paths, _ = make_session(store, 6)
    assert paths.chunk_numbers()[-1] >= 2
    paths.chunk(1).unlink()
    with pytest.raises(CorruptionError, match="missing") as info:
        analyze(paths)
    assert info.value.path == str(paths.chunk(1))


def test_empty_new_chunk_after_rotation(tmp_path: Path) -> None:
    store = Store(tmp_path, StoreOptions(chunk_size=300))
    sid, paths, ids = make_session(store, 4)
    last = paths.chunk_numbers()[-1]
    paths.chunk(last + 1).write_bytes(b"")  # created, then the crash
    plan = analyze(paths)
    assert plan.last is not None and plan.last.id == ids[-1]
    with store.open_writer(sid) as w:
        e = w.append(msg("next"), "user")
    with store.open_reader(sid) as r:
        assert r.head == e.id and r.entry(e.id).location.chunk == last + 1
    assert store.fsck(sid).ok


def test_missing_index_entries_are_rebuilt(store: Store) -> None:
    _sid, paths, _ids = make_session(store)
    full = paths.index.read_bytes()
    paths.index.write_bytes(full[: 3 * INDEX_WIDTH])
    plan = analyze(paths)
    assert sorted(plan.index_writes) == [3, 4]
    assert any("rebuilt 2 entries" in n for n in plan.notes)
    recover_and_check_idempotent(store, paths)
    assert paths.index.read_bytes() == full


def test_deleted_index_is_rebuilt(store: Store) -> None:
    _sid, paths, _ids = make_session(store)
    full = paths.index.read_bytes()
    paths.index.unlink()
    plan = analyze(paths)
    assert sorted(plan.index_writes) == list(range(5))
    recover_and_check_idempotent(store, paths)
    assert paths.index.read_bytes() == full


def test_zeroed_unsynced_entry_is_rewritten(store: Store) -> None:
    _sid, paths, _ = make_session(store)
    full = paths.index.read_bytes()
    damaged = full[: 4 * INDEX_WIDTH] + b"\x00" * INDEX_WIDTH
    paths.index.write_bytes(damaged)
    plan = analyze(paths)
    assert 4 in plan.index_writes
    recover_and_check_idempotent(store, paths)
    assert paths.index.read_bytes() == full


def test_index_past_last_event_is_cut(store: Store) -> None:
    _sid, paths, _ = make_session(store)
    full = paths.index.read_bytes()
    paths.index.write_bytes(full + full[-INDEX_WIDTH:] + b"  ")
    plan = analyze(paths)
    assert plan.index_size == len(full)
    assert any("past the last event" in n for n in plan.notes)
    recover_and_check_idempotent(store, paths)
    assert paths.index.read_bytes() == full


@pytest.mark.parametrize("head", [b"garbage", b"\x00" * 100, b""])
def test_damaged_head_is_rebuilt(store: Store, head: bytes) -> None:
    sid, paths, ids = make_session(store)
    paths.head.write_bytes(head)
    plan = analyze(paths)
    assert plan.head is not None
    assert any("HEAD" in n for n in plan.notes)
    recover_and_check_idempotent(store, paths)
    with store.open_reader(sid) as r:
        assert r.head == ids[-1]
    assert store.fsck(sid).ok


def test_missing_head_is_recreated(store: Store) -> None:
    sid, paths, _ids = make_session(store)
    paths.head.unlink()
    recover_and_check_idempotent(store, paths)
    assert paths.head.exists()
    assert store.fsck(sid).ok


def test_stale_head_naming_an_older_event(store: Store) -> None:
    # A crash after the chunk sync but before HEAD moved: HEAD names the parent.
    sid, paths, ids = make_session(store, 3)
    old_head = paths.head.read_bytes()
    with store.open_writer(sid) as w:
        w.append(msg("newest"), "user")
    paths.head.write_bytes(old_head)
    with store.open_reader(sid) as r:
        assert r.head != ids[-1]  # the reader trusts the chunks, not HEAD
        newest = r.head
    recover_and_check_idempotent(store, paths)
    with store.open_reader(sid) as r:
        assert r.head == newest
    assert store.fsck(sid).ok


def test_leftover_temp_files_are_removed(store: Store) -> None:
    sid, paths, _ = make_session(store)
    paths.head_tmp.write_bytes(paths.head.read_bytes())
    blob_tmp = paths.root / f".blob-{'de' * 32}.tmp"  # a blob write that never got renamed
    blob_tmp.write_bytes(b"partial")
    meta_tmp = paths.root / "session.json.tmp"
    meta_tmp.write_bytes(b"{")
    plan = analyze(paths)
    assert sorted(plan.remove) == sorted(map(str, [paths.head_tmp, blob_tmp, meta_tmp]))
    with store.open_writer(sid):
        pass
    for leftover in (paths.head_tmp, blob_tmp, meta_tmp):
        assert not leftover.exists()
    assert os.listdir(paths.blobs) == []
    assert store.info(sid).id == sid
    assert analyze(paths).empty


def test_a_reader_does_not_list_the_session_for_leftovers(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader never removes a killed write's temp files (the next writer does), so
    opening one reads only what it shows: no listing of the session directory."""
    sid, paths, ids = make_session(store)
    (paths.root / "session.json.tmp").write_bytes(b"{")
    listed: list[str] = []
    real_listdir = os.listdir

    def listdir(path: str | os.PathLike[str] = ".") -> list[str]:
        listed.append(os.fspath(path))
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", listdir)
    with store.open_reader(sid) as reader:
        assert [e.id for e in reader.context().events] == ids
        reader.refresh()
        assert reader.head == ids[-1]
    assert str(paths.root) not in listed
    assert analyze(paths, leftovers=False).remove == []
    assert analyze(paths).remove == [str(paths.root / "session.json.tmp")]


def test_open_writer_releases_lock_on_failed_recovery(store: Store) -> None:
    sid, paths, _ = make_session(store)
    data = bytearray(paths.chunk(0).read_bytes())
    data[-10] ^= 0x01
    paths.chunk(0).write_bytes(bytes(data))
    with pytest.raises(CorruptionError):
        store.open_writer(sid)
    try:
        store.open_writer(sid)
    except WriterLocked:  # pragma: no cover - the failure this guards against
        pytest.fail("a failed open left the writer lock held")
    except CorruptionError:
        pass


# -- the durable index mark after a crash ----------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import json, os, sys
    from infai.store import FileIO, MessageRecord, Store

    home, sid, n, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

    class LoggingIO(FileIO):
        # Appends one JSON line per fsync of index.jsonl: how many bytes it made durable.
        def fsync(self, fd):
            super().fsync(fd)
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.endswith("/index.jsonl"):
                with open(log, "a") as f:
                    f.write(json.dumps(os.fstat(fd).st_size) + "\\n")

    store = Store(home, io=LoggingIO())
    w = store.open_writer(sid)
    for i in range(n):
        w.append(MessageRecord(content=f"child event {i}"), "user")
    os._exit(0)  # killed: no close, nothing flushed beyond what append did
    """
)


def run_child(home: Path, sid: str, n: int, log: Path) -> None:
    subprocess.run(
        [sys.executable, "-c", _CHILD, str(home), sid, str(n), str(log)],
        check=True,
        timeout=60,
    )


def synced_entries(log: Path) -> int:
    if not log.exists():
        return 0
    return max((json.loads(x) // INDEX_WIDTH for x in log.read_text().split()), default=0)


def test_durable_mark_after_a_killed_writer_is_honest(tmp_path: Path) -> None:
    """``ixd`` in a chunk line must only count index entries that were fsynced.

    Writer A appends 20 events and is killed (fewer than index_sync_interval, so it
    never syncs the index). Writer B opens the session - recovery finds the index
    entries in the page cache, intact, and changes nothing - and appends one event.
    That line's ``ixd`` (and HEAD's durable mark) must not claim that A's entries are
    durable unless someone fsynced the index in between.
    """
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    log = tmp_path / "index-syncs.log"
    run_child(store.home, sid, 20, log)  # writer A, killed
    run_child(store.home, sid, 1, log)  # writer B, killed after one append
    synced = synced_entries(log)
    paths = store.paths(sid)
    last_line = json.loads(paths.chunk(0).read_bytes().splitlines()[-1])
    assert last_line["seq"] == 20
    assert last_line["ixd"] <= synced, (
        f"event #20 claims {last_line['ixd']} durable index entries; only {synced} were fsynced"
    )
    head = decode_head(paths.head.read_bytes())
    assert head is not None and head.seq == 20
    assert head.ixd <= synced, f"HEAD claims {head.ixd} durable index entries; {synced} were"


def test_unsynced_index_page_lost_after_kill_is_repaired(tmp_path: Path) -> None:
    """The consequence of a dishonest mark: a power cut after the second writer's append.

    Writer A's index entries were never fsynced, so a power cut may lose any of their
    pages while a later page survives. Entries 0-7 share the first 4 KiB page; here that
    page is lost (zeroed) and the rest survived. Opening the session must repair the
    index (or at least not trust it) so that the active path can be read.
    """
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    log = tmp_path / "index-syncs.log"
    run_child(store.home, sid, 20, log)
    run_child(store.home, sid, 1, log)
    synced = synced_entries(log)
    paths = store.paths(sid)
    index = bytearray(paths.index.read_bytes())
    per_page = 4096 // INDEX_WIDTH
    first_unsynced_page = -(-synced // per_page) * per_page
    lost = range(first_unsynced_page, min(first_unsynced_page + per_page, 20))
    for seq in lost:
        index[seq * INDEX_WIDTH : (seq + 1) * INDEX_WIDTH] = b"\x00" * INDEX_WIDTH
    paths.index.write_bytes(bytes(index))
    with store.open_writer(sid) as w:
        assert w.count == 21
        assert len(w.path()) == 21
        assert len(w.context().events) == 21
    with store.open_reader(sid) as r:
        assert len(r.path()) == 21
    assert store.fsck(sid).ok


def test_leftover_head_tmp_with_stale_head(store: Store) -> None:
    # An interrupted strict-mode update leaves HEAD.tmp, and HEAD itself is stale:
    # recovery both removes the leftover and rewrites HEAD (which uses HEAD.tmp).
    sid, paths, ids = make_session(store)
    paths.head_tmp.write_bytes(b"partial")
    paths.head.write_bytes(b"")
    with store.open_writer(sid) as w:
        assert w.head == ids[-1]
    assert not paths.head_tmp.exists()
    assert analyze(paths).empty
    assert store.fsck(sid).ok

"""Review findings: each test fails on the current code, for the reason in its docstring."""

from __future__ import annotations

import errno
import io
import json
import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from infai.shells.cli import main
from infai.store import (
    CorruptionError,
    FileIO,
    InvalidInput,
    MessageRecord,
    SessionNotFound,
    Store,
    StoreError,
    StoreIOError,
    StoreOptions,
    WriterLocked,
)
from infai.store.file.fsck import fsck
from infai.store.file.lock import WriterLock
from infai.store.transfer import export_lines, import_session


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home", StoreOptions(lock_timeout=0.2))


# -- import: timestamps are never validated ---------------------------------------------------


def _export_with_timestamp(store: Store, timestamp: str) -> bytes:
    sid = store.create_session(name="src").id
    with store.open_writer(sid) as w:
        w.append(msg("a"), "user")
        w.append(msg("b"), "assistant")
    lines = list(export_lines(store, sid))
    store.remove_session(sid)
    events = [json.loads(line) for line in lines[1:]]
    events[0]["timestamp"] = timestamp
    return lines[0] + b"".join(json.dumps(e).encode() + b"\n" for e in events)


@pytest.mark.parametrize("timestamp", ["T" * 400, "yesterday", "2026-12-02T14:43:39.984693Z\ud800"])
def test_import_rejects_a_bad_timestamp_and_creates_nothing(store: Store, timestamp: str) -> None:
    """transfer._parse_event only checks that `timestamp` is a string.

    * 400 characters: the index entry no longer fits in 512 bytes (`_entry_bytes` stops
      shortening at an empty preview and pads with a negative count), entries overlap,
      the import *succeeds*, and every later open/read raises CorruptionError; recovery
      rewrites the same oversize entries on every open and `fsck --repair` cannot fix it.
    * "yesterday": accepted, although the format says RFC 3339.
    * a lone surrogate: UnicodeEncodeError (not a StoreError) escapes from encode_event.
    """
    data = _export_with_timestamp(store, timestamp)
    with pytest.raises(InvalidInput):
        import_session(store, io.BytesIO(data))
    assert store.list_sessions() == []


# -- a zero run before the last valid line is taken for a torn tail -----------------------------


def test_zeroed_bytes_before_the_last_valid_line_are_corruption(tmp_path: Path) -> None:
    """chunks._is_torn calls any "line" holding four NULs torn. If the zeroed bytes eat
    the newline of an earlier line, lines_backward yields zeros + the last (valid,
    acknowledged) line as one line, committed_tail skips it as a torn tail, and open
    silently drops every event after the damage; a writer then truncates them (with
    only a note nobody prints). The spec: invalid bytes before the last valid record
    are corruption, reported by file and offset, nothing changed."""
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        ids = [w.append(msg(f"event {i}"), "user").id for i in range(3)]
    chunk = store.paths(sid).chunk(0)
    data = chunk.read_bytes()
    first_nl = data.index(b"\n")
    second_nl = data.index(b"\n", first_nl + 1)
    # a zeroed sector's worth of damage over the end of event 1 (its newline included)
    start = max(first_nl + 1, second_nl - 100)
    chunk.write_bytes(data[:start] + b"\0" * (second_nl + 1 - start) + data[second_nl + 1 :])
    with pytest.raises(CorruptionError) as exc, store.open_reader(sid) as r:
        assert r.count == 3, f"acknowledged events dropped: {ids[r.count :]}"
    assert exc.value.offset <= start


# -- CLI input that escapes as a non-StoreError ----------------------------------------------


def test_cli_new_with_undecodable_name_is_bad_input(tmp_path: Path) -> None:
    """A name from argv holding non-UTF-8 bytes (surrogate-escaped by Python) passes the
    metadata check, then `dumps(...).encode()` raises UnicodeEncodeError inside
    create_session: a traceback with exit 1, and a `.new-<id>` directory left behind
    forever (nothing ever removes it)."""
    home = tmp_path / "home"
    result = CliRunner().invoke(main, ["--home", str(home), "session", "new", "--name", "\udcff"])
    assert result.exit_code == 2, result.exception
    sessions = home / "sessions"
    assert not sessions.exists() or os.listdir(sessions) == []


def test_cli_deeply_nested_record_is_bad_input(tmp_path: Path) -> None:
    """json.loads raises RecursionError (not ValueError) on deep nesting; the CLI catches
    only ValueError, so the user gets a traceback and exit 1 instead of one line and 2.
    (Nesting just under the limit is stored, and then `export` of the session fails with
    RecursionError: the store accepts records it cannot read back from a deeper stack.)"""
    home = tmp_path / "home"
    runner = CliRunner()
    sid = runner.invoke(main, ["--home", str(home), "session", "new"]).stdout.strip()
    record = '{"call_id":"c","name":"n","arguments":' + '{"a":' * 5000 + "{}" + "}" * 5001
    result = runner.invoke(
        main,
        [
            "--home",
            str(home),
            "session",
            "append",
            sid,
            "--kind",
            "tool_call",
            "--role",
            "assistant",
            "--record",
            record,
        ],
    )
    assert result.exit_code == 2, result.exception


# -- session.json from a newer format ----------------------------------------------------------


def _bump_format(store: Store, sid: str) -> None:
    meta = store.paths(sid).meta
    obj = json.loads(meta.read_bytes())
    obj["format"] = 2
    obj["compression"] = "zstd"  # a field a later format might add
    meta.write_text(json.dumps(obj))


def test_newer_format_session_gets_the_upgrade_message(store: Store) -> None:
    """_checked_paths reads session.json with the strict SessionInfo.from_obj, which
    rejects the unknown field before the version is looked at: the "upgrade infai"
    error is unreachable for any format that adds a field, and the user is told their
    input is bad (InvalidInput, CLI exit 2)."""
    sid = store.create_session().id
    _bump_format(store, sid)
    with pytest.raises(StoreError) as exc:
        store.open_reader(sid)
    assert not isinstance(exc.value, InvalidInput)
    assert "upgrade" in str(exc.value)


def test_one_unreadable_session_json_does_not_break_listing(store: Store) -> None:
    """list_sessions raises on the first session.json it cannot decode, so one session
    from a newer infai (or one damaged file) makes `session ls` and `fsck --all` fail
    for every session (exit 2, "bad input")."""
    good = store.create_session(name="good").id
    other = store.create_session(name="newer").id
    _bump_format(store, other)
    assert good in [i.id for i in store.list_sessions()]


# -- fsck next to a live writer ------------------------------------------------------------------


class _StopBeforeIndex(BaseException):
    """Stands for the moment another process's writer is between commit and index write."""


class _PauseAfterCommit(FileIO):
    def __init__(self) -> None:
        self.armed = False

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        if self.armed and os.readlink(f"/proc/self/fd/{fd}").endswith("index.jsonl"):
            self.armed = False
            raise _StopBeforeIndex
        return super().pwrite(fd, data, offset)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_fsck_next_to_a_live_writer_reports_no_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsck takes no lock, analyses, and then re-reads every chunk in full (only chunks
    in `truncate_chunks` are cut to the analysed size). A line another process commits
    in between is checked against an index entry its writer has not written yet: a
    healthy session is reported as damaged ("entry #n is missing or stale", "HEAD is
    ..., newest event is ...") and `infai session fsck --all` exits 1. Fix: check only
    the analysed committed prefix of every chunk (plan.chunk_size for the last one)."""
    import infai.store.file.fsck as fsck_module

    pause = _PauseAfterCommit()
    store = Store(tmp_path / "home", io=pause)
    sid = store.create_session().id
    w = store.open_writer(sid)
    w.append(msg("a"), "user")
    real_analyze = fsck_module.analyze  # type: ignore[attr-defined]

    def analyze_then_other_process_appends(paths):  # type: ignore[no-untyped-def]
        plan = real_analyze(paths)
        pause.armed = True
        with pytest.raises(_StopBeforeIndex):
            w.append(msg("b"), "user")  # committed (fdatasync done), index not yet written
        return plan

    monkeypatch.setattr(fsck_module, "analyze", analyze_then_other_process_appends)
    report = fsck(store.paths(sid))
    assert report.problems == []


# -- a failed fdatasync, then reopen in the same boot ------------------------------------------


class _FailOneSync(FileIO):
    def __init__(self) -> None:
        self.fail = False
        self.last_write: tuple[str, int, bytes] | None = None

    def write(self, fd: int, data: bytes) -> int:
        offset = os.fstat(fd).st_size  # chunks are O_APPEND
        n = super().write(fd, data)
        self.last_write = (os.readlink(f"/proc/self/fd/{fd}"), offset, data[:n])
        return n

    def fdatasync(self, fd: int) -> None:
        if self.fail:
            self.fail = False
            raise OSError(errno.EIO, "injected EIO")
        super().fdatasync(fd)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_failed_sync_is_not_built_on_after_reopen(tmp_path: Path) -> None:
    """After fdatasync fails with EIO, Linux keeps the written page in the cache but
    marks it clean; the next fdatasync reports success. The poisoned writer leaves the
    unacknowledged line in the file, so reopening (same boot) reads it from the page
    cache as committed, settle()'s fdatasync "succeeds", and the next acknowledged
    event is appended after it with it as parent. When the page is evicted or the
    machine reboots, those bytes are zeros on disk: the acknowledged event's parent is
    gone and its context raises CorruptionError.

    Modelled here: after the second writer is done, the region of the failed write is
    zeroed if it still holds that write's bytes (nothing synced over it). Today the
    outcome is worse than a CorruptionError: the zero run swallows the newline before
    the acknowledged event, which is then discarded as a "torn tail" (see the test
    above), so the context silently lacks it. Fix: on a failed write/sync, ftruncate
    the chunk back to the last acknowledged size before poisoning the writer."""
    fault = _FailOneSync()
    store = Store(tmp_path / "home", io=fault)
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        a = w.append(msg("a"), "user")
        fault.fail = True
        with pytest.raises(StoreIOError):
            w.append(msg("unacknowledged"), "user")
    assert fault.last_write is not None
    path, offset, data = fault.last_write

    with Store(tmp_path / "home").open_writer(sid) as w2:
        f = w2.append(msg("f"), "user")  # acknowledged

    with open(path, "r+b") as chunk:  # "reboot": the failed write never reached the disk
        chunk.seek(offset)
        if chunk.read(len(data)) == data:
            chunk.seek(offset)
            chunk.write(b"\0" * len(data))

    with Store(tmp_path / "home").open_reader(sid) as r:
        events = [e.id for e in r.context().events]
    assert events == [a.id, f.id]


# -- writer lock -------------------------------------------------------------------------------


def test_metadata_can_be_updated_while_the_writer_is_open(store: Store) -> None:
    """update_info takes the same flock the open writer holds (flock conflicts between
    two open file descriptions even in one process), and SessionWriter has no way to
    change metadata: a live agent cannot record its "last used model" without closing
    its writer; it gets WriterLocked after the timeout."""
    sid = store.create_session(model="m1").id
    with store.open_writer(sid) as w:
        w.append(msg("a"), "user")
        try:
            store.update_info(sid, model="m2")
        except WriterLocked:
            pytest.fail("update_info blocks on the session's own writer")
    assert store.info(sid).model == "m2"


def test_writer_waiting_on_a_removed_session_gets_a_store_error(store: Store) -> None:
    """A writer waiting for the lock while `session rm` holds it acquires the lock on
    the renamed (trashed) directory, then recovery's analyze() raises a bare
    FileNotFoundError: a traceback instead of SessionNotFound."""
    sid = store.create_session().id
    paths = store.paths(sid)
    held = WriterLock(paths.lock, 0)
    errors: list[BaseException] = []

    def open_writer() -> None:
        try:
            store.open_writer(sid, timeout=5).close()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=open_writer)
    t.start()
    threading.Event().wait(0.2)  # the thread is now polling the lock
    os.rename(paths.root, paths.root.parent / f".trash-{sid}")  # what remove_session does
    held.release()
    t.join()
    assert len(errors) == 1
    assert isinstance(errors[0], SessionNotFound), repr(errors[0])


# -- recovery is reported, as the format doc says ----------------------------------------------


def test_cli_reports_a_truncated_tail(tmp_path: Path) -> None:
    """docs/store-format.md, recovery step 1: the truncation "is reported, never silent".
    The notes land in Store.recovery_notes, which nothing in the CLI reads: `session
    append` after a crash truncates the torn tail without a word."""
    home = tmp_path / "home"
    store = Store(home)
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(msg("a"), "user")
    with open(store.paths(sid).chunk(0), "ab") as f:
        f.write(b'{"seq":1,"id":"torn')
    result = CliRunner().invoke(
        main,
        [
            "--home",
            str(home),
            "session",
            "append",
            sid,
            "--kind",
            "message",
            "--role",
            "user",
            "--content",
            "b",
        ],
    )
    assert result.exit_code == 0, result.exception
    assert "truncated" in result.stderr

"""The directory store's session files: session.json from a newer format, and the writer lock."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from infai.store import (
    FORMAT_VERSION,
    InvalidInput,
    MessageRecord,
    SessionNotFound,
    Store,
    StoreError,
    StoreOptions,
    WriterLocked,
)
from infai.store.file.lock import WriterLock


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home", StoreOptions(lock_timeout=0.2))


# -- session.json from a newer format ----------------------------------------------------------


def _bump_format(store: Store, sid: str) -> None:
    meta = store.paths(sid).meta
    obj = json.loads(meta.read_bytes())
    obj["format"] = FORMAT_VERSION + 1  # newer than this infai (2 is now known)
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

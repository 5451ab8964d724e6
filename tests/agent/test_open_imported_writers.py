"""An open imported session counts among the other writers of the directory it
works in, on both stores.

A restore warns and asks when another open session could be writing in its
directory. An imported session names no working directory: it works in the one
it is opened from. Its open mark records that directory (the directory store:
a second line of its writer's lock file; PostgreSQL: a second advisory lock on
the session and the directory's digest), so a restore there counts it, and one
elsewhere does not. Marks of an older infai (no directory) still read: as open,
never as open here. Real directories, real processes, a real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession, OnRestore, RestoreRefused, SessionCheckpoints, checkout
from infai.checkpoints.session import other_writers
from infai.llm import ScriptedModel
from infai.store import SessionStore, Store
from infai.tools import AllowAll, Toolbox


@pytest.fixture(params=["dir", "pg"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the store lives: a directory, or a fresh PostgreSQL database."""
    if request.param == "pg":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "home")


def opened(location: str, tmp_path: Path) -> SessionStore:
    """A store at ``location`` (each call a store of its own, as another process has)."""
    if location.startswith("postgresql"):
        from infai.store.pg import PgStore

        return PgStore(location, home=tmp_path / "pghome")
    return Store(location)


@pytest.fixture
def store(location: str, tmp_path: Path) -> Iterator[SessionStore]:
    with opened(location, tmp_path) as made:
        yield made


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = (tmp_path / "work").resolve()
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    return root


def _imported(store: SessionStore) -> str:
    """A session as an import leaves it: no working directory, the tool's recorded."""
    sid = store.create_session(name="imported").id
    store.update_info(sid, extra={"import": {"tool": "pi", "working_dir": "/somewhere/else"}})
    return sid


def _agent(store: SessionStore, sid: str, here: Path, files: bool = False) -> AgentSession:
    return AgentSession(
        store,
        sid,
        model=ScriptedModel(["ok", "ok"]),
        toolbox=Toolbox(),
        permissions=AllowAll(),
        files=SessionCheckpoints(store, here) if files else None,
        default_dir=here,
    )


def _two_turns(session: AgentSession, work: Path) -> str:
    """Two turns with the user's edit between; the first turn's end."""

    async def turn(text: str) -> None:
        async for _ in session.prompt(text):
            pass

    asyncio.run(turn("one"))
    first = session.view.head
    (work / "a.txt").write_text("two\n")
    asyncio.run(turn("two"))
    assert first is not None
    return first


def test_an_open_imported_session_here_makes_a_restore_ask(
    store: SessionStore, location: str, work: Path, tmp_path: Path
) -> None:
    elsewhere = (tmp_path / "elsewhere").resolve()
    elsewhere.mkdir()
    mine = _agent(store, store.create_session(working_dir=str(work)).id, work, files=True)
    near, far = _imported(store), _imported(store)
    other = opened(location, tmp_path)  # as another process would
    with mine:
        first = _two_turns(mine, work)
        there = _agent(other, far, elsewhere)  # open, but working in another directory
        here = _agent(other, near, work)
        try:
            assert other_writers(store, mine.session_id, str(work)) == [near]
            assert other_writers(store, mine.session_id, str(elsewhere)) == [far]
            with pytest.raises(RestoreRefused) as refused:
                asyncio.run(mine.checkout(first))
            assert refused.value.others == [near]
            assert (work / "a.txt").read_text() == "two\n"  # nothing changed
            forced = asyncio.run(mine.checkout(first, OnRestore(force=True)))
            assert any(near in n for n in forced.notices)
        finally:
            here.close()
            there.close()
            other.close()
        assert other_writers(store, mine.session_id, str(work)) == []  # closing released it
        assert other_writers(store, mine.session_id, str(elsewhere)) == []


def test_a_parked_imported_session_is_not_counted_until_it_writes_again(
    store: SessionStore, work: Path
) -> None:
    """Between turns a session releases its writer and mark (nothing writes files
    then); taking the slot again records its directory again."""
    sid = _imported(store)
    session = _agent(store, sid, work)
    with session:
        assert store.marked_open_in([sid], str(work)) == [sid]
        session.park()
        assert store.marked_open_in([sid], str(work)) == []
        session._unpark()
        assert store.marked_open_in([sid], str(work)) == [sid]
    assert store.marked_open_in([sid], str(work)) == []


CHILD = """
import sys, time
from pathlib import Path
from infai.agent import AgentSession
from infai.llm import ScriptedModel
from infai.tools import AllowAll, Toolbox
location, sid, here = sys.argv[1:4]
if location.startswith("postgresql"):
    from infai.store.pg import PgStore
    store = PgStore(location, home=sys.argv[4])
else:
    from infai.store import Store
    store = Store(location)
session = AgentSession(store, sid, model=ScriptedModel([]), toolbox=Toolbox(),
                       permissions=AllowAll(), default_dir=Path(here))
print("open", flush=True)
time.sleep(600)
"""


def test_another_process_working_here_counts_and_goes_with_it(
    store: SessionStore, location: str, work: Path, tmp_path: Path
) -> None:
    sid = _imported(store)
    mine = store.create_session(working_dir=str(work)).id
    args = [location, sid, str(work), str(tmp_path / "childhome")]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "open\n"
        assert other_writers(store, mine, str(work)) == [sid]
        assert other_writers(store, mine, str(work / "sub")) == []  # its directory only
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    deadline = time.monotonic() + 60  # PostgreSQL notices the dropped connection
    while other_writers(store, mine, str(work)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert other_writers(store, mine, str(work)) == []


def test_a_one_off_checkout_of_an_imported_session_counts_while_it_runs(
    store: SessionStore,
    location: str,
    work: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``session checkout`` of an imported session writes in the current directory:
    while it does, a restore there by another session counts it."""
    sid = _imported(store)
    with _agent(store, sid, work, files=True) as session:
        first = _two_turns(session, work)
    mine = store.create_session(working_dir=str(work)).id
    seen: list[list[str]] = []
    restore = SessionCheckpoints.restore

    def watched(self: SessionCheckpoints, *args: Any, **kwargs: Any) -> Any:
        with opened(location, tmp_path) as other:
            seen.append(other_writers(other, mine, str(work)))
        return restore(self, *args, **kwargs)

    monkeypatch.setattr(SessionCheckpoints, "restore", watched)
    monkeypatch.chdir(work)
    checkout(store, sid, first, OnRestore(force=True))
    assert seen == [[sid]] and (work / "a.txt").read_text() == "one\n"
    assert other_writers(store, mine, str(work)) == []


def test_an_older_mark_naming_no_directory_reads_as_open_not_as_open_here(
    store: SessionStore, work: Path
) -> None:
    """What an older infai holds: the directory store's lock file with the pid
    alone, PostgreSQL's session mark alone."""
    sid = _imported(store)
    if isinstance(store, Store):
        with store.open_writer(sid):  # a writer and no mark: the lock file an older infai left
            assert (store.paths(sid).lock).read_bytes() == f"{os.getpid()}\n".encode()
            assert store.marked_open([sid]) == [sid]
            assert store.marked_open_in([sid], str(work)) == []
    else:
        mark = store.open_mark(sid)
        try:
            assert store.marked_open([sid]) == [sid]
            assert store.marked_open_in([sid], str(work)) == []
        finally:
            mark.release()


def test_any_path_is_a_directory_to_mark(store: SessionStore, tmp_path: Path) -> None:
    """A path holding a newline, or bytes that are not UTF-8, is recorded and
    asked about as it is (and no other directory matches it)."""
    sid = _imported(store)
    odd = str(tmp_path) + "/a\nb \\ \udcff"
    with store.open_writer(sid):
        mark = store.open_mark(sid, odd)
        try:
            assert store.marked_open_in([sid], odd) == [sid]
            assert store.marked_open_in([sid], str(tmp_path) + "/a") == []
        finally:
            mark.release()
        assert store.marked_open_in([sid], odd) == []  # released, the writer still open
    assert store.marked_open_in([sid], odd) == []


def test_the_lock_file_records_the_directory_on_its_second_line(tmp_path: Path) -> None:
    """The directory store's format (docs/store-format.md): pid (padded to 32 bytes,
    which an older infai reads as the pid), then the directory as a JSON string; a
    held lock's message still names the pid alone."""
    from infai.store import WriterLocked

    store = Store(tmp_path / "home")
    sid = _imported(store)
    work = (tmp_path / "w\nx").resolve()
    work.mkdir()
    session = _agent(store, sid, work)
    with session:
        lock = store.paths(sid).lock
        content = lock.read_bytes()
        assert content == f"{os.getpid():<31}\n{json.dumps(str(work))}\n".encode()
        assert content[:32].decode().strip() == str(os.getpid())  # what an older infai reads
        with pytest.raises(WriterLocked, match=rf"\(pid {os.getpid()}\); gave up"):
            Store(tmp_path / "home").open_writer(sid, timeout=0)
    assert store.paths(sid).lock.read_bytes() == b""  # released: nothing held, nothing said


@pytest.mark.parametrize(
    "content",
    [b"123\n", b"123\n\n", b"123\n{not json\n", b"123\n7\n", b'123\n"/x', b"", b"\xff\xfe"],
)
def test_a_lock_file_line_that_does_not_parse_records_no_directory(content: bytes) -> None:
    from infai.store.file.lock import decode_dir

    assert decode_dir(content) is None
    assert decode_dir(b'123\n"/x"\n') == "/x"

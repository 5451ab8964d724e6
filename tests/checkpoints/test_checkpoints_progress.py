"""A snapshot's progress and durability at the agent layer: the progress callback,
the notices a long snapshot says through the session's hub, and the objects of a
recorded snapshot synced before its record is handed back (only then)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ckpt_support import later
from infai.agent import Harness, Saved, Streamed
from infai.agent.config import Config
from infai.checkpoints import SnapshotNotices, Snapshotter, progress_text
from infai.checkpoints import progress as progress_module
from infai.checkpoints import walk as walk_module
from infai.checkpoints.session import SessionCheckpoints
from infai.llm import Notice
from infai.store import Store
from infai.store.file.objects import FileObjects


def _tree(root: Path, files: int, size: int = 1000) -> None:
    for n in range(files):
        path = root / f"d{n % 3}" / f"f{n}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([n % 251]) * size)


def test_the_progress_callback_counts_files_and_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(walk_module, "PROGRESS_INTERVAL_S", 0.0)  # every file
    work = tmp_path / "w"
    _tree(work, 12)
    told: list[tuple[int, int]] = []
    objects = FileObjects(tmp_path / "home")
    snap = Snapshotter(objects, work, watch=False, clock=later)  # no file is racy
    result = snap.snapshot(progress=lambda files, hashed: told.append((files, hashed)))
    assert told and told == sorted(told)  # never backwards
    assert told[-1] == (12, 12 * 1000) == (result.files, result.hashed_bytes)
    told.clear()
    snap.snapshot(progress=lambda files, hashed: told.append((files, hashed)))
    assert told and told[-1] == (12, 0)  # all cache hits: seen, nothing read
    objects.close()


def test_notices_wait_a_second_then_come_at_most_once_a_second() -> None:
    now = [100.0]
    said: list[str] = []
    notices = SnapshotNotices("/w", said.append, clock=lambda: now[0])
    for step in range(40):  # 4 s of callbacks every 0.1 s
        now[0] = 100.0 + step * 0.1
        notices(step * 100, step * 2_000_000)
    assert 3 <= len(said) <= 4
    assert said[0] == progress_text("/w", 1000, 20_000_000)
    assert said[0] == "files: snapshot of /w: 1,000 files, 20 MB read…"


def test_a_quick_snapshot_says_nothing() -> None:
    said: list[str] = []
    notices = SnapshotNotices("/w", said.append, clock=lambda: 0.5)
    notices(10, 10)
    assert said == []


def test_snapshot_record_syncs_the_objects_only_when_it_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "w"
    _tree(work, 5)
    store = Store(tmp_path / "home")
    info = store.create_session(working_dir=str(work))
    files = SessionCheckpoints(store, work)
    order: list[str] = []
    objects = store.objects
    real_sync, real_batch = objects.sync, objects.batch

    def batch(*, durable: bool = True):  # type: ignore[no-untyped-def]
        order.append(f"batch durable={durable}")
        return real_batch(durable=durable)

    def sync() -> None:
        order.append("sync")
        real_sync()

    monkeypatch.setattr(objects, "batch", batch)
    monkeypatch.setattr(objects, "sync", sync)
    with store.open_writer(info.id) as writer:
        record = files.snapshot_record(writer, None, "turn start")
        assert record is not None
        assert order == ["batch durable=False", "sync"]
        writer.append(record, "system")
        order.clear()
        assert files.snapshot_record(writer, None, "after bash") is None  # unchanged
        assert order == []
        (work / "d0" / "f0.bin").write_bytes(b"changed")
        assert files.snapshot_record(writer, None, "after bash") is not None
        assert order == ["batch durable=False", "sync"]
    files.cp.close()


def test_a_long_first_snapshot_says_where_it_is_through_the_hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(walk_module, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(progress_module, "QUIET_S", 0.0)  # every snapshot is "long"
    monkeypatch.setattr(progress_module, "EVERY_S", 0.0)
    work = tmp_path / "w"
    _tree(work, 30)
    space = Harness(Store(tmp_path / "home"), work, config=Config(default_model="offline"))

    async def main() -> list[str]:
        session = space.open()
        events = session.hub.subscribe()
        async for _ in session.prompt("hello"):
            pass
        await asyncio.sleep(0)  # notices said from the snapshot's thread arrive via the loop
        said = []
        while events._pending:
            event = events._pending.popleft()
            if isinstance(event, Streamed) and isinstance(event.event, Notice):
                said.append(event.event.message)
        await session.aclose()
        return said

    try:
        said = asyncio.run(main())
    finally:
        asyncio.run(space.aclose())
    progress = [s for s in said if s.startswith(f"files: snapshot of {work}:")]
    assert progress, said
    assert progress[-1].endswith("30 files, 0 MB read…")


def test_a_long_first_snapshot_says_where_it_is_in_the_turns_own_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``prompt()`` yields carries the notices (``infai run`` prints only
    that), each once, before the prompt's first saved event."""
    monkeypatch.setattr(walk_module, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(progress_module, "QUIET_S", 0.0)
    monkeypatch.setattr(progress_module, "EVERY_S", 0.0)
    work = tmp_path / "w"
    _tree(work, 30)
    space = Harness(Store(tmp_path / "home"), work, config=Config(default_model="offline"))

    async def main() -> list[object]:
        session = space.open()
        seen: list[object] = [event async for event in session.prompt("hello")]
        await session.aclose()
        return seen

    try:
        seen = asyncio.run(main())
    finally:
        asyncio.run(space.aclose())
    texts = [
        e.event.message
        for e in seen
        if isinstance(e, Streamed)
        and isinstance(e.event, Notice)
        and e.event.message.startswith(f"files: snapshot of {work}:")
    ]
    assert texts and texts[-1].endswith("30 files, 0 MB read…")
    first_saved = next(i for i, e in enumerate(seen) if isinstance(e, Saved))
    last_notice = max(
        i for i, e in enumerate(seen) if isinstance(e, Streamed) and isinstance(e.event, Notice)
    )
    assert last_notice < first_saved  # said while the turn-start snapshot ran


def test_a_cancel_stops_a_long_first_snapshot_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails without the fix: the cancel waited for the whole walk (here ~30 s of
    slow reads), as Ctrl-C did on the first snapshot of a big tree. Afterwards
    nothing is recorded, and the next snapshot is a whole, correct one."""
    import time

    monkeypatch.setattr(walk_module, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(progress_module, "QUIET_S", 0.0)
    work = tmp_path / "w"
    _tree(work, 3000)
    real_read = walk_module._Walk._read

    def slow_read(self: Any, *args: Any) -> Any:
        time.sleep(0.01)  # a big tree on a slow disk
        return real_read(self, *args)

    monkeypatch.setattr(walk_module._Walk, "_read", slow_read)
    space = Harness(Store(tmp_path / "home"), work, config=Config(default_model="offline"))

    async def main() -> float:
        session = space.open()
        events = session.hub.subscribe()
        turn = await session.start("hello")
        async for event in events:  # the first progress notice: the walk is under way
            if isinstance(event, Streamed) and isinstance(event.event, Notice):
                break
        t0 = time.monotonic()
        await session.cancel(turn.id)
        took = time.monotonic() - t0
        monkeypatch.setattr(walk_module._Walk, "_read", real_read)
        kinds = [e.kind for e in session.view.path()]
        assert "snapshot" not in kinds, kinds
        async for _ in session.prompt("again"):
            pass
        snaps = [e for e in session.view.path() if e.kind == "snapshot"]
        assert len(snaps) == 1 and snaps[0].preview.startswith("files: 3000 ")
        await session.aclose()
        return took

    try:
        took = asyncio.run(main())
    finally:
        asyncio.run(space.aclose())
    assert took < 10.0, took  # about 0.01 s; the whole walk takes 30 s

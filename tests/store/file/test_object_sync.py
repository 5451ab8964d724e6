"""The directory store's objects and the disk: a batch commits with the write-ahead
log synced before it returns, unless opened with ``durable=False``; then
``sync()`` syncs it (once), and a killed process loses nothing committed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from infai.store.file.objects import FileObjects

SRC = Path(__file__).resolve().parents[3] / "src"


def _wal(home: Path) -> Path:
    return home / "objects" / "objects.sqlite-wal"


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The inodes ``os.fsync`` was called on, in order."""
    seen: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append(os.fstat(fd).st_ino)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def test_a_batch_syncs_the_log_before_it_returns(tmp_path: Path, synced: list[int]) -> None:
    objects = FileObjects(tmp_path)
    with objects.batch() as batch:
        batch.put(b"one")
    assert _wal(tmp_path).stat().st_ino in synced
    objects.close()


def test_a_batch_not_durable_is_synced_by_sync_once(tmp_path: Path, synced: list[int]) -> None:
    objects = FileObjects(tmp_path)
    with objects.batch(durable=False) as batch:
        name = batch.put(b"one")
    wal = _wal(tmp_path).stat().st_ino
    assert wal not in synced  # committed, readable, not waited for
    assert objects.get(name) == b"one"
    objects.sync()
    assert synced.count(wal) == 1
    objects.sync()  # nothing committed since: no second fsync
    assert synced.count(wal) == 1
    with objects.batch(durable=False) as batch:
        batch.put(b"two")
    objects.sync()
    assert synced.count(wal) == 2
    objects.close()


_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from infai.store.file.objects import FileObjects
objects = FileObjects(Path(sys.argv[1]))
with objects.batch(durable=False) as batch:
    print(batch.put(b"kept across a kill" * 300), flush=True)
print("committed", flush=True)
time.sleep(60)
"""


def test_a_commit_not_synced_survives_a_killed_process(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path), str(SRC)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    name = child.stdout.readline().strip()
    assert child.stdout.readline().strip() == "committed"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    objects = FileObjects(tmp_path)
    assert objects.get(name) == b"kept across a kill" * 300
    objects.close()

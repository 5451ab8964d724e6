"""``infai store gc`` gives the disk space of what it removes back: the objects
database shrinks (incremental vacuum, a VACUUM when it pays, the log truncated),
an older database is converted to incremental vacuum once, and a dry run says
about how much would come back. Sizes are the files' real sizes on disk."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from infai.shells.cli import main
from infai.store import SnapshotRecord, Store, collect_garbage
from objtrees import put_tree


def disk(home: Path) -> int:
    """The objects' bytes on disk, measured: the database, its log, the packs."""
    objects = home / "objects"
    names = [objects / "objects.sqlite", objects / "objects.sqlite-wal"]
    names += list((objects / "packs").glob("*.pack"))
    return sum(os.stat(p).st_size for p in names if p.exists())


def gc(home: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["--home", str(home), "store", "gc", "--json", *args])
    assert result.exit_code == 0, (result.output, result.stderr)
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def _age(home: Path) -> None:
    with sqlite3.connect(home / "objects" / "objects.sqlite") as conn:
        conn.execute("UPDATE puts SET at = at - 7200")


def _store_with_garbage(home: Path, count: int, size: int) -> None:
    """A snapshot reaching two files, and ``count`` objects of ``size`` bytes nothing
    reaches (each different), put in batches as snapshots put them."""
    with Store(home) as store:
        tree, _ = put_tree(store.objects, {"kept.txt": b"kept", "also.txt": b"also"})
        sid = store.create_session().id
        with store.open_writer(sid) as writer:
            writer.append(SnapshotRecord(tree=tree), "system")
        for start in range(0, count, 100):
            with store.objects.batch() as batch:
                for i in range(start, min(start + 100, count)):
                    batch.put(i.to_bytes(4, "big") * (size // 4))
    _age(home)


def test_gc_gives_the_bytes_it_frees_back_to_the_disk(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _store_with_garbage(home, 600, 3000)  # inline objects: 1.8 MB inside the database
    before = disk(home)
    dry = gc(home, "--dry-run")
    assert dry["removed"] == 600 and dry["freed"] == 600 * 3000
    with Store(home) as store:
        assert store.objects.stats()[0] == 603  # a dry run removes nothing
    before = disk(home)  # (the last connection's close moved the log into the database)
    report = gc(home)
    after = disk(home)
    assert report["freed"] == 600 * 3000
    assert before - after >= 0.95 * report["freed"]  # it is really gone from the disk
    assert after < 200_000
    assert abs(report["disk_before"] - before) < 65536 and report["disk_after"] == after
    assert report["reclaimed"] == report["disk_before"] - after
    assert 0.9 * dry["freed"] <= dry["reclaimed"] <= dry["disk_before"]  # the estimate
    with Store(home) as store:  # still a sound database, the reached objects intact
        assert store.objects.stats()[0] == 3
        assert store.fsck(store.list_sessions()[0].id).ok


def test_small_objects_sharing_pages_come_back_too(tmp_path: Path) -> None:
    """Every other one of many small objects goes: no page is left empty, each is
    left half full, which only rewriting the database gives back."""
    home = tmp_path / "home"
    datas = [i.to_bytes(4, "big") * 75 for i in range(4000)]  # 300 bytes, 13 to a page
    with Store(home) as store:
        with store.objects.batch() as batch:
            for data in datas:
                batch.put(data)
        tree, _ = put_tree(store.objects, {f"f{i}": datas[i] for i in range(0, 4000, 2)})
        sid = store.create_session().id
        with store.open_writer(sid) as writer:
            writer.append(SnapshotRecord(tree=tree), "system")
    _age(home)
    before = disk(home)
    report = gc(home)
    assert report["removed"] == 2000
    assert before - disk(home) >= 0.95 * report["freed"]
    assert "VACUUM" in report["space_note"]


def test_an_older_database_is_converted_once_and_shrinks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _store_with_garbage(home, 300, 3000)
    path = home / "objects" / "objects.sqlite"
    with sqlite3.connect(path, isolation_level=None) as conn:  # as an older infai made it
        conn.execute("PRAGMA auto_vacuum = NONE")
        conn.execute("VACUUM")
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    before = disk(home)
    report = gc(home)
    assert before - disk(home) >= 0.95 * report["freed"]
    assert "converted" in report["space_note"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental now
    again = gc(home)  # nothing left to remove: no second conversion
    assert again["removed"] == 0 and "converted" not in again["space_note"]


def test_gc_says_what_came_back(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _store_with_garbage(home, 100, 3000)
    runner = CliRunner()
    dry = runner.invoke(main, ["--home", str(home), "store", "gc", "--dry-run"])
    assert dry.exit_code == 0 and "of disk would come back" in dry.stdout
    real = runner.invoke(main, ["--home", str(home), "store", "gc"])
    assert real.exit_code == 0 and "given back" in real.stdout
    assert "objects database:" in real.stdout


def test_the_log_of_a_long_lived_process_is_cut_too(tmp_path: Path) -> None:
    """A server keeps its connection open, so SQLite never removes its log: the
    log keeps the size of the largest transaction until gc truncates it."""
    home = tmp_path / "home"
    with Store(home) as store:
        with store.objects.batch() as batch:
            for i in range(400):
                batch.put(i.to_bytes(4, "big") * 750)
        wal = home / "objects" / "objects.sqlite-wal"
        assert os.stat(wal).st_size > 1_000_000  # the batch went through the log
        report = collect_garbage(store, grace=0)
        assert report.removed == 400 and os.stat(wal).st_size == 0
        assert report.disk_after == disk(home) and report.disk_after < 100_000

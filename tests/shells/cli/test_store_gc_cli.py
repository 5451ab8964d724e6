"""``infai store gc``: reports what it removes, removes nothing on a dry run,
and refuses (exit 1, nothing removed) when a snapshot tree cannot be read."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from click.testing import CliRunner, Result

from infai.shells.cli import main
from infai.store import SnapshotRecord, Store
from infai.store.codec import digest_of
from objtrees import put_tree


def run(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == code, result.output
    return result


def _aged(home: Path) -> None:
    conn = sqlite3.connect(home / "objects" / "objects.sqlite")
    conn.execute("UPDATE puts SET at = at - 7200")
    conn.commit()
    conn.close()


def test_gc_dry_run_then_gc_with_json(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Store(home) as store:
        tree, reached = put_tree(store.objects, {"a.txt": b"kept"})
        stray = store.objects.put(b"x" * 2048)
        sid = store.create_session().id
        with store.open_writer(sid) as writer:
            writer.append(SnapshotRecord(tree=tree), "system")
    _aged(home)
    dry = run(home, "store", "gc", "--dry-run")
    assert "would remove 1 of 3 objects, 2.0 KiB" in dry.output
    report = json.loads(run(home, "store", "gc", "--json").output)
    assert report["removed"] == 1 and report["freed"] == 2048 and not report["dry_run"]
    assert report["reachable"] == len(reached) == 2
    with Store(home) as store:
        assert not store.objects.has(stray) and store.objects.missing(reached) == set()


def test_gc_keeps_recent_objects_by_default_and_refuses_on_a_lost_tree(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Store(home) as store:
        fresh = store.objects.put(b"a snapshot in progress")
    assert "removed 0 of 1 objects" in run(home, "store", "gc").output  # 60 minutes' grace
    with Store(home) as store:
        assert store.objects.has(fresh)
        sid = store.create_session().id
        with store.open_writer(sid) as writer:
            writer.append(SnapshotRecord(tree=digest_of(b"lost")), "system")
    out = run(home, "store", "gc", "--grace", "0", code=1)
    assert "removes nothing" in out.output and sid in out.output
    with Store(home) as store:
        assert store.objects.has(fresh)


def test_store_copy_carries_the_objects_snapshots_reach(tmp_path: Path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    with Store(source) as store:
        tree, reached = put_tree(store.objects, {"src/m.py": b"print(2)", "README": b"hi"})
        sid = store.create_session().id
        with store.open_writer(sid) as writer:
            writer.append(SnapshotRecord(tree=tree), "system")
    out = run(tmp_path, "store", "copy", "--from", str(source), "--to", str(target))
    assert "copied 1 events, verified" in out.output
    with Store(target) as store:
        assert store.objects.missing(reached) == set() and store.fsck(sid).ok


def test_gc_says_when_an_open_session_keeps_the_default_grace(tmp_path: Path) -> None:
    """A short --grace while a session is open would let gc remove a snapshot's
    cache hits before its event lands: the default grace is kept, and said."""
    home = tmp_path / "home"
    with Store(home) as store:
        fresh = store.objects.put(b"a snapshot in progress")
        sid = store.create_session().id
        with store.open_writer(sid):  # another terminal's session, open
            out = run(home, "store", "gc", "--grace", "0")
            assert "grace kept at 60 minutes, not 0: a session is open" in out.output
            assert store.objects.has(fresh)
    out = run(home, "store", "gc", "--grace", "0")
    assert "grace kept" not in out.output and "removed 1 of 1 objects" in out.output

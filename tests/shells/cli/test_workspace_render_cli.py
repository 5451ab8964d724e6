"""Snapshot and restore events show in `session log`, `tree` and `show` as their
preview line and record (no renderer special-cases them into a crash)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from infai.shells.cli import main
from infai.store import MessageRecord, RestoreRecord, SnapshotRecord, Store
from infai.store.codec import digest_of


def test_log_tree_and_show_render_workspace_events(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = digest_of(b"tree")
    with Store(home) as store:
        sid = store.create_session().id
        with store.open_writer(sid) as writer:
            first = writer.append(MessageRecord(content="hi"), "user")
            snap = writer.append(
                SnapshotRecord(tree=tree, files=3, changed=1, reason="after bash"), "system"
            )
            writer.append(RestoreRecord(tree=tree, source=first.id, touched=["a"]), "system")

    def run(*args: str) -> str:
        result = CliRunner().invoke(main, ["--home", str(home), *args])
        assert result.exit_code == 0, result.output
        return result.output

    log = run("session", "log", sid)
    assert "snapshot/system" in log and "files: 3 (1 changed) after bash" in log
    assert "restore/system" in log and f"files restored from {first.id}: 1 touched" in log
    assert "snapshot/system" in run("session", "tree", sid)
    shown = run("session", "show", sid, snap.id)
    assert '"tree": "' + tree + '"' in shown and '"reason": "after bash"' in shown

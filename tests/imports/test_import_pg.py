"""An import into PostgreSQL: the same session, ids and idempotence as in a directory.

The importers write through the store's contract only, so a database gets the
very same events; this checks one real transcript with its subagents there.
"""

from __future__ import annotations

from pathlib import Path

from import_corpus import corpus
from infai.imports import commit, importer_for
from infai.store import PgStore, Store


def test_a_transcript_imports_into_postgresql_as_into_a_directory(
    pg_url: str, tmp_path: Path
) -> None:
    tool = importer_for("claude-code")
    path = corpus() / "claude-code" / "spotter" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
    foreign = tool.load(path)[0]
    files = Store(tmp_path)
    commit(files, foreign)
    with PgStore(pg_url) as db:
        outcome = commit(db, foreign)
        assert [o.status for o in outcome.walk()] == ["created"] * 3
        for session in foreign.walk():
            with (
                db.open_reader(session.session_id) as a,
                files.open_reader(session.session_id) as b,
            ):
                assert [(e.id, e.parent_id, e.kind) for e in a.entries()] == [
                    (e.id, e.parent_id, e.kind) for e in b.entries()
                ]
                assert a.head == b.head
            assert db.info(session.session_id) == files.info(session.session_id)
        again = commit(db, tool.load(path)[0])
        assert [o.status for o in again.walk()] == ["unchanged"] * 3

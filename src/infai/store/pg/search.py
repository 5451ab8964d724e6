"""PostgreSQL's search index: ``tsvector`` columns with GIN indexes, over every event.

Model, in prose (the tables are migration 2 in :mod:`.schema`): ``infai_search``
holds one ``tsvector`` per event whose record is inline, ``infai_search_blobs``
one per blob digest (a record in a blob is indexed once, however many events
name it), and ``infai_search_state`` per session how many events are indexed
and a bitmap of the sequence numbers on HEAD's path. All three are derived from
the events and go with them (foreign keys, ``ON DELETE CASCADE``).

The text is what :func:`infai.store.search.searchable_text` says, folded into
plain words by :func:`~infai.store.search.index_text` before PostgreSQL's
``simple`` configuration (no stemming, no stop words) sees it, so both
backends match the same words; ranking is ``ts_rank`` here and bm25 in the file
store, so the order of equally good hits may differ. The first
:data:`MAX_INDEXED_CHARS` characters of an event's text are indexed (a
``tsvector`` is limited to 1 MB).

Indexing is a catch-up that runs before each search: sessions whose event count
is ahead of their indexed count get their new events indexed, in batches, one
transaction per batch holding the session's state row, so two processes
catching up at once do not index twice. A database migrated from schema 1 is
indexed by its first search (or ``infai search --rebuild``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import CorruptionError
from ..search import (
    Progress,
    Query,
    SearchHit,
    SearchResults,
    advance_path,
    dir_matches,
    index_text,
    make_snippet,
    on_path,
    searchable_text,
)
from .db import Database

#: events read and indexed per transaction while catching up
BATCH = 1000
#: characters of one event's text that are indexed
MAX_INDEXED_CHARS = 400_000


def _text(kind: str, raw: str | bytes, where: str) -> str:
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise CorruptionError(where, 0, f"undecodable record: {exc}") from None
    return searchable_text(kind, obj if isinstance(obj, dict) else {})


def _vector_text(text: str) -> str:
    return index_text(text[:MAX_INDEXED_CHARS])


def catch_up(db: Database, progress: Progress | None = None) -> None:
    """Index every event appended since the last catch-up, in every session."""
    with db.conn() as conn:
        todo = conn.execute(
            "SELECT s.id FROM infai_sessions s LEFT JOIN infai_search_state st"
            " ON st.session_id = s.id WHERE s.count > coalesce(st.indexed, 0) ORDER BY s.id"
        ).fetchall()
    for done, (sid,) in enumerate(todo):
        while _batch(db, str(sid)):
            pass
        if progress is not None:
            progress(done + 1, len(todo))


def _batch(db: Database, sid: str) -> bool:
    """Index the session's next batch; False when it is up to date (or gone)."""
    with db.conn() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO infai_search_state (session_id, indexed) SELECT id, 0 FROM"
            " infai_sessions WHERE id = %s ON CONFLICT DO NOTHING",
            (sid,),
        )
        state = conn.execute(
            "SELECT indexed, head_path FROM infai_search_state WHERE session_id = %s FOR UPDATE",
            (sid,),
        ).fetchone()
        if state is None:
            return False
        indexed, path = state[0], state[1]
        rows = conn.execute(
            "SELECT seq, parent_seq, kind, record, digest FROM infai_events"
            " WHERE session_id = %s AND seq >= %s ORDER BY seq LIMIT %s",
            (sid, indexed, BATCH),
        ).fetchall()
        if not rows:
            return False
        where = f"database session {sid}"
        inline = [
            (sid, seq, _vector_text(_text(kind, record, f"{where} event #{seq}")))
            for seq, _p, kind, record, digest in rows
            if digest is None
        ]
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO infai_search (session_id, seq, tsv) VALUES"
                " (%s, %s, to_tsvector('simple', %s)) ON CONFLICT DO NOTHING",
                inline,
            )
        _index_blobs(conn, {(r[4], r[2]) for r in rows if r[4] is not None})

        def parents() -> dict[int, int]:
            found = conn.execute(
                "SELECT seq, parent_seq FROM infai_events WHERE session_id = %s AND seq <= %s",
                (sid, rows[-1][0]),
            ).fetchall()
            return dict(found)

        bits = advance_path(path, {r[0]: r[1] for r in rows}, parents)
        conn.execute(
            "UPDATE infai_search_state SET indexed = %s, head_path = %s WHERE session_id = %s",
            (rows[-1][0] + 1, bytes(bits), sid),
        )
    return True


def _index_blobs(conn: Any, digests: set[tuple[str, str]]) -> None:
    """Index each blob not indexed yet (``(digest, kind)`` pairs)."""
    if not digests:
        return
    have = {
        r[0]
        for r in conn.execute(
            "SELECT digest FROM infai_search_blobs WHERE digest = ANY(%s)",
            ([d for d, _ in digests],),
        ).fetchall()
    }
    for digest, kind in sorted(digests):
        if digest in have:
            continue
        row = conn.execute("SELECT data FROM infai_blobs WHERE digest = %s", (digest,)).fetchone()
        if row is None:
            continue  # missing: fsck reports it; the event cannot be shown either
        text = _text(kind, bytes(row[0]), f"database blob {digest}")
        conn.execute(
            "INSERT INTO infai_search_blobs (digest, tsv) VALUES"
            " (%s, to_tsvector('simple', %s)) ON CONFLICT DO NOTHING",
            (digest, _vector_text(text)),
        )
        have.add(digest)


def rebuild(db: Database, progress: Progress | None) -> None:
    """Drop every derived row and index all events again."""
    with db.conn() as conn, conn.transaction():
        conn.execute("DELETE FROM infai_search_state")
        conn.execute("DELETE FROM infai_search")
        conn.execute("DELETE FROM infai_search_blobs")
    catch_up(db, progress)


def search(
    db: Database,
    query: Query,
    *,
    session: str | None,
    working_dir: str | None,
    kind: str | None,
    limit: int,
) -> SearchResults:
    """Catch up, then the best ``limit`` hits (see :mod:`infai.store.search`); every
    match is ranked (no window)."""
    catch_up(db)
    cond, args = _filters(db, session, working_dir, kind)
    if cond is None:
        return SearchResults()
    sql = (
        "WITH q AS (SELECT to_tsquery('simple', %s) AS q), m AS ("
        " SELECT s.session_id, s.seq, ts_rank(s.tsv, q.q) AS score"
        " FROM infai_search s, q WHERE s.tsv @@ q.q"
        " UNION ALL SELECT e.session_id, e.seq, ts_rank(b.tsv, q.q)"
        " FROM infai_search_blobs b JOIN infai_events e ON e.digest = b.digest, q"
        " WHERE b.tsv @@ q.q)"
        " SELECT m.session_id, m.seq, e.id, e.kind, e.role, e.ts, m.score, e.record, e.digest,"
        " st.head_path, ss.info->>'name', ss.info->>'working_dir'"
        " FROM m JOIN infai_events e ON e.session_id = m.session_id AND e.seq = m.seq"
        " JOIN infai_sessions ss ON ss.id = m.session_id"
        " LEFT JOIN infai_search_state st ON st.session_id = m.session_id"
        f" WHERE true{cond} ORDER BY m.score DESC, e.ts DESC LIMIT %s"
    )
    with db.conn() as conn:
        found = conn.execute(sql, (query.to_tsquery(), *args, limit)).fetchall()
        blobs = _blob_data(conn, {r[8] for r in found if r[8] is not None})
    return SearchResults(_hit(row, blobs, query) for row in found)


def _filters(
    db: Database, session: str | None, working_dir: str | None, kind: str | None
) -> tuple[str | None, list[Any]]:
    cond, args = "", list[Any]()
    if session is not None:
        cond += " AND m.session_id = %s"
        args.append(session)
    if kind is not None:
        cond += " AND e.kind = %s"
        args.append(kind)
    if working_dir is not None:
        with db.conn() as conn:
            rows = conn.execute(
                "SELECT id, info->>'working_dir' FROM infai_sessions"
                " WHERE info->>'working_dir' IS NOT NULL"
            ).fetchall()
        wanted = [sid for sid, wd in rows if dir_matches(wd, working_dir)]
        if not wanted:
            return None, []
        cond += " AND m.session_id = ANY(%s)"
        args.append(wanted)
    return cond, args


def _blob_data(conn: Any, digests: set[str]) -> dict[str, bytes]:
    if not digests:
        return {}
    rows = conn.execute(
        "SELECT digest, data FROM infai_blobs WHERE digest = ANY(%s)", (list(digests),)
    ).fetchall()
    return {d: bytes(data) for d, data in rows}


def _hit(row: Sequence[Any], blobs: dict[str, bytes], query: Query) -> SearchHit:
    sid, seq, event_id, kind, role, ts, score, record, digest, path, name, wd = row
    raw = record if digest is None else blobs.get(digest, b"{}")
    text = _text(kind, raw, f"database session {sid} event #{seq}")
    snippet, marks = make_snippet(text, query)
    return SearchHit(
        session_id=str(sid),
        event_id=str(event_id),
        seq=seq,
        kind=kind,
        role=role,
        timestamp=ts,
        snippet=snippet,
        marks=marks,
        on_head_path=on_path(path, seq),
        score=float(score),
        session_name=name,
        working_dir=wd,
    )

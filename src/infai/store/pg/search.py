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

An event whose record does not verify (text that is not a JSON object; a blob
that no longer hashes to its digest) is not indexed from it: its row (or its
blob's) gets the one lexeme :data:`DAMAGED`, which holds a space, so no query's
word can match it, and the catch-up moves on. Every search and rebuild then
names the sessions of its scope holding such rows
(:class:`~infai.store.search.DamagedSession`): one damaged event never fails a
search, nor hides that hits may be missing. No table is added: the marker lives
in the derived rows and goes with them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..codec import digest_of
from ..errors import CorruptionError
from ..search import (
    DamagedSession,
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
#: the lexeme of a row whose record does not verify (a space inside: no query has it)
DAMAGED = "infai damaged"
#: :data:`DAMAGED` as a ``tsvector`` and as a ``tsquery`` (quoted: one lexeme)
_DAMAGED_TSV = f"$$'{DAMAGED}'$$::tsvector"
_DAMAGED_TSQ = f"$$'{DAMAGED}'$$::tsquery"


def _text(kind: str, raw: str | bytes, where: str) -> str:
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise CorruptionError(where, 0, f"undecodable record: {exc}") from None
    if not isinstance(obj, dict):
        raise CorruptionError(where, 0, "the record is not a JSON object")
    return searchable_text(kind, obj)


def _verified_text(kind: str, raw: str | bytes, where: str) -> str | None:
    """The record's words, or None when it does not verify (indexed as :data:`DAMAGED`)."""
    try:
        return _vector_text(_text(kind, raw, where))
    except CorruptionError:
        return None


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
            (sid, seq, _verified_text(kind, record, f"{where} event #{seq}"))
            for seq, _p, kind, record, digest in rows
            if digest is None
        ]
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO infai_search (session_id, seq, tsv) VALUES (%s, %s,"
                f" coalesce(to_tsvector('simple', %s), {_DAMAGED_TSV})) ON CONFLICT DO NOTHING",
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
        data = bytes(row[0])
        text = None
        if digest_of(data) == digest:
            text = _verified_text(kind, data, f"database blob {digest}")
        conn.execute(
            "INSERT INTO infai_search_blobs (digest, tsv) VALUES"
            f" (%s, coalesce(to_tsvector('simple', %s), {_DAMAGED_TSV})) ON CONFLICT DO NOTHING",
            (digest, text),
        )
        have.add(digest)


def rebuild(db: Database, progress: Progress | None) -> list[DamagedSession]:
    """Drop every derived row and index all events again; the sessions left damaged."""
    with db.conn() as conn, conn.transaction():
        conn.execute("DELETE FROM infai_search_state")
        conn.execute("DELETE FROM infai_search")
        conn.execute("DELETE FROM infai_search_blobs")
    catch_up(db, progress)
    return damaged(db, None)


def damaged(db: Database, sessions: list[str] | None) -> list[DamagedSession]:
    """The sessions (of ``sessions``; None: all) holding events indexed as
    :data:`DAMAGED`, by session id (found through the GIN indexes: cheap)."""
    scope = "" if sessions is None else " AND e.session_id::text = ANY(%s)"
    with db.conn() as conn:
        rows = conn.execute(
            "SELECT e.session_id, e.seq, e.digest FROM infai_search s JOIN infai_events e"
            f" ON e.session_id = s.session_id AND e.seq = s.seq WHERE s.tsv @@ {_DAMAGED_TSQ}"
            f"{scope} UNION ALL SELECT e.session_id, e.seq, e.digest FROM infai_search_blobs b"
            f" JOIN infai_events e ON e.digest = b.digest WHERE b.tsv @@ {_DAMAGED_TSQ}{scope}"
            " ORDER BY 1, 2",
            [] if sessions is None else [sessions, sessions],
        ).fetchall()
    found: dict[str, DamagedSession] = {}
    for sid, seq, digest in rows:
        key = str(sid)
        if key in found:
            found[key].events = (found[key].events or 0) + 1
            continue
        what = "record does not decode" if digest is None else f"blob {digest} does not verify"
        found[key] = DamagedSession(key, 1, f"database session {key} event #{seq}: its {what}")
    return list(found.values())


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
    cond, args, scope = _filters(db, session, working_dir, kind)
    hurt = damaged(db, scope)
    if cond is None:
        return SearchResults(damaged=hurt)
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
    return SearchResults((_hit(row, blobs, query) for row in found), damaged=hurt)


def _filters(
    db: Database, session: str | None, working_dir: str | None, kind: str | None
) -> tuple[str | None, list[Any], list[str] | None]:
    """The hits' SQL condition and its arguments (None: nothing can match), and the
    sessions in scope (None: all)."""
    cond, args, scope = "", list[Any](), None
    if session is not None:
        cond += " AND m.session_id = %s"
        args.append(session)
        scope = [session]
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
        named = [str(sid) for sid in wanted]
        scope = named if scope is None else [s for s in scope if s in named]
        if not wanted:
            return None, [], scope
        cond += " AND m.session_id = ANY(%s)"
        args.append(wanted)
    return cond, args, scope


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

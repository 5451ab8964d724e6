"""Which documents of the search index a query returns, at a cost bounded by a window.

Model, in prose: ranking is FTS5's bm25, over a bounded number of matches.
FTS5 scores every document a ranked query matches before it keeps the best
few, about 4 µs each, and bm25 also walks each word's whole document list for
its IDF; a word found in a fifth of a million events would cost most of a
second. Documents are numbered in the order they were indexed (a rebuild
indexes the least recently active sessions first), so the most recently
indexed matches (nearly always the newest: appends are indexed as they come;
an import of old sessions is the exception) are the highest numbers, which
FTS5 walks backwards without scoring (blob documents, numbered negatively: the
lowest).

So every query first walks its matches newest first, at most
:data:`RANK_WINDOW` + 1 of them, in one pass over event and blob documents (a
second for the blobs' newest when that pass finds more; two, one each, when a
session filter narrows the numbers to that session's range). The walk gives
the candidates themselves, not only a count:

* at most :data:`RANK_WINDOW` matches: every match is known, and they are
  ranked by bm25 in one query over their span of document numbers. Words a
  query excludes (``-word``) are left out of that ranking query (they matched
  no candidate, so they add nothing to a score; bm25 would walk their whole
  document lists for an IDF that is never used) and the candidates keep it
  exact;
* more: the query's newest :data:`RANK_WINDOW` matches are its hits, newest
  first and unscored, and the answer says so (:attr:`SearchResults.window`).
  That is also what a person searching for a very common word most likely
  wants; more words, or a filter, reach older ones.

Filters (kind, session, directory) apply when the candidates are joined with
their events: when they leave fewer than ``limit`` hits, the window grows
eightfold until they are found or every match was looked at. A session filter
first narrows the walks to that session's range of document numbers, so it
looks at that session's matches, not the store's. What matches is never
changed by the window, only which matches are looked at and in what order.

A prefix query (``pars*``) costs more: FTS5 merges the document lists of every
word the prefix matches before it returns its first row (about 70 ms for a
four-letter prefix at 1M events), once per walk or ranking; windowed like the
others, it takes two walks, where ranking all of its matches took ten times as
long.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..search import Query

#: a query matching more documents than this gives its newest ones, unranked
RANK_WINDOW = 1024
#: no document number reaches this (events count up from 1, blobs down from -1)
_FAR = 1 << 62
#: the columns of a found row (``Row``): what a hit is made of
_COLS = "s.id, e.seq, e.id, e.kind, e.role, e.ts, m.doc, s.head_path"

#: ``(session id, seq, event id bytes, kind, role, ts, rank, doc, head path)``
Row = tuple[Any, ...]


def best(
    conn: sqlite3.Connection,
    query: Query,
    cond: str,
    args: list[str],
    limit: int,
    sids: list[int] | None,
) -> tuple[list[Row], int | None]:
    """The best ``limit`` events matching ``query`` and ``cond`` (an SQL condition on
    ``e`` (events) and ``s`` (sessions) with its ``args``), in the sessions ``sids``
    (None: all), best first; and the window that was cut (None: every match was
    looked at). See the module docstring."""
    match = query.to_fts5()
    ranges = _ranges(conn, sids)
    window = RANK_WINDOW
    wanted = limit * 2 if not cond else limit * 8
    recent = False
    while True:
        pos, neg, cut = _walk(conn, match, ranges, window, whole=sids is None)
        if not cut and not recent:
            spans = [pos + neg] if sids is None else [pos, neg]
            return _rank(conn, query, spans, cond, args, limit), None
        recent = True  # once cut, newest first: a grown window keeps the order
        found = _join(conn, dict.fromkeys(pos[:wanted] + neg[:wanted], 0.0), cond, args, limit)
        if len(found) < limit and (len(pos) > wanted or len(neg) > wanted):
            found = _join(conn, dict.fromkeys(pos + neg, 0.0), cond, args, limit)
        if len(found) >= limit or not cut:
            return found, window if cut else None
        window *= 8


def _walk(
    conn: sqlite3.Connection,
    match: str,
    ranges: tuple[int, int, int, int],
    window: int,
    *,
    whole: bool,
) -> tuple[list[int], list[int], bool]:
    """The newest ``window`` matching event documents and blob documents, and whether
    there were more. ``whole``: the ranges are the whole index, so one backwards
    pass over both kinds answers when the matches are few."""
    pos_lo, pos_hi, neg_lo, neg_hi = ranges
    if whole:
        docs = _newest(conn, match, neg_lo, pos_hi, window + 1, desc=True)
        pos = [d for d in docs if d > 0]
        if len(docs) <= window:
            return pos, [d for d in docs if d < 0], False
        # The pass took every event document before any blob's (the highest numbers
        # first): only the blobs' newest, the lowest numbers, need a walk of their own.
    else:
        pos = _newest(conn, match, pos_lo, pos_hi, window + 1, desc=True)
    neg = _newest(conn, match, neg_lo, neg_hi, window + 1, desc=False)
    cut = len(pos) > window or len(neg) > window
    return pos[:window], neg[:window], cut


def _newest(
    conn: sqlite3.Connection, match: str, lo: int, hi: int, count: int, *, desc: bool
) -> list[int]:
    """Up to ``count`` matching document numbers in ``[lo, hi]``, highest first
    (``desc``) or lowest first, without scoring."""
    if lo > hi:
        return []
    rows = conn.execute(
        "SELECT rowid FROM fts WHERE fts MATCH ? AND rowid BETWEEN ? AND ?"
        f" ORDER BY rowid {'DESC' if desc else 'ASC'} LIMIT ?",
        (match, lo, hi, count),
    )
    return [r[0] for r in rows]


def _rank(
    conn: sqlite3.Connection,
    query: Query,
    spans: list[list[int]],
    cond: str,
    args: list[str],
    limit: int,
) -> list[Row]:
    """Rank the documents in ``spans`` (every match of ``query``, in groups ranked by
    one query each over their range of numbers: one group unless a session filter
    narrowed them, when the numbers between its events' and its blobs' documents
    belong to other sessions) by bm25, and join the best."""
    scores: dict[int, float] = {}
    for docs in spans:
        if not docs:
            continue
        wanted = set(docs)
        ranked = conn.execute(
            "SELECT rowid, rank FROM fts WHERE fts MATCH ? AND rowid BETWEEN ? AND ?",
            (_positive(query), min(docs), max(docs)),
        )
        scores.update((doc, rank) for doc, rank in ranked if doc in wanted)
    return _join(conn, scores, cond, args, limit)


def _positive(query: Query) -> str:
    """``query`` in FTS5 syntax without its excluded terms (the ranking query)."""
    if not any(t.negated for alt in query.alternatives for t in alt):
        return query.to_fts5()
    kept = [[t for t in alt if not t.negated] for alt in query.alternatives]
    return Query(query.text, kept).to_fts5()


def _join(
    conn: sqlite3.Connection, scores: dict[int, float], cond: str, args: list[str], limit: int
) -> list[Row]:
    """The events of the documents in ``scores`` (doc -> rank, lower is better)
    that pass ``cond``: the best ``limit``, by rank and then newest first."""
    if not scores:
        return []
    docs = json.dumps(list(scores))
    sql = (
        "WITH m(doc) AS (SELECT value FROM json_each(?))"
        f" SELECT {_COLS} FROM m JOIN events e ON e.doc = m.doc"
        f" JOIN sessions s ON s.sid = e.sid WHERE m.doc > 0{cond}"
        f" UNION ALL SELECT {_COLS} FROM m JOIN events e ON e.blob = -m.doc"
        f" JOIN sessions s ON s.sid = e.sid WHERE m.doc < 0{cond}"
    )
    rows = conn.execute(sql, (docs, *args, *args)).fetchall()
    rows.sort(key=lambda r: r[5], reverse=True)  # newest first among equals (stable)
    rows.sort(key=lambda r: scores[r[6]])
    return [(*r[:6], scores[r[6]], r[6], r[7]) for r in rows[:limit]]


def _ranges(conn: sqlite3.Connection, sids: list[int] | None) -> tuple[int, int, int, int]:
    """Document numbers that can hold a hit: ``(lo, hi)`` of events' documents and
    of blobs' (negative), narrowed to the sessions ``sids`` when given."""
    if sids is None:
        return 1, _FAR, -_FAR, -1
    if not sids:
        return 1, 0, 0, -1
    marks = ", ".join("?" * len(sids))
    lo, hi = conn.execute(
        f"SELECT min(doc), max(doc) FROM events WHERE sid IN ({marks})", sids
    ).fetchone()
    blo, bhi = conn.execute(
        f"SELECT min(blob), max(blob) FROM events WHERE sid IN ({marks}) AND blob IS NOT NULL",
        sids,
    ).fetchone()
    pos = (lo, hi) if lo is not None else (1, 0)
    neg = (-bhi, -blo) if blo is not None else (0, -1)
    return (*pos, *neg)

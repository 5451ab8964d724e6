"""The directory store's search index: SQLite FTS5 over every event of every session.

Model, in prose: ``<home>/index/search.sqlite`` is derived from the sessions and
never the only copy of anything. It holds one row per indexed event (session,
sequence number, id, parent, kind, role, time), the event's searchable text
(:func:`infai.store.search.searchable_text`; zlib-compressed when it is large)
and an FTS5 inverted index over it without a second copy of the text
(``content=''``; segments are merged less eagerly than FTS5's default,
:data:`AUTOMERGE` at a time, which keeps indexing an append cheap once the
index is large; the file is read through a memory map).
A record that lives in a blob is indexed once per digest, whatever number of
events (in whichever sessions) name it: its text is a document of its own,
numbered negatively, and the events point at it. Per session it keeps how
many events are indexed, the id of the last one (so a session removed and
made again under the same id is noticed), a bitmap of the sequence numbers on
HEAD's path (so a hit says whether it is on the active branch without walking
the tree), and the stat signature of ``HEAD`` it was read under.

It is kept current two ways. The writer's own process indexes what it appended
right after the append is durable, off the durable path: that step failing
(or the file being busy) never fails an append. And every search first
catches up: a session whose ``HEAD`` signature changed since it was indexed is
opened and its new events indexed, a session that vanished is dropped, a
session whose indexed prefix no longer matches is indexed again. So appends by
other processes (an older infai too) are found, and the index file may be
deleted at any time: the next search builds it again, and a damaged one is
deleted and built again with a note (:attr:`Store.index_notes`). An event
whose bytes do not verify is left out, and every search names its session
(:mod:`.search_damage`): one damaged session never costs the others their hits.

Which matches a query returns, and in what order, is :mod:`.search_rank`'s
business: bm25 over a bounded window of the newest matches.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import CorruptionError, StoreError
from ..events import Event
from ..records import record_to_obj
from ..search import (
    SNIPPET_CHARS,
    DamagedSession,
    Progress,
    Query,
    SearchHit,
    SearchResults,
    advance_path,
    make_snippet,
    on_path,
    searchable_text,
)
from . import search_damage
from .derived import DerivedDB, is_damage, now_ns, signature
from .search_damage import Lost
from .search_rank import best

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .listing import Shown as Row
    from .reader import SessionReader

#: 2: documents numbered least recently active session first (the rank window);
#: 3: the events left out as damaged (:mod:`.search_damage`)
VERSION = 3
SCHEMA = (
    search_damage.SCHEMA
    + """
CREATE TABLE IF NOT EXISTS sessions (
    sid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    indexed INTEGER NOT NULL,
    last_id TEXT,
    head_sig TEXT NOT NULL,
    head_path BLOB
);
CREATE TABLE IF NOT EXISTS events (
    doc INTEGER PRIMARY KEY,
    sid INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    id BLOB NOT NULL,
    parent_seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    role TEXT NOT NULL,
    ts TEXT NOT NULL,
    blob INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS events_seq ON events (sid, seq);
CREATE INDEX IF NOT EXISTS events_blob ON events (blob) WHERE blob IS NOT NULL;
CREATE TABLE IF NOT EXISTS blobs (bid INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS texts (doc INTEGER PRIMARY KEY, z BLOB NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5 (
    text, content='', tokenize='unicode61 remove_diacritics 2'
);
"""
)
#: events read and indexed per transaction while catching up
BATCH = 2000
#: a writer's appended events are indexed in one transaction once this many are queued
FLUSH_EVENTS = 256
#: the index file is read through a memory map of up to this many bytes (SQLite's own
#: limit, 2 GB in most builds, applies too)
MMAP_BYTES = 1 << 32
#: the connection's page cache, KiB
CACHE_KIB = 16384
#: … or once the oldest queued one waited this long (seconds), or when the writer closes
FLUSH_SECONDS = 1.0
#: a stored text longer than this (bytes) is compressed
PACK_BYTES = 1024
#: FTS5 merges this many segments of one level into one (its ``automerge``): fewer
#: levels, so less merging per indexed page than 8, for more segments to look in
AUTOMERGE = 16
#: compressed bytes of a stored text decompressed at a time for a snippet
_PIECE = 4096

#: ``session id -> (sid, HEAD signature)`` of the indexed sessions
_Known = dict[str, tuple[int, str]]
#: opens a session for reading (the store's ``open_reader``)
OpenReader = Callable[[str], "SessionReader"]


def _pack(text: str) -> bytes:
    """A text as stored: compressed (``z``) when it is large, else raw (``r``). Most
    events' texts are a few hundred bytes, which zlib halves at about 30 µs each, a
    fifth of the cost of indexing an event; stored raw they make the index about a
    quarter larger (1.2 x the text at 1M events), well within its budget."""
    data = text.encode()
    if len(data) > PACK_BYTES:
        packed = zlib.compress(data, 1)
        if len(packed) < len(data):
            return b"z" + packed
    return b"r" + data


def _unpack(data: bytes) -> str:
    return (zlib.decompress(data[1:]) if data[:1] == b"z" else data[1:]).decode()


def _unpack_head(data: bytes, needles: list[bytes]) -> str:
    """As much of a stored text as a snippet needs: decompressed a piece at a time
    until one of ``needles`` (lower-case words) has turned up with a snippet's width
    of text after it, else whole. A blob's text may be megabytes; its first match is
    usually near the start. The snippet is the same as from the whole text: the
    earliest match seen in a prefix is the earliest overall, and the text cut off
    lies past the snippet's end (which still gets its ellipsis)."""
    if data[:1] != b"z" or len(data) <= _PIECE:
        return _unpack(data)
    inflate = zlib.decompressobj()
    out = b""
    for at in range(1, len(data), _PIECE):
        out += inflate.decompress(data[at : at + _PIECE])
        lowered = out.lower()
        found = [i for i in (lowered.find(n) for n in needles) if i >= 0]
        if found and len(out) > min(found) + 4 * SNIPPET_CHARS:
            return out.decode(errors="ignore")  # a character cut at the end is dropped
    return (out + inflate.flush()).decode()


def _uuid_bytes(value: str) -> bytes:
    return bytes.fromhex(value.replace("-", ""))


def _uuid_text(data: bytes) -> str:
    h = data.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class SearchIndex:
    """The derived FTS5 index of one directory store (see the module docstring)."""

    def __init__(self, home: Path, sessions_dir: Path, notes: list[str]) -> None:
        self.sessions_dir = sessions_dir
        self.db = DerivedDB(home / "index" / "search.sqlite", VERSION, SCHEMA, notes)
        #: events appended by this process and not indexed yet, per session
        self._pending: dict[str, list[Event]] = {}
        self._since: dict[str, float] = {}
        self._queue_lock = threading.Lock()
        self._tuned: sqlite3.Connection | None = None
        #: the sessions table as last read: (connection, its change stamp, rows)
        self._known_cache: tuple[sqlite3.Connection, tuple[int, int], _Known] | None = None
        #: sessions the last catch-up could not open: ``session id -> problem``
        self.unreadable: dict[str, str] = {}

    def _connect(self, busy_ms: int = 5000) -> sqlite3.Connection:
        """The index's connection, tuned once per connection for a file that is large
        and mostly read: reads through a memory map (no read call and copy per page,
        which FTS5's merges and walks do many of; about half the cost of indexing an
        append at 1M events) and a larger page cache."""
        conn = self.db.connect(busy_ms)
        if conn is not self._tuned:
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            self._tuned = conn
            found = conn.execute("SELECT v FROM fts_config WHERE k = 'automerge'").fetchone()
            if found is None or found[0] != AUTOMERGE:  # a new file, or an older infai's
                with contextlib.suppress(sqlite3.OperationalError):  # busy: the next time
                    set_merge = "INSERT INTO fts (fts, rank) VALUES ('automerge', ?)"
                    conn.execute(set_merge, (AUTOMERGE,))
        return conn

    # -- writing ------------------------------------------------------------------

    def _session(self, conn: sqlite3.Connection, session_id: str) -> tuple[int, int, str, bytes]:
        """``(sid, indexed, last_id, head_path)``, making the row if it is new."""
        row = conn.execute(
            "SELECT sid, indexed, last_id, head_path FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            cur = conn.execute(
                "INSERT INTO sessions (id, indexed, head_sig) VALUES (?, 0, '')", (session_id,)
            )
            return int(cur.lastrowid or 0), 0, "", b""
        return row[0], row[1], row[2] or "", row[3] or b""

    def _add(
        self,
        conn: sqlite3.Connection,
        sid: int,
        head_path: bytes,
        events: Sequence[Event],
        blob_text: Callable[[Event], str],
        skipped: Sequence[Lost] = (),
    ) -> None:
        """Index ``events`` (the session's next ones, in order, but for ``skipped``:
        those that did not verify, kept as damaged) and move its HEAD path. An event
        whose blob does not verify is skipped too."""
        doc = conn.execute("SELECT coalesce(max(doc), 0) FROM events").fetchone()[0] + 1
        ev_rows, texts, fts, lost = [], [], [], list(skipped)
        for event in events:
            bid = None
            if event.digest is not None:
                try:
                    bid = self._blob(conn, event, blob_text)
                except CorruptionError as exc:
                    lost.append(Lost(event.seq, event.parent_seq, event.id, str(exc)))
                    continue
            else:
                assert event.record is not None
                text = searchable_text(event.kind, record_to_obj(event.record))
                texts.append((doc, _pack(text)))
                fts.append((doc, text))
            ev_rows.append(
                (
                    doc, sid, event.seq, _uuid_bytes(event.id), event.parent_seq,
                    event.kind, event.role, event.timestamp, bid,
                )
            )  # fmt: skip
            doc += 1
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", ev_rows)
        conn.executemany("INSERT INTO texts VALUES (?, ?)", texts)
        conn.executemany("INSERT INTO fts (rowid, text) VALUES (?, ?)", fts)
        search_damage.record(conn, sid, lost)

        def parents() -> dict[int, int]:
            rows = conn.execute(
                "SELECT seq, parent_seq FROM events WHERE sid = ?"
                " UNION ALL SELECT seq, parent_seq FROM damaged WHERE sid = ?",
                (sid, sid),
            )
            return dict(rows.fetchall())

        ids = {e.seq: e.id for e in events} | {x.seq: x.id or "" for x in lost}
        if not ids:
            return
        moved = {e.seq: e.parent_seq for e in events} | {x.seq: x.parent_seq for x in lost}
        path = advance_path(head_path, moved, parents)
        last = max(ids)
        conn.execute(
            "UPDATE sessions SET indexed = ?, last_id = ?, head_path = ? WHERE sid = ?",
            (last + 1, ids[last], bytes(path), sid),
        )

    @staticmethod
    def _blob(conn: sqlite3.Connection, event: Event, blob_text: Callable[[Event], str]) -> int:
        """The blob's document number, indexing its text the first time it is seen."""
        found = conn.execute("SELECT bid FROM blobs WHERE digest = ?", (event.digest,)).fetchone()
        if found is not None:
            return int(found[0])
        text = blob_text(event)
        cur = conn.execute("INSERT INTO blobs (digest) VALUES (?)", (event.digest,))
        bid = int(cur.lastrowid or 0)
        conn.execute("INSERT INTO texts VALUES (?, ?)", (-bid, _pack(text)))
        conn.execute("INSERT INTO fts (rowid, text) VALUES (?, ?)", (-bid, text))
        return bid

    def _drop(self, conn: sqlite3.Connection, sid: int) -> None:
        """Remove a session's events (and blob texts no other event names)."""
        docs = conn.execute(
            "SELECT e.doc, t.z FROM events e JOIN texts t ON t.doc = e.doc WHERE e.sid = ?",
            (sid,),
        ).fetchall()
        conn.executemany(
            "INSERT INTO fts (fts, rowid, text) VALUES ('delete', ?, ?)",
            [(d, _unpack(z)) for d, z in docs],
        )
        conn.executemany("DELETE FROM texts WHERE doc = ?", [(d,) for d, _ in docs])
        bids = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT blob FROM events WHERE sid = ? AND blob IS NOT NULL", (sid,)
            )
        ]
        conn.execute("DELETE FROM events WHERE sid = ?", (sid,))
        conn.execute("DELETE FROM damaged WHERE sid = ?", (sid,))
        for bid in bids:
            if conn.execute("SELECT 1 FROM events WHERE blob = ? LIMIT 1", (bid,)).fetchone():
                continue
            z = conn.execute("SELECT z FROM texts WHERE doc = ?", (-bid,)).fetchone()
            if z is not None:
                conn.execute(
                    "INSERT INTO fts (fts, rowid, text) VALUES ('delete', ?, ?)",
                    (-bid, _unpack(z[0])),
                )
            conn.execute("DELETE FROM texts WHERE doc = ?", (-bid,))
            conn.execute("DELETE FROM blobs WHERE bid = ?", (bid,))
        conn.execute("DELETE FROM sessions WHERE sid = ?", (sid,))

    def appended(self, session_id: str, events: Sequence[Event]) -> None:
        """The writer's hook, after a durable append: queue ``events`` and index the
        queue in one transaction once it holds :data:`FLUSH_EVENTS` events or is
        :data:`FLUSH_SECONDS` old (and when the writer closes: :meth:`flush`). Only if
        the index is in use, and never waiting: while a search holds the index the
        events stay queued. Best effort: whatever is not indexed here the next
        search's catch-up reads from the session."""
        if not events or not self.db.exists():
            return
        with self._queue_lock:
            queue = self._pending.setdefault(session_id, [])
            if not queue:
                self._since[session_id] = time.monotonic()
            queue.extend(events)
            due = len(queue) >= FLUSH_EVENTS
            due = due or time.monotonic() - self._since[session_id] >= FLUSH_SECONDS
        if due and self.db.lock.acquire(blocking=False):
            try:
                self.flush(session_id)
            finally:
                self.db.lock.release()

    def flush(self, session_id: str | None = None) -> None:
        """Index the queued events of ``session_id`` (None: of every session) now."""
        with self.db.lock:
            with self._queue_lock:
                which = [session_id] if session_id is not None else list(self._pending)
                queues = [(sid, self._pending.pop(sid, [])) for sid in which]
            for sid, queue in queues:
                if queue:
                    self._index_queued(sid, queue)

    def _index_queued(self, session_id: str, events: list[Event]) -> None:
        """Index events this process appended, if the session's indexed prefix ends where
        they begin (else the catch-up reads them from the session)."""
        try:
            conn = self._connect(busy_ms=50)
            with DerivedDB.transaction(conn):
                sid, indexed, _last, path = self._session(conn, session_id)
                fresh = [e for e in events if e.seq >= indexed]
                if not fresh or fresh[0].seq != indexed:
                    return
                self._add(conn, sid, path, fresh, _record_text)
                conn.execute("UPDATE sessions SET head_sig = '' WHERE sid = ?", (sid,))
        except (sqlite3.Error, StoreError, OSError):
            return

    def forget(self, session_id: str) -> None:
        """Drop a removed session (best effort: the next search drops it anyway)."""
        if not self.db.exists():
            return
        with self.db.lock:
            try:
                conn = self._connect(busy_ms=100)
                with DerivedDB.transaction(conn):
                    row = conn.execute(
                        "SELECT sid FROM sessions WHERE id = ?", (session_id,)
                    ).fetchone()
                    if row is not None:
                        self._drop(conn, row[0])
            except sqlite3.Error:
                return

    # -- catching up --------------------------------------------------------------

    def sync(
        self, rows: Sequence[Row], open_reader: OpenReader, progress: Progress | None = None
    ) -> None:
        """Bring the index up to the sessions listed in ``rows`` (listing rows): a
        session whose HEAD's signature changed since it was indexed is caught up (the
        signature is taken before anything is read)."""
        conn = self._connect()
        self.unreadable.clear()
        known = self._known(conn)
        live = {r[0] for r in rows}
        gone = [sid for text, (sid, _) in known.items() if text not in live]
        if gone:
            with DerivedDB.transaction(conn):
                for sid in gone:
                    self._drop(conn, sid)
        now, base = now_ns(), str(self.sessions_dir)
        todo = []
        # Least recently active first: documents are numbered in indexing order, and a
        # common word's results are the newest documents (see .search_rank).
        for row in reversed(rows):
            sig = signature(f"{base}/{row[0]}/HEAD", now)
            if not (sig and known.get(row[0], (0, ""))[1] == sig):
                todo.append((row[0], sig))
        for done, (session_id, sig) in enumerate(todo):
            self._catch_up(conn, session_id, sig, open_reader)
            if progress is not None:
                progress(done + 1, len(todo))

    def _known(self, conn: sqlite3.Connection) -> _Known:
        """``session id -> (sid, head signature)`` of every indexed session. Kept
        between searches while the file is unchanged: ``data_version`` moves when
        another connection commits, ``total_changes`` when this one writes."""
        stamp = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        cached = self._known_cache
        if cached is None or cached[0] is not conn or cached[1] != stamp:
            rows = conn.execute("SELECT id, sid, head_sig FROM sessions").fetchall()
            cached = self._known_cache = (conn, stamp, {r[0]: (r[1], r[2]) for r in rows})
        return cached[2]

    def _catch_up(
        self, conn: sqlite3.Connection, session_id: str, head_sig: str, open_reader: OpenReader
    ) -> None:
        try:
            reader = open_reader(session_id)
        except StoreError as exc:  # a newer format, damage: searched again once readable
            self.unreadable[session_id] = str(exc)
            return
        with reader:
            with DerivedDB.transaction(conn):
                sid, indexed, last_id, _ = self._session(conn, session_id)
                if indexed and (
                    indexed > reader.count
                    or not search_damage.same_last(reader, indexed - 1, last_id)
                ):
                    self._drop(conn, sid)  # not the session that was indexed: start over
                    sid, indexed, last_id, _ = self._session(conn, session_id)
            while True:
                stop = min(indexed + BATCH, reader.count)
                batch, skipped = search_damage.read_verified(reader, indexed, stop)
                with DerivedDB.transaction(conn):
                    if stop > indexed:
                        path = conn.execute(
                            "SELECT head_path FROM sessions WHERE sid = ?", (sid,)
                        ).fetchone()[0]
                        text = functools.partial(_blob_text, reader)
                        self._add(conn, sid, path or b"", batch, text, skipped)
                        indexed = stop
                    if indexed >= reader.count:
                        conn.execute(
                            "UPDATE sessions SET head_sig = ? WHERE sid = ?", (head_sig, sid)
                        )
                if indexed >= reader.count:
                    break

    def rebuild(
        self, rows: Sequence[Row], open_reader: OpenReader, progress: Progress | None
    ) -> list[DamagedSession]:
        """Delete the file and index every session again; the sessions left damaged."""
        with self.db.lock:
            self.db.discard(None)  # asked for: not a repair to report
            self.sync(rows, open_reader, progress)
            return search_damage.damaged_sessions(self._connect(), None, dict(self.unreadable))

    # -- searching ----------------------------------------------------------------

    def search(
        self,
        query: Query,
        rows: Sequence[Row],
        open_reader: OpenReader,
        *,
        session: str | None,
        sessions: set[str] | None,
        kind: str | None,
        limit: int,
    ) -> SearchResults:
        """Catch up, then the best ``limit`` hits (``sessions``: only these ids)."""
        with self.db.lock:
            try:
                return self._search(query, rows, open_reader, session, sessions, kind, limit)
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                self.db.discard(f"{self.db.path}: {exc}; rebuilt from the sessions")
                return self._search(query, rows, open_reader, session, sessions, kind, limit)

    def _search(
        self,
        query: Query,
        rows: Sequence[Row],
        open_reader: OpenReader,
        session: str | None,
        sessions: set[str] | None,
        kind: str | None,
        limit: int,
    ) -> SearchResults:
        self.flush()
        self.sync(rows, open_reader)
        conn = self._connect()
        where, args = [], []
        if session is not None:
            where.append("s.id = ?")
            args.append(session)
        if sessions is not None:
            where.append(f"s.id IN ({', '.join('?' * len(sessions))})")
            args.extend(sorted(sessions))
        if kind is not None:
            where.append("e.kind = ?")
            args.append(kind)
        cond = "".join(f" AND {w}" for w in where)
        wanted = [session] if session is not None else sorted(sessions or ())
        sids = None
        if session is not None or sessions is not None:
            ids = ", ".join("?" * len(wanted))
            found_sids = conn.execute(f"SELECT sid FROM sessions WHERE id IN ({ids})", wanted)
            sids = [r[0] for r in found_sids]
        scope = {k: v for k, v in self.unreadable.items() if sids is None or k in wanted}
        damaged = search_damage.damaged_sessions(conn, sids, scope)
        found, window = best(conn, query, cond, args, limit, sids)
        names = {r[0]: (r[2], r[3]) for r in rows}
        texts: dict[int, str] = {}
        needles = [t.words[0].encode() for t in query.positive_terms()]
        hits = []
        for sess, seq, event_id, ev_kind, role, ts, rank, doc, path in found:
            if doc not in texts:
                z = conn.execute("SELECT z FROM texts WHERE doc = ?", (doc,)).fetchone()
                texts[doc] = _unpack_head(z[0], needles) if z else ""
            snippet, marks = make_snippet(texts[doc], query)
            name, wd = names.get(sess, (None, None))
            hits.append(
                SearchHit(
                    session_id=sess,
                    event_id=_uuid_text(event_id),
                    seq=seq,
                    kind=ev_kind,
                    role=role,
                    timestamp=ts,
                    snippet=snippet,
                    marks=marks,
                    on_head_path=on_path(path, seq),
                    score=-float(rank),
                    session_name=name,
                    working_dir=wd,
                )
            )
        return SearchResults(hits, window, damaged)

    def close(self) -> None:
        """Index what is queued, then close the SQLite connection."""
        with self.db.lock:
            self.flush()
            self.db.close()


def _record_text(event: Event) -> str:
    """A blob event's text from the record the writer still holds."""
    assert event.record is not None
    return searchable_text(event.kind, record_to_obj(event.record))


def _blob_text(reader: SessionReader, event: Event) -> str:
    """A blob event's text, read from its blob (digest checked)."""
    return searchable_text(event.kind, record_to_obj(reader.resolve(event)))

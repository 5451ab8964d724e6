"""A PostgreSQL session: reading its rows, and appending with compare-and-set on HEAD.

See :mod:`infai.store.pg.backend` for the storage model. Sessions borrow
connections from the store's :class:`~infai.store.pg.db.Database` (its pool)
and never see the store itself. A reader sees the session as
it was when opened or last refreshed: events with ``seq`` below the count it
read then. A writer appends in one transaction that locks the session row,
checks HEAD, inserts the events and their blobs, moves HEAD and notifies
:data:`CHANNEL`; a lost race is :class:`~infai.store.errors.HeadConflict`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg

from ..codec import (
    NIL_ID,
    check_role,
    check_timestamp,
    check_uuid,
    digest_of,
    new_event_id,
    now_rfc3339,
)
from ..errors import (
    BackendUnavailable,
    BlobDigestError,
    CorruptionError,
    EventNotFound,
    HeadConflict,
    InvalidInput,
    SessionNotFound,
    StoreError,
)
from ..events import Context, Entry, Event, EventSpec
from ..info import BASE_FORMAT, format_for
from ..options import StoreOptions
from ..records import (
    RECORD_TYPES,
    Record,
    encode_record,
    preview,
    record_from_stored,
)
from .db import Database

CHANNEL = "infai_events"
_COLUMNS = "seq, id, parent_id, parent_seq, branch_from, kind, role, ts, preview, record, digest"
RETRIES = 3


def _s(value: Any) -> str | None:
    return None if value is None else str(value)


def _entry(row: Sequence[Any]) -> Entry:
    return Entry(
        seq=row[0],
        id=str(row[1]),
        parent_id=str(row[2]),
        parent_seq=row[3],
        branch_from=_s(row[4]),
        kind=row[5],
        role=row[6],
        timestamp=row[7],
        preview=row[8],
        blob=row[10] is not None,
    )


class PgSessionReader:
    """A session as it was when opened (or last refreshed); reads what it is asked."""

    def __init__(self, db: Database, options: StoreOptions, session_id: str) -> None:
        self.db = db
        self.options = options
        self.session_id = session_id
        self._head: str | None = None
        self.head_seq = -1
        self._count = 0
        self.refresh()

    def refresh(self) -> None:
        """See what was appended since (by this process or another)."""
        with self.db.conn() as conn:
            row = conn.execute(
                "SELECT head, head_seq, count FROM infai_sessions WHERE id = %s",
                (self.session_id,),
            ).fetchone()
        if row is None:
            raise SessionNotFound(self.session_id)
        self._head, self.head_seq, self._count = _s(row[0]), row[1], row[2]

    @property
    def head(self) -> str | None:
        """HEAD as of the last refresh (another node may have moved it since)."""
        return self._head

    @property
    def count(self) -> int:
        """Events as of the last refresh; later ones are invisible until :meth:`refresh`."""
        return self._count

    def _rows(self, where: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Events of this snapshot (``seq < count``) matching ``where``, oldest first."""
        with self.db.conn() as conn:
            rows: list[tuple[Any, ...]] = conn.execute(
                f"SELECT {_COLUMNS} FROM infai_events WHERE session_id = %s AND seq < %s AND "
                + where
                + " ORDER BY seq",
                (self.session_id, self._count, *args),
            ).fetchall()
        return rows

    def entry_at(self, seq: int) -> Entry:
        """One query; a ``seq`` outside this snapshot raises :class:`EventNotFound`."""
        rows = self._rows("seq = %s", (seq,))
        if not rows:
            raise EventNotFound(f"#{seq}", self.session_id)
        return _entry(rows[0])

    def seq_of(self, event_id: str) -> int:
        """The sequence number of ``event_id`` (one query for its row)."""
        return self.entry(event_id).seq

    def entry(self, event_id: str) -> Entry:
        """The entry of ``event_id`` in this snapshot; raises :class:`EventNotFound`."""
        event_id = check_uuid(event_id, "event id")
        rows = self._rows("id = %s", (event_id,))
        if not rows:
            raise EventNotFound(event_id, self.session_id)
        return _entry(rows[0])

    def entries(self) -> Iterator[Entry]:
        """Every entry of this snapshot, oldest first (one query, fetched whole first)."""
        for row in self._rows("true", ()):
            yield _entry(row)

    def _path_rows(self, at: str | None, to_boundary: bool) -> list[tuple[Any, ...]]:
        if at is None and self.head_seq < 0:
            return []
        tip = self.head_seq if at is None else self.seq_of(at)
        stop = "AND p.kind <> 'compaction'" if to_boundary else ""
        with self.db.conn() as conn:
            rows = conn.execute(
                f"""WITH RECURSIVE path AS (
                    SELECT {_COLUMNS} FROM infai_events WHERE session_id = %s AND seq = %s
                  UNION ALL
                    SELECT {", ".join("e." + c for c in _COLUMNS.split(", "))}
                    FROM infai_events e JOIN path p
                      ON e.session_id = %s AND e.seq = p.parent_seq
                    WHERE p.parent_seq >= 0 {stop}
                ) SELECT {_COLUMNS} FROM path ORDER BY seq""",
                (self.session_id, tip, self.session_id),
            ).fetchall()
        return list(rows)

    def path(self, at: str | None = None, *, to_boundary: bool = True) -> list[Entry]:
        """Entries from the root (or the nearest compaction) to ``at`` (default HEAD)."""
        return [_entry(row) for row in self._path_rows(at, to_boundary)]

    def children(self, event_id: str) -> list[Entry]:
        """Direct children of ``event_id`` in this snapshot, oldest first."""
        seq = self.seq_of(event_id)
        return [_entry(row) for row in self._rows("parent_seq = %s", (seq,))]

    def roots(self) -> list[Entry]:
        """Events without a parent, oldest first."""
        return [_entry(row) for row in self._rows("parent_seq < 0", ())]

    def leaves(self) -> list[Entry]:
        """Events with no child in this snapshot, oldest first (one query)."""
        rows = self._rows(
            "NOT EXISTS (SELECT 1 FROM infai_events c WHERE c.session_id = infai_events.session_id"
            " AND c.parent_seq = infai_events.seq AND c.seq < %s)",
            (self._count,),
        )
        return [_entry(row) for row in rows]

    def _event(self, row: Sequence[Any], blobs: dict[str, bytes] | None) -> Event:
        kind, text, digest = row[5], row[9], row[10]
        where = f"database session {self.session_id} event #{row[0]}"
        try:
            if text is not None:
                record: Record | None = record_from_stored(kind, json.loads(text))
            elif blobs is not None:
                data = blobs.get(digest)
                if data is None:
                    raise CorruptionError(where, 0, f"blob {digest} is missing")
                if digest_of(data) != digest:
                    raise BlobDigestError(where, 0, f"blob {digest} does not match its digest")
                record = record_from_stored(kind, json.loads(data))
            else:
                record = None
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptionError(where, 0, f"undecodable record: {exc}") from None
        return Event(
            id=str(row[1]),
            parent_id=str(row[2]),
            branch_from=_s(row[4]),
            kind=kind,
            role=row[6],
            timestamp=row[7],
            record=record,
            digest=digest,
            seq=row[0],
            preview=row[8],
            parent_seq=row[3],
        )

    def _blobs(self, digests: set[str]) -> dict[str, bytes]:
        if not digests:
            return {}
        with self.db.conn() as conn:
            rows = conn.execute(
                "SELECT digest, data FROM infai_blobs WHERE digest = ANY(%s)", (list(digests),)
            ).fetchall()
        return {d: bytes(data) for d, data in rows}

    def _events(self, rows: list[tuple[Any, ...]], resolve: bool) -> list[Event]:
        blobs = self._blobs({r[10] for r in rows if r[10] is not None}) if resolve else None
        return [self._event(row, blobs) for row in rows]

    def event(self, event_id: str, *, resolve: bool = False) -> Event:
        """One event's row; with ``resolve`` its blob is fetched and its digest checked."""
        event_id = check_uuid(event_id, "event id")
        rows = self._rows("id = %s", (event_id,))
        if not rows:
            raise EventNotFound(event_id, self.session_id)
        return self._events(rows, resolve)[0]

    def resolve(self, event: Event) -> Record:
        """The event's record; an unresolved one is read again with its blob (checked)."""
        if event.record is not None:
            return event.record
        if event.digest is None:
            raise InvalidInput(f"event {event.id} has no record")
        return self.event(event.id, resolve=True).record  # type: ignore[return-value]

    def context(self, at: str | None = None, *, resolve: bool = True) -> Context:
        """The active context at ``at`` (default HEAD): one query for the path."""
        return Context(self._events(self._path_rows(at, True), resolve))

    def close(self) -> None:
        """Nothing to release: connections go back to the pool after each query."""

    def __enter__(self) -> PgSessionReader:
        """The reader itself; leaving the block closes it."""
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PgSessionWriter(PgSessionReader):
    """Appends with compare-and-set on HEAD; no lock, so several nodes may write."""

    def __init__(self, db: Database, options: StoreOptions, session_id: str) -> None:
        super().__init__(db, options, session_id)
        self._pending: str | None = None
        self._closed = False
        self.appended = 0

    @property
    def pending_parent(self) -> str | None:
        """The selected parent of the next append, or None for HEAD."""
        return self._pending

    def select(self, event_id: str | None) -> None:
        """Pick the next append's parent (memory only; None or HEAD returns to HEAD)."""
        if event_id is None:
            self._pending = None
            return
        event_id = check_uuid(event_id, "event id")
        self.seq_of(event_id)
        self._pending = None if event_id == self.head else event_id

    def append(self, record: Record, role: str, *, parent: str | None = None) -> Event:
        """Append one event (see :meth:`append_batch`); committed when it returns."""
        return self.append_batch([(record, role)], parent=parent)[0]

    def append_batch(
        self, items: Sequence[tuple[Record, str]], *, parent: str | None = None
    ) -> list[Event]:
        """Append events as one transaction after ``parent`` (default: selected, else HEAD)."""
        if not items:
            return []
        parent = parent if parent is not None else self._pending
        parent_id = check_uuid(parent, "parent id") if parent else (self.head or NIL_ID)
        if parent:
            self.seq_of(parent_id)
        branch_from = parent_id if parent and parent_id != self.head else None
        stamp = now_rfc3339()
        specs: list[EventSpec] = []
        for record, role in items:
            event_id = new_event_id()
            specs.append((event_id, parent_id, branch_from, role, stamp, record))
            parent_id, branch_from = event_id, None
        return self._write(specs)

    def import_batch(self, specs: Sequence[EventSpec]) -> list[Event]:
        """Append events with ids, links and times as given, in one transaction (import)."""
        for event_id, parent_id, branch_from, _role, timestamp, _record in specs:
            check_uuid(event_id, "event id")
            check_uuid(parent_id, "parent id")
            if branch_from is not None:
                check_uuid(branch_from, "branch_from")
            check_timestamp(timestamp)
        return self._write(specs)

    def _write(self, specs: Sequence[EventSpec]) -> list[Event]:
        if self._closed:
            raise StoreError(f"session {self.session_id}: writer is closed")
        if not specs:
            return []
        encoded = []
        for _id, _parent, _branch, role, _ts, record in specs:
            if type(record) not in RECORD_TYPES.values():
                raise InvalidInput(f"not a record: {type(record).__name__}")
            check_role(role)
            encoded.append(encode_record(record))
        for attempt in range(RETRIES):
            try:
                events = self._transaction(specs, encoded)
                break
            except psycopg.OperationalError as exc:  # the connection dropped: retry
                if attempt + 1 == RETRIES:
                    raise BackendUnavailable(
                        f"session {self.session_id}: append failed: {exc}"
                    ) from None
                time.sleep(0.05 * (attempt + 1))
        self._pending = None
        self.appended += len(events)
        return events

    def _transaction(self, specs: Sequence[EventSpec], encoded: list[bytes]) -> list[Event]:
        ids = [spec[0] for spec in specs]
        with self.db.conn(raw=True) as conn, conn.transaction():
            row = conn.execute(
                "SELECT head, head_seq, count FROM infai_sessions WHERE id = %s FOR UPDATE",
                (self.session_id,),
            ).fetchone()
            if row is None:
                raise SessionNotFound(self.session_id)
            done = conn.execute(
                f"SELECT {_COLUMNS} FROM infai_events WHERE session_id = %s AND id = ANY(%s)"
                " ORDER BY seq",
                (self.session_id, ids),
            ).fetchall()
            if len(done) == len(ids):  # an earlier attempt committed before its answer was lost
                self._head, self.head_seq, self._count = _s(row[0]), row[1], row[2]
                mine = {digest_of(data): data for data in encoded}  # records as given
                return [self._event(r, mine) for r in done]
            if done:
                raise InvalidInput(f"event {done[0][1]} already exists in {self.session_id}")
            head, head_seq, count = _s(row[0]), row[1], row[2]
            if head != self._head or count != self._count:
                # reloaded; a picked older event stays picked (it is the caller's choice)
                self._head, self.head_seq, self._count = head, head_seq, count
                raise HeadConflict(
                    f"session {self.session_id}: another writer appended first "
                    f"(HEAD is now #{head_seq}); nothing was written, retry"
                )
            local: dict[str, int] = {}
            rows = []
            blobs = []
            for i, ((event_id, parent_id, branch_from, role, ts, record), data) in enumerate(
                zip(specs, encoded, strict=True)
            ):
                seq = count + i
                if parent_id == NIL_ID:
                    parent_seq = -1
                elif parent_id in local:
                    parent_seq = local[parent_id]
                else:
                    found = conn.execute(
                        "SELECT seq FROM infai_events WHERE session_id = %s AND id = %s",
                        (self.session_id, parent_id),
                    ).fetchone()
                    if found is None:
                        raise EventNotFound(parent_id, self.session_id)
                    parent_seq = found[0]
                local[event_id] = seq
                text: str | None = data.decode()
                digest = None
                if len(data) > self.options.blob_threshold:
                    digest, text = digest_of(data), None
                    blobs.append((digest, data))
                rows.append(
                    (
                        self.session_id, seq, event_id, parent_id, parent_seq, branch_from,
                        record.kind, role, ts, preview(record), text, digest,
                    )
                )  # fmt: skip
            needed = format_for({spec[5].kind for spec in specs})
            if needed > BASE_FORMAT:
                # the session now holds a newer format's kinds: its format says so (info.py)
                conn.execute(
                    "UPDATE infai_sessions SET info = jsonb_set(info, '{format}', to_jsonb(%s))"
                    " WHERE id = %s AND (info->>'format')::int < %s",
                    (needed, self.session_id, needed),
                )
            with conn.cursor() as cur:
                if blobs:
                    cur.executemany(
                        "INSERT INTO infai_blobs (digest, data) VALUES (%s, %s)"
                        " ON CONFLICT (digest) DO NOTHING",
                        blobs,
                    )
                cur.executemany(
                    "INSERT INTO infai_events (session_id, seq, id, parent_id, parent_seq,"
                    " branch_from, kind, role, ts, preview, record, digest)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    rows,
                )
            last = rows[-1]
            stamp = now_rfc3339()
            conn.execute(
                "UPDATE infai_sessions SET head = %s, head_seq = %s, count = %s,"
                " updated_at = %s, info = jsonb_set(info, '{updated_at}', to_jsonb(%s::text))"
                " WHERE id = %s",
                (last[2], last[1], count + len(rows), stamp, stamp, self.session_id),
            )
            payload = json.dumps({"session": self.session_id, "seq": last[1], "id": last[2]})
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
        self._head, self.head_seq, self._count = str(last[2]), last[1], count + len(rows)
        return [
            Event(
                id=r[2],
                parent_id=r[3],
                branch_from=r[5],
                kind=r[6],
                role=r[7],
                timestamp=r[8],
                record=spec[5],
                digest=r[11],
                seq=r[1],
                preview=r[9],
                parent_seq=r[4],
            )
            for r, spec in zip(rows, specs, strict=True)
        ]

    def close(self) -> None:
        """Refuse later appends; there is no lock or connection to release."""
        self._closed = True

    def __enter__(self) -> PgSessionWriter:
        """The writer itself; leaving the block closes it."""
        return self

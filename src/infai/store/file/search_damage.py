"""What the directory store's search index does with events that do not verify.

Model, in prose: a session with one flipped byte (a chunk line failing its
checksum, a blob that no longer hashes to its name, a damaged index entry)
still has events that verify, and every other session is whole. So the
catch-up reads a batch of events as usual, and only when that fails reads its
events one at a time, keeping each one whose own bytes verify. An event that
does not is *skipped*: the session's indexed count moves past it (the next
search does not trip over it again), and a row in the ``damaged`` table keeps
its sequence number, its parent (from its index entry, when that verifies, so
the HEAD path bitmap stays right) and the problem, with file and offset. Every
search names the damaged sessions of its scope from that table
(:class:`~infai.store.search.DamagedSession`), and so does a rebuild: a search
never looks complete when it is not.

The rows go with their session (removed, or indexed again from the start) and
with the whole file (a rebuild). A session that cannot be opened at all (damage
recovery refuses, a newer format) is not indexed and is named the same way, with
no event count, by every search that tries it.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from ..errors import CorruptionError
from ..events import Event
from ..search import DamagedSession

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .reader import SessionReader

SCHEMA = """
CREATE TABLE IF NOT EXISTS damaged (
    sid INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    parent_seq INTEGER NOT NULL,
    id TEXT,
    problem TEXT NOT NULL,
    PRIMARY KEY (sid, seq)
) WITHOUT ROWID;
"""


class Lost(NamedTuple):
    """An event left out of the index: where it sits in the tree and why."""

    seq: int
    #: its parent's sequence number from its index entry; -1 when that is damaged too
    parent_seq: int
    #: its id from its index entry, or None when that is damaged too
    id: str | None
    problem: str


def lost(reader: SessionReader, seq: int, exc: CorruptionError) -> Lost:
    """The :class:`Lost` row of event ``seq``, which failed with ``exc``."""
    try:
        entry = reader.entry_at(seq)
    except CorruptionError:
        return Lost(seq, -1, None, str(exc))
    return Lost(seq, entry.parent_seq, entry.id, str(exc))


def read_verified(reader: SessionReader, start: int, stop: int) -> tuple[list[Event], list[Lost]]:
    """Events ``start``..``stop - 1`` that verify, and those that do not.

    The whole range is read together first (the common case, no damage); when
    that fails, one event at a time."""
    try:
        return reader.events_between(start, stop), []
    except CorruptionError:
        pass
    events: list[Event] = []
    skipped: list[Lost] = []
    for seq in range(start, min(stop, reader.count)):
        try:
            events.extend(reader.events_between(seq, seq + 1))
        except CorruptionError as exc:
            skipped.append(lost(reader, seq, exc))
    return events, skipped


def same_last(reader: SessionReader, seq: int, last_id: str) -> bool:
    """Whether event ``seq`` is still the one indexed as ``last_id`` (an unknown id,
    or an entry that no longer verifies, cannot tell otherwise: taken as the same)."""
    if not last_id:
        return True
    try:
        return reader.entry_at(seq).id == last_id
    except CorruptionError:
        return True


def record(conn: sqlite3.Connection, sid: int, skipped: list[Lost]) -> None:
    """Keep the skipped events of session ``sid``."""
    conn.executemany(
        "INSERT OR REPLACE INTO damaged VALUES (?, ?, ?, ?, ?)",
        [(sid, s.seq, s.parent_seq, s.id, s.problem) for s in skipped],
    )


def damaged_sessions(
    conn: sqlite3.Connection, sids: list[int] | None, unreadable: dict[str, str]
) -> list[DamagedSession]:
    """The damaged sessions among ``sids`` (None: all), with the ``unreadable`` ones
    (``session id -> problem``, already narrowed to the scope), by session id."""
    where, args = "", list[int]()
    if sids is not None:
        where = f" WHERE d.sid IN ({', '.join('?' * len(sids))})"
        args = sids
    rows = conn.execute(
        "SELECT s.id, count(*), (SELECT problem FROM damaged f WHERE f.sid = d.sid"
        " ORDER BY f.seq LIMIT 1) FROM damaged d JOIN sessions s ON s.sid = d.sid"
        f"{where} GROUP BY d.sid",
        args,
    ).fetchall()
    found = [DamagedSession(r[0], int(r[1]), r[2]) for r in rows]
    found += [DamagedSession(k, None, v) for k, v in unreadable.items()]
    return sorted(found, key=lambda d: d.session_id)

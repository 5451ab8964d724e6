"""Work in flight that several ``infai serve`` nodes share: turns, live frames, questions.

Why: any node may serve any client, so what a turn running on one node shows
(its deltas, its permission questions, its start and end) must reach the
watchers of every node, and a cancel or an answer posted to any node must
reach the node that runs the turn. PostgreSQL carries all of it, with the
tables of migration 4 and ``LISTEN``/``NOTIFY``; no other server is needed.

Model, in prose:

- A process that serves is a *node*, named by a random UUID for its lifetime.
  It holds an advisory lock on that name on a connection of its own (the
  *node connection*, with TCP keepalives so the database notices a vanished
  machine too): while the lock is held the node is alive, and when its process
  dies the database drops the connection and the lock with it.
- A turn a node runs is a row of ``infai_turns`` (which node, when it started,
  a cancel asked for, when and how it ended). What the node's watchers are
  sent during the turn (``turn_started``, each delta, each settled event's
  sequence number, questions and their answers, ``turn_ended``) is written to
  ``infai_live`` by the node connection, a batch per transaction, and the
  batch's row ids are notified on :data:`LIVE_CHANNEL`. Notifications reach
  every listener in commit order, and one connection writes a node's frames,
  so every other node reads them in the order they were made. A payload holds
  ids only (at most :data:`BATCH` of them), never frames: ``NOTIFY`` payloads
  are limited to 8000 bytes and a delta may be larger.
- A permission question is a row of ``infai_questions`` before any client can
  see it; the first answer recorded (``UPDATE ... WHERE answer IS NULL``) is
  the answer, whichever node it was posted to, and the node asking is told on
  :data:`CONTROL_CHANNEL`. A cancel is recorded on the turn's row and told on
  the same channel.
- A turn whose node's lock is free but whose row has not ended was lost with
  its node. Any node that finds one (:meth:`PgLive.lost_turns`, polled) takes
  the session's lease, records the interruption in the session, and ends the
  turn (:meth:`PgLive.end_lost`): its ``turn_ended`` is written on behalf of
  the lost node, so watchers everywhere see the turn end.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import psycopg

from ..codec import check_uuid
from ..errors import BackendUnavailable
from .db import Database
from .session import CHANNEL

T = TypeVar("T")

#: the channel of live frames: ``{"s": session, "ids": [row ids]}``
LIVE_CHANNEL = "infai_live"
#: the channel of requests to the node running a turn: a cancel or an answer
CONTROL_CHANNEL = "infai_control"
#: a node's liveness lock: an advisory lock on this prefix and its id
NODE_PREFIX = "infai-node:"
#: frames written (and notified) per transaction at most: their ids fit a payload
BATCH = 200
#: what a lost turn's ``turn_ended`` says
LOST = "the node running this turn was lost; the turn is recorded as interrupted"
#: seconds the live frames of an ended turn are kept (a node slow to read them)
KEEP_LIVE = 60
#: keepalives on the node connection: the database drops a vanished machine's
#: connection (and its locks) after about idle + interval x count seconds
KEEPALIVES = (
    ("tcp_keepalives_idle", 5),
    ("tcp_keepalives_interval", 2),
    ("tcp_keepalives_count", 3),
)


@dataclass(frozen=True, slots=True)
class LiveRow:
    """One live frame another node (or this one) wrote."""

    id: int
    session_id: str
    turn: str
    node: str
    name: str
    data: dict[str, Any]


def keep_alive(conn: psycopg.Connection[Any]) -> None:
    """Ask the database to probe ``conn``'s client (see :data:`KEEPALIVES`)."""
    for name, value in KEEPALIVES:
        conn.execute(f"SET {name} = {int(value)}")


def _row(row: Sequence[Any]) -> LiveRow:
    return LiveRow(int(row[0]), str(row[1]), str(row[2]), str(row[3]), row[4], json.loads(row[5]))


class PgLive:
    """This process as a node: its live frames, turns, questions and requests."""

    def __init__(self, db: Database) -> None:
        self.db = db
        #: this node's id, for its lifetime
        self.node = str(uuid.uuid4())
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    # -- the node connection ---------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            conn = self.db.connect()
            try:
                keep_alive(conn)
                conn.execute(
                    "SELECT pg_advisory_lock(hashtextextended(%s, 0))", (NODE_PREFIX + self.node,)
                )
            except psycopg.Error as exc:
                conn.close()
                raise BackendUnavailable(f"{self.db.safe_url()}: {exc}") from None
            self._conn = conn
        return conn

    def start(self) -> None:
        """Be alive as a node from now on (take the node lock)."""
        with self._lock:
            self._connection()

    def close(self) -> None:
        """Stop being a node: the lock goes with the connection."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

    def _write(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``work`` in one transaction on the node connection (its writes are ordered)."""
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction():
                    return work(conn)
            except psycopg.OperationalError as exc:
                self._conn = None
                conn.close()
                raise BackendUnavailable(f"{self.db.safe_url()}: {exc}") from None

    # -- live frames -----------------------------------------------------------

    def publish(
        self, session: str, turn: str, frames: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        """Write one turn's frames in order and notify their ids (blocking).

        A ``turn_started`` records the turn (after ending any turn of the session
        whose node was lost: this node holds the lease, so such a turn is over); a
        ``turn_ended`` ends its row.
        """
        for first in range(0, len(frames), BATCH):
            part = frames[first : first + BATCH]
            self._write(partial(self._publish, session=session, turn=turn, frames=part))

    def _publish(
        self,
        conn: psycopg.Connection[Any],
        session: str,
        turn: str,
        frames: Sequence[tuple[str, dict[str, Any]]],
    ) -> None:
        ids: list[int] = []
        for name, data in frames:
            if name == "turn_started":
                ids += self._end_lost(conn, session)
                conn.execute(
                    "INSERT INTO infai_turns (turn, session_id, node) VALUES (%s, %s, %s)"
                    " ON CONFLICT (turn) DO NOTHING",
                    (turn, session, self.node),
                )
            elif name == "turn_ended":
                conn.execute(
                    "UPDATE infai_turns SET ended_at = clock_timestamp(), outcome = %s"
                    " WHERE turn = %s AND ended_at IS NULL",
                    (data.get("outcome"), turn),
                )
            ids.append(_insert(conn, session, turn, self.node, name, data))
        _notify(conn, session, ids)

    def fetch(self, ids: Sequence[int]) -> list[LiveRow]:
        """The live frames ``ids``, in id order (those already tidied away are gone)."""
        if not ids:
            return []
        with self.db.conn() as conn:
            rows = conn.execute(
                "SELECT id, session_id, turn, node, name, data FROM infai_live"
                " WHERE id = ANY(%s) ORDER BY id",
                (list(ids),),
            ).fetchall()
        return [_row(r) for r in rows]

    def running(self, session: str) -> tuple[str, str, list[LiveRow]] | None:
        """The turn running in ``session`` on another node, if one is: its id, its
        node and its live frames so far."""
        sid = check_uuid(session, "session id")
        with self.db.conn() as conn:
            found = conn.execute(
                "SELECT turn, node FROM infai_turns WHERE session_id = %s AND ended_at IS NULL"
                " AND node <> %s ORDER BY started_at DESC LIMIT 1",
                (sid, self.node),
            ).fetchone()
            if found is None:
                return None
            rows = conn.execute(
                "SELECT id, session_id, turn, node, name, data FROM infai_live"
                " WHERE turn = %s ORDER BY id",
                (found[0],),
            ).fetchall()
        return str(found[0]), str(found[1]), [_row(r) for r in rows]

    # -- turns: cancel, loss -----------------------------------------------------

    def request_cancel(self, session: str, turn: str | None = None) -> str | None:
        """Ask the node running ``session``'s turn (``turn``: only that one) to
        cancel it; the turn's id, or None if none is running."""
        sid = check_uuid(session, "session id")
        with self.db.conn() as conn, conn.transaction():
            found = conn.execute(
                "UPDATE infai_turns SET cancel_at = coalesce(cancel_at, clock_timestamp())"
                " WHERE session_id = %s AND ended_at IS NULL AND (%s::uuid IS NULL OR turn = %s)"
                " RETURNING turn, node",
                (sid, turn, turn),
            ).fetchone()
            if found is None:
                return None
            payload = {"cancel": str(found[0]), "s": sid, "node": str(found[1])}
            conn.execute("SELECT pg_notify(%s, %s)", (CONTROL_CHANNEL, json.dumps(payload)))
        return str(found[0])

    def cancels_asked(self) -> list[tuple[str, str]]:
        """This node's running turns a cancel was asked for: (session, turn)."""
        with self.db.conn() as conn:
            rows = conn.execute(
                "SELECT session_id, turn FROM infai_turns WHERE node = %s"
                " AND ended_at IS NULL AND cancel_at IS NOT NULL",
                (self.node,),
            ).fetchall()
        return [(str(s), str(t)) for s, t in rows]

    def turn_ended(self, turn: str) -> tuple[bool, str | None]:
        """Whether ``turn`` has ended (an unknown turn has), and its outcome."""
        with self.db.conn() as conn:
            row = conn.execute(
                "SELECT ended_at IS NOT NULL, outcome FROM infai_turns WHERE turn = %s", (turn,)
            ).fetchone()
        return (True, None) if row is None else (bool(row[0]), row[1])

    def lost_turns(self) -> list[tuple[str, str]]:
        """Turns whose node is gone but which have not ended: (session, turn)."""
        with self.db.conn() as conn, conn.transaction(force_rollback=True):
            rows = conn.execute(
                "SELECT session_id, turn FROM infai_turns WHERE ended_at IS NULL AND node <> %s"
                " AND pg_try_advisory_xact_lock(hashtextextended(%s || node::text, 0))",
                (self.node, NODE_PREFIX),
            ).fetchall()
        return [(str(s), str(t)) for s, t in rows]

    def end_lost(self, session: str) -> int:
        """End ``session``'s turns whose node is gone (call it holding the lease,
        after recording the interruption); how many were."""

        def work(conn: psycopg.Connection[Any]) -> int:
            ids = self._end_lost(conn, session)
            _notify(conn, session, ids)
            return len(ids)

        return self._write(work)

    def _end_lost(self, conn: psycopg.Connection[Any], session: str) -> list[int]:
        """End the turns of ``session`` whose node's lock is free: their questions
        answered by nobody, their ``turn_ended`` written on their node's behalf."""
        lost = conn.execute(
            "UPDATE infai_turns SET ended_at = clock_timestamp(), outcome = 'lost'"
            " WHERE session_id = %s AND ended_at IS NULL AND node <> %s"
            " AND pg_try_advisory_xact_lock(hashtextextended(%s || node::text, 0))"
            " RETURNING turn, node",
            (session, self.node, NODE_PREFIX),
        ).fetchall()
        ids: list[int] = []
        for turn, node in lost:
            turn, node = str(turn), str(node)
            asked = conn.execute(
                "UPDATE infai_questions SET answer = %s, answered_at = clock_timestamp()"
                " WHERE turn = %s AND answer IS NULL RETURNING id",
                (json.dumps({"answer": None, "by": "lost"}), turn),
            ).fetchall()
            for (qid,) in asked:
                data = {"id": str(qid), "answer": None, "by": "cancelled"}
                ids.append(_insert(conn, session, turn, node, "approval_resolved", data))
            ended = {"turn": turn, "outcome": "error", "error": LOST}
            ids.append(_insert(conn, session, turn, node, "turn_ended", ended))
        return ids

    # -- questions -------------------------------------------------------------

    def ask(self, session: str, turn: str | None, question: dict[str, Any]) -> None:
        """Record a permission question (before any client is shown it)."""
        with self.db.conn() as conn:
            conn.execute(
                "INSERT INTO infai_questions (id, session_id, turn, node, data)"
                " VALUES (%s, %s, %s, %s, %s)",
                (question["id"], session, turn, self.node, json.dumps(question)),
            )

    def answer(self, session: str, question: str, answer: dict[str, Any]) -> str | None:
        """Record ``answer`` if the question has none yet and tell its node; that
        node's id, or None (no such pending question: answered, or never asked)."""
        with self.db.conn() as conn, conn.transaction():
            row = conn.execute(
                "UPDATE infai_questions SET answer = %s, answered_at = clock_timestamp()"
                " WHERE id = %s AND session_id = %s AND answer IS NULL RETURNING node",
                (json.dumps(answer), question, session),
            ).fetchone()
            if row is None:
                return None
            payload = {"answer": question, "s": session, "node": str(row[0])}
            conn.execute("SELECT pg_notify(%s, %s)", (CONTROL_CHANNEL, json.dumps(payload)))
        return str(row[0])

    def answer_of(self, question: str) -> dict[str, Any] | None:
        """The recorded answer of ``question`` (None: none yet)."""
        with self.db.conn() as conn:
            row = conn.execute(
                "SELECT answer FROM infai_questions WHERE id = %s", (question,)
            ).fetchone()
        if row is None or row[0] is None:
            return None
        found: dict[str, Any] = json.loads(row[0])
        return found

    def pending(self, session: str) -> list[dict[str, Any]]:
        """The questions of ``session`` waiting for an answer, oldest first."""
        sid = check_uuid(session, "session id")
        with self.db.conn() as conn:
            rows = conn.execute(
                "SELECT data FROM infai_questions WHERE session_id = %s AND answer IS NULL"
                " ORDER BY asked_at, id",
                (sid,),
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    # -- listening and tidying ---------------------------------------------------

    def listen(
        self, callback: Callable[[str | None, dict[str, Any]], None], stop: threading.Event
    ) -> None:
        """Call ``callback(channel, payload)`` for each notification on the events,
        live and control channels, until ``stop`` (blocking: run it in a thread).
        A lost connection is reconnected and said as ``callback(None, {})``:
        whatever was notified meanwhile was not heard."""
        lost = False
        while not stop.is_set():
            try:
                with self.db.connect() as conn:
                    keep_alive(conn)
                    for channel in (CHANNEL, LIVE_CHANNEL, CONTROL_CHANNEL):
                        conn.execute(f"LISTEN {channel}")
                    if lost:
                        callback(None, {})
                    while not stop.is_set():
                        for note in conn.notifies(timeout=0.25):
                            try:
                                data = json.loads(note.payload)
                            except ValueError:
                                continue
                            if isinstance(data, dict):
                                callback(note.channel, data)
            except (psycopg.OperationalError, BackendUnavailable):
                lost = True
                stop.wait(0.5)

    def tidy(self) -> None:
        """Forget the live frames of turns ended a while ago (:data:`KEEP_LIVE`), and
        turns and answered questions older than a day."""
        with self.db.conn() as conn:
            conn.execute(
                "DELETE FROM infai_live l USING infai_turns t WHERE l.turn = t.turn"
                " AND t.ended_at < clock_timestamp() - make_interval(secs => %s)",
                (KEEP_LIVE,),
            )
            conn.execute(
                "DELETE FROM infai_turns WHERE ended_at < clock_timestamp() - interval '1 day'"
            )
            conn.execute(
                "DELETE FROM infai_questions WHERE answered_at"
                " < clock_timestamp() - interval '1 day'"
            )


def _insert(
    conn: psycopg.Connection[Any], session: str, turn: str, node: str, name: str, data: Any
) -> int:
    row = conn.execute(
        "INSERT INTO infai_live (session_id, turn, node, name, data)"
        " VALUES (%s, %s, %s, %s, %s) RETURNING id",
        (session, turn, node, name, json.dumps(data)),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _notify(conn: psycopg.Connection[Any], session: str, ids: list[int]) -> None:
    if ids:
        payload = json.dumps({"s": session, "ids": ids})
        conn.execute("SELECT pg_notify(%s, %s)", (LIVE_CHANNEL, payload))

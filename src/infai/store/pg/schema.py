"""The PostgreSQL schema, as numbered migrations recorded in the database.

Storage model, in prose: ``infai_sessions`` holds one row per session: its
metadata (the same object the file store keeps in ``session.json``), HEAD (id
and sequence number) and the event count. ``infai_events`` holds one row per
event, keyed by (session, seq) and unique by (session, id), with the same
fields as a chunk line: parent id and sequence number, ``branch_from``, kind,
role, timestamp, preview, and either the record's JSON text inline or the
SHA-256 digest of a row in ``infai_blobs``, which is shared by all sessions
(content-addressed, so equal payloads are stored once). Appending an event and
moving HEAD happen in one transaction; see :mod:`infai.store.pg.backend`.
Migration 2 adds the search index, derived from the events (see
:mod:`infai.store.pg.search`): a database migrated from 1 is indexed by its
first search. Migration 3 adds the store-wide content-addressed objects of
workspace snapshots and tool manifests (see :mod:`infai.store.pg.objects`):
``infai_objects`` (digest, size, data), ``infai_object_puts`` (when each digest
was last put, for garbage collection's grace period) and a one-row generation
counter that every removal bumps. Migration 4 adds what several ``infai serve``
nodes share about the work in flight (see :mod:`infai.store.pg.live`): the
turns running and which node runs them (``infai_turns``), the live frames of
those turns (``infai_live``: deltas, questions, turn boundaries, never part of
a session's log) and the permission questions waiting for an answer
(``infai_questions``).

``infai_schema`` records which migrations ran. :func:`migrate` applies the
missing ones in order, each in its own transaction, under an advisory lock so
two nodes starting at once do not race; a database migrated by a newer infai
is refused rather than misread.
"""

from __future__ import annotations

from typing import Any

from ..errors import UnsupportedFormat

#: a number every infai process agrees on, for pg_advisory_xact_lock
MIGRATION_LOCK = 0x1F_A1_57_0E

MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "sessions, events, blobs",
        """
        CREATE TABLE infai_sessions (
            id uuid PRIMARY KEY,
            info jsonb NOT NULL,
            updated_at text NOT NULL,
            head uuid,
            head_seq integer NOT NULL DEFAULT -1,
            count integer NOT NULL DEFAULT 0
        );
        CREATE INDEX infai_sessions_updated ON infai_sessions (updated_at DESC, id DESC);
        CREATE TABLE infai_events (
            session_id uuid NOT NULL REFERENCES infai_sessions (id) ON DELETE CASCADE,
            seq integer NOT NULL,
            id uuid NOT NULL,
            parent_id uuid NOT NULL,
            parent_seq integer NOT NULL,
            branch_from uuid,
            kind text NOT NULL,
            role text NOT NULL,
            ts text NOT NULL,
            preview text NOT NULL,
            record text,
            digest text,
            PRIMARY KEY (session_id, seq),
            UNIQUE (session_id, id),
            CHECK (parent_seq < seq),
            CHECK ((record IS NULL) <> (digest IS NULL))
        );
        CREATE INDEX infai_events_parent ON infai_events (session_id, parent_seq);
        CREATE TABLE infai_blobs (
            digest text PRIMARY KEY,
            data bytea NOT NULL
        );
        """,
    ),
    (
        2,
        "search index",
        """
        CREATE TABLE infai_search (
            session_id uuid NOT NULL,
            seq integer NOT NULL,
            tsv tsvector NOT NULL,
            PRIMARY KEY (session_id, seq),
            FOREIGN KEY (session_id, seq) REFERENCES infai_events (session_id, seq)
                ON DELETE CASCADE
        );
        CREATE INDEX infai_search_tsv ON infai_search USING gin (tsv);
        CREATE TABLE infai_search_blobs (
            digest text PRIMARY KEY REFERENCES infai_blobs (digest) ON DELETE CASCADE,
            tsv tsvector NOT NULL
        );
        CREATE INDEX infai_search_blobs_tsv ON infai_search_blobs USING gin (tsv);
        CREATE TABLE infai_search_state (
            session_id uuid PRIMARY KEY REFERENCES infai_sessions (id) ON DELETE CASCADE,
            indexed integer NOT NULL,
            head_path bytea
        );
        CREATE INDEX infai_events_digest ON infai_events (digest) WHERE digest IS NOT NULL;
        """,
    ),
    (
        3,
        "content-addressed objects",
        """
        CREATE TABLE infai_objects (
            digest text PRIMARY KEY,
            size bigint NOT NULL,
            data bytea NOT NULL,
            CHECK (size = octet_length(data))
        );
        CREATE TABLE infai_object_puts (
            digest text PRIMARY KEY,
            at timestamptz NOT NULL
        );
        CREATE INDEX infai_object_puts_at ON infai_object_puts (at);
        CREATE TABLE infai_objects_generation (
            one boolean PRIMARY KEY DEFAULT true CHECK (one),
            value bigint NOT NULL
        );
        INSERT INTO infai_objects_generation (value) VALUES (0);
        """,
    ),
    (
        4,
        "turns, live frames and questions of every node",
        """
        CREATE TABLE infai_turns (
            turn uuid PRIMARY KEY,
            session_id uuid NOT NULL REFERENCES infai_sessions (id) ON DELETE CASCADE,
            node uuid NOT NULL,
            started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            cancel_at timestamptz,
            ended_at timestamptz,
            outcome text
        );
        CREATE INDEX infai_turns_running ON infai_turns (session_id) WHERE ended_at IS NULL;
        CREATE TABLE infai_live (
            id bigserial PRIMARY KEY,
            session_id uuid NOT NULL REFERENCES infai_sessions (id) ON DELETE CASCADE,
            turn uuid NOT NULL,
            node uuid NOT NULL,
            name text NOT NULL,
            data text NOT NULL,
            at timestamptz NOT NULL DEFAULT clock_timestamp()
        );
        CREATE INDEX infai_live_turn ON infai_live (turn, id);
        CREATE TABLE infai_questions (
            id uuid PRIMARY KEY,
            session_id uuid NOT NULL REFERENCES infai_sessions (id) ON DELETE CASCADE,
            turn uuid,
            node uuid NOT NULL,
            data text NOT NULL,
            asked_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            answer text,
            answered_at timestamptz
        );
        CREATE INDEX infai_questions_pending ON infai_questions (session_id)
            WHERE answer IS NULL;
        """,
    ),
]
LATEST = MIGRATIONS[-1][0]


def applied(conn: Any) -> int:
    """The newest migration the database records (0: none)."""
    row = conn.execute("SELECT to_regclass('infai_schema') IS NOT NULL AS present").fetchone()
    if not row[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM infai_schema").fetchone()
    return int(row[0])


def _refuse_newer(current: int) -> None:
    if current > LATEST:
        raise UnsupportedFormat(
            f"the database's infai schema is version {current}; this infai "
            f"understands up to {LATEST}: upgrade infai"
        )


def migrate(conn: Any) -> list[str]:
    """Apply the missing migrations, each in its own transaction; returns what was
    applied (connection in autocommit).

    Every transaction takes :data:`MIGRATION_LOCK` and reads the version again, so
    two processes starting at once apply each migration once. A migration that
    fails rolls back alone: the ones before it stay applied and recorded.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS infai_schema ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        _refuse_newer(applied(conn))
    done: list[str] = []
    for version, name, sql in MIGRATIONS:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            current = applied(conn)
            _refuse_newer(current)
            if version <= current:
                continue
            conn.execute(sql)
            conn.execute(
                "INSERT INTO infai_schema (version, name) VALUES (%s, %s)", (version, name)
            )
        done.append(f"{version}: {name}")
    return done


def check_current(conn: Any) -> None:
    """Refuse a database whose schema is older (not migrated) or newer than this infai."""
    current = applied(conn)
    _refuse_newer(current)
    if current < LATEST:
        raise UnsupportedFormat(
            f"the database's infai schema is version {current}, not {LATEST}: "
            "run `infai store migrate`"
        )

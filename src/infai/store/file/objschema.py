"""The directory store's objects database: its schema and the in-place upgrade.

Model, in prose: ``PRAGMA user_version`` says which schema the file holds; an
older one is brought to :data:`SCHEMA_VERSION` on first open, in one
transaction (see ``docs/store-format.md``), and a newer one is refused.
"""

from __future__ import annotations

import sqlite3

#: the database's schema version (``PRAGMA user_version``; 2 added ``puts``,
#: 3 packs and a rowid ``objects`` table)
SCHEMA_VERSION = 3
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS objects (
        digest TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        data BLOB,
        pack INTEGER,
        pos INTEGER
    )""",
    "CREATE INDEX IF NOT EXISTS objects_by_pack ON objects (pack) WHERE pack IS NOT NULL",
    """CREATE TABLE IF NOT EXISTS packs (
        id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, size INTEGER NOT NULL
    )""",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', 0)",
    "CREATE TABLE IF NOT EXISTS puts (digest TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID",
)


def migrate(conn: sqlite3.Connection) -> None:
    """Create the schema, or bring version 1 or 2 to the current one: the
    ``WITHOUT ROWID`` objects table is copied into the rowid one (its bytes stay
    inline). One transaction; a second process finds the work done."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = conn.execute("PRAGMA user_version").fetchone()[0]
        if found < SCHEMA_VERSION:
            old = (
                found < 3
                and conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'objects'"
                ).fetchone()
            )
            if old:
                conn.execute("ALTER TABLE objects RENAME TO objects_v2")
            for statement in _SCHEMA:
                conn.execute(statement)
            if old:
                conn.execute(
                    "INSERT INTO objects (digest, size, data) "
                    "SELECT digest, size, data FROM objects_v2"
                )
                conn.execute("DROP TABLE objects_v2")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise

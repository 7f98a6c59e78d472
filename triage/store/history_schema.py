"""The history's schema: numbered migrations, applied in order, and the shadow tables of a read-only older file.

The schema is versioned with ``PRAGMA user_version`` and grows by numbered migrations
(:data:`MIGRATIONS`: append only; a released one is never edited). :func:`migrate` brings a
writable file up to :data:`SCHEMA_VERSION`, one transaction per migration; read-only, an older
file is read as it is, each table it lacks an empty TEMP table (:func:`shadow_missing`).
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from triage.store.history_faults import tx

log = logging.getLogger(__name__)

# Each entry: (version, statements). Append only; never edit a released one.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE tickets (
                id INTEGER PRIMARY KEY,
                ticket_id TEXT NOT NULL,
                sha256 TEXT NOT NULL UNIQUE,
                text TEXT NOT NULL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )""",
            """CREATE TABLE scores (
                id INTEGER PRIMARY KEY,
                ticket INTEGER NOT NULL REFERENCES tickets(id) ON DELETE CASCADE,
                status TEXT NOT NULL,
                model_name TEXT,
                model_sha256 TEXT,
                stand_in INTEGER,
                pack_name TEXT,
                pack_version TEXT,
                pack_hash TEXT,
                orderings TEXT,
                started_at REAL NOT NULL,
                finished_at REAL,
                prefill_ms REAL,
                total_ms REAL,
                summary TEXT,
                result_json TEXT,
                error TEXT
            )""",
        ],
    ),
    (
        2,
        [
            "CREATE INDEX scores_by_ticket ON scores(ticket, started_at)",
            "CREATE INDEX tickets_by_update ON tickets(updated_at)",
        ],
    ),
    (
        3,
        [
            # An agent's answer on one criterion of one ticket (triage.store.labels). Never updated: a changed
            # answer is a new row, and the newest row of a (ticket, criterion) is its label.
            """CREATE TABLE labels (
                id INTEGER PRIMARY KEY,
                ticket INTEGER NOT NULL REFERENCES tickets(id) ON DELETE CASCADE,
                score INTEGER REFERENCES scores(id) ON DELETE SET NULL,
                criterion TEXT NOT NULL,
                option TEXT NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('confirmation', 'correction')),
                shown_option TEXT,
                shown_probability REAL,
                shown_source TEXT,
                shown_head TEXT,
                pack_name TEXT,
                pack_hash TEXT,
                model_sha256 TEXT,
                prompt_format TEXT,
                origin TEXT NOT NULL,
                created_at REAL NOT NULL
            )""",
            "CREATE INDEX labels_by_ticket ON labels(ticket, criterion, id)",
            "CREATE INDEX labels_by_time ON labels(created_at, id)",
            # What a learned head reads, kept with the score that computed it (triage.store.features).
            """CREATE TABLE features (
                score INTEGER NOT NULL REFERENCES scores(id) ON DELETE CASCADE,
                criterion TEXT NOT NULL,
                model_sha256 TEXT NOT NULL,
                prompt_format TEXT NOT NULL,
                pack_hash TEXT NOT NULL,
                width INTEGER NOT NULL,
                data BLOB NOT NULL,
                raw BLOB NOT NULL,
                coverage REAL NOT NULL,
                PRIMARY KEY (score, criterion)
            )""",
        ],
    ),
    (
        4,
        [
            # A thread's messages, in order (triage.domain.thread). A plain ticket has none: its text is its one
            # customer message. The ticket row's text is the thread as the prompt writes it.
            """CREATE TABLE messages (
                ticket INTEGER NOT NULL REFERENCES tickets(id) ON DELETE CASCADE,
                position INTEGER NOT NULL,
                role TEXT NOT NULL CHECK (role IN ('customer', 'agent', 'note')),
                text TEXT NOT NULL,
                created_at REAL NOT NULL,
                PRIMARY KEY (ticket, position)
            )""",
            # How many of its ticket's messages a score scored (NULL, from before schema 4: one).
            "ALTER TABLE scores ADD COLUMN messages INTEGER",
        ],
    ),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def shadow_missing(conn: sqlite3.Connection, version: int) -> None:
    """Read-only, an older schema is read as it is: each table it does not have yet is an empty TEMP table."""
    for number, statements in MIGRATIONS:
        if number > version:
            for sql in statements:
                if sql.lstrip().startswith("CREATE TABLE"):
                    conn.execute(sql.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))


def migrate(conn: sqlite3.Connection, version: int, path: Path | None) -> None:
    """Apply every migration above ``version``, each in its own transaction.

    The version is read again inside each migration's write transaction: another process (or connection)
    that opened the same new file at the same moment may have applied it first, and is then not repeated.
    """
    for number, statements in MIGRATIONS:
        if number <= version:
            continue
        with tx(conn, path):
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) >= number:
                continue  # applied by another connection since ``version`` was read
            for sql in statements:
                conn.execute(sql)
            conn.execute(f"PRAGMA user_version = {int(number)}")
        log.info("history migrated to schema %d", number)

"""The history of scored tickets, in SQLite.

One file, ``history.sqlite3`` in the user data dir (:attr:`UserDirs.history_db`),
in WAL mode so a reader never blocks the app and a crash never tears a page.
A ticket is saved when it is submitted and its result when scoring ends, each
in its own transaction: a crash loses at most the unfinished score, never
earlier history. Re-scoring a ticket adds a score; earlier ones are kept.

A ticket may be a thread (:mod:`triage.domain.thread`): its messages are kept in
order (table ``messages``, migration 4) and it stays **one** ticket row as it grows:
each new message is saved (its own transaction) into the same row, whose ``text``
becomes the thread as the prompt writes it. A plain ticket is found by the hash of
its text; a thread's row is found by its row id (or by its ticket id and first
message), and its ``sha256`` column holds ``thread:<row>`` instead, so a pasted text
never lands on a thread. Each score records how many of the messages it scored.

The schema is versioned with ``PRAGMA user_version`` and grows by numbered
migrations (:data:`MIGRATIONS`). A file that is not a database, is damaged or
cannot be opened is never written to: it is moved aside as
``history.sqlite3.bad-<time>`` (with its ``-wal``/``-shm``) and a new one is
started; :attr:`History.notice` says so. A history written by a newer triage,
or one that another process holds locked, is left alone and this session keeps
its history in memory instead.

This module is core: it must not import Textual.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triage.domain.result import TicketResult, ticket_result_from_dict
from triage.domain.thread import Message
from triage.domain.ticket import Ticket
from triage.store.files import move_aside

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

STATUSES = ("running", "done", "cancelled", "failed")
PREVIEW_CHARS = 200

# SQLite primary result codes (sqlite3 exposes the extended code; the low byte is the primary).
_CORRUPT, _NOTADB = 11, 26
_BUSY, _LOCKED = 5, 6


class HistoryUnavailable(Exception):
    """The history file must be left alone (newer schema, or locked by another process)."""


@dataclass(frozen=True)
class HistoryEntry:
    """One row of the history list: a score of a ticket, or a ticket never scored."""

    ticket_row: int
    score_id: int | None
    ticket_id: str
    preview: str  # the ticket's first characters, one line
    status: str  # running (or interrupted), done, cancelled, failed, or "" when never scored
    model_name: str | None
    pack: str | None  # "name vVERSION"
    summary: str | None
    total_ms: float | None
    when: float  # when the score started (or the ticket was saved)
    messages: int = 1  # the ticket's messages now (a thread grows)
    scored: int = 1  # of them, how many this score scored


@dataclass(frozen=True)
class SavedScore:
    """A ticket from history with one of its scores (``result`` None when unfinished)."""

    ticket_row: int
    score_id: int | None
    ticket_id: str
    text: str
    status: str
    result: TicketResult | None
    error: str | None = None
    messages: tuple[Message, ...] = ()  # a thread's messages, all of them (() for a plain ticket)
    scored: int = 1  # how many of them this score scored

    @property
    def is_thread(self) -> bool:
        """Whether the ticket is a thread (its messages are kept one by one)."""
        return bool(self.messages)


class History:
    """The SQLite history. Use :meth:`open`; one instance per thread.

    Attributes:
        path: the database file, or None when history is kept in memory.
        notice: a one-line message for the user when the file had to be moved
            aside or could not be used, else None.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path | None, notice: str | None = None) -> None:
        self._conn = conn
        self.path = path
        self.notice = notice

    # -- opening --------------------------------------------------------------------
    @classmethod
    def open(cls, path: Path | None = None) -> History:
        """Open (or create) the history at ``path`` (default: the user data dir).

        Never raises for a bad file: a damaged or unreadable file is moved aside
        and a new one started; one that must be left alone gives an in-memory
        history. Either way :attr:`notice` tells the user.
        """
        if path is None:
            from triage.store.paths import user_dirs

            path = user_dirs().history_db
        try:
            return cls(_connect(path), path)
        except HistoryUnavailable as exc:
            log.warning("history %s left alone: %s", path, exc)
            return cls(_connect(None), None, f"history {path} {exc}; this session's history is kept in memory only")
        except (sqlite3.DatabaseError, OSError) as exc:
            if is_busy(exc):
                log.warning("history %s is busy: %s", path, exc)
                return cls(
                    _connect(None),
                    None,
                    f"history {path} is locked by another process; this session's history is kept in memory only",
                )
            reason = describe_error(exc)
        try:
            aside = move_aside(path)
        except OSError as exc:
            log.error("history %s is unusable (%s) and cannot be moved aside: %s", path, reason, exc)
            return cls(
                _connect(None),
                None,
                f"history {path} is unusable ({reason}) and could not be moved aside "
                f"({exc.strerror}); this session's history is kept in memory only",
            )
        if aside is None:  # nothing was there: the folder itself is the problem
            log.error("history %s cannot be created (%s)", path, reason)
            notice = f"history {path} cannot be created ({reason}); this session's history is kept in memory only"
            return cls(_connect(None), None, notice)
        log.error("history %s was unusable (%s); moved aside to %s", path, reason, aside)
        notice = f"history {path.name} was unusable ({reason}); it was moved aside to {aside} and a new history started"
        try:
            return cls(_connect(path), path, notice)
        except (sqlite3.DatabaseError, OSError, HistoryUnavailable) as exc:
            return cls(
                _connect(None),
                None,
                f"{notice}, but the new one failed too ({describe_error(exc)}); "
                "this session's history is kept in memory only",
            )

    @classmethod
    def open_writable(cls, path: Path | None = None) -> History:
        """:meth:`open`, for a command that must write to the file: an in-memory stand-in is an error.

        Raises:
            TriageError: the file cannot be used (newer schema, locked, unusable); nothing was written.
        """
        from triage.errors import TriageError

        history = cls.open(path)
        if history.path is None:
            history.close()
            raise TriageError(
                f"the history cannot be used: {history.notice}",
                hint="close the other triage, or move the file aside",
                exit_code=2,
            )
        return history

    def close(self) -> None:
        """Close the database (pending work is already committed)."""
        self._conn.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction on this history (``BEGIN IMMEDIATE``): committed on success, rolled back on error.

        For the modules that keep more in the same file (labels, features).
        """
        with _tx(self._conn):
            yield self._conn

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection, for reads by the modules that keep more in the same file."""
        return self._conn

    @property
    def schema_version(self) -> int:
        """The database's ``PRAGMA user_version``."""
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    # -- writing --------------------------------------------------------------------
    def save_ticket(self, ticket: Ticket, *, row: int | None = None) -> int:
        """Save a submitted ticket in one transaction; returns its row id.

        A plain ticket is saved once per distinct text (``row`` is not used). A thread
        (``ticket.messages``) is saved into ``row`` when given (the thread on screen, grown
        by a reply), else into the newest row with its ticket id and first message, else
        into a new row; its messages are written one by one (a new one inserted, a changed
        one updated).
        """
        now = time.time()
        if not ticket.messages:
            with _tx(self._conn):
                found = self._conn.execute("SELECT id FROM tickets WHERE sha256 = ?", (ticket.sha256,)).fetchone()
                if found is not None:
                    self._conn.execute("UPDATE tickets SET updated_at = ? WHERE id = ?", (now, found[0]))
                    return int(found[0])
                cur = self._conn.execute(
                    "INSERT INTO tickets (ticket_id, sha256, text, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                    (ticket.id, ticket.sha256, ticket.text, now, now),
                )
                return int(cur.lastrowid or 0)
        with _tx(self._conn):
            target = row if row is not None else self._thread_row(ticket)
            if target is None:
                cur = self._conn.execute(
                    "INSERT INTO tickets (ticket_id, sha256, text, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                    (ticket.id, f"thread:new:{time.time_ns()}", ticket.text, now, now),
                )
                target = int(cur.lastrowid or 0)
            self._write_thread(target, ticket.thread, now)
            self._conn.execute(
                "UPDATE tickets SET text = ?, sha256 = ?, updated_at = ? WHERE id = ?",
                (ticket.text, f"thread:{target}", now, target),
            )
            return target

    def _thread_row(self, ticket: Ticket) -> int | None:
        """The newest row with this ticket id whose first message is the ticket's first message."""
        first = ticket.thread[0]
        for (rid,) in self._conn.execute(
            "SELECT id FROM tickets WHERE ticket_id = ? ORDER BY updated_at DESC, id DESC", (ticket.id,)
        ).fetchall():
            stored = self._thread(int(rid))
            if stored and stored[0] == first:
                return int(rid)
        return None

    def _write_thread(self, ticket_row: int, messages: tuple[Message, ...], now: float) -> None:
        stored = {
            pos: Message(role, text)
            for pos, role, text in self._conn.execute(
                "SELECT position, role, text FROM messages WHERE ticket = ?", (ticket_row,)
            ).fetchall()
        }
        if not stored:  # a plain ticket becoming a thread: its text is its first message
            old = self._conn.execute("SELECT text FROM tickets WHERE id = ?", (ticket_row,)).fetchone()
            if old is None:
                raise KeyError(ticket_row)
            stored = {1: Message("customer", old[0])}
            if messages and messages[0] == stored[1]:
                self._conn.execute(
                    "INSERT INTO messages (ticket, position, role, text, created_at) VALUES (?, 1, ?, ?, ?)",
                    (ticket_row, messages[0].role, messages[0].text, now),
                )
            else:
                stored = {}
        for pos, m in enumerate(messages, 1):
            if pos not in stored:
                self._conn.execute(
                    "INSERT INTO messages (ticket, position, role, text, created_at) VALUES (?, ?, ?, ?, ?)",
                    (ticket_row, pos, m.role, m.text, now),
                )
            elif stored[pos] != m:
                self._conn.execute(
                    "UPDATE messages SET role = ?, text = ?, created_at = ? WHERE ticket = ? AND position = ?",
                    (m.role, m.text, now, ticket_row, pos),
                )
        self._conn.execute("DELETE FROM messages WHERE ticket = ? AND position > ?", (ticket_row, len(messages)))

    def _thread(self, ticket_row: int) -> tuple[Message, ...]:
        """A ticket's messages, oldest first: a thread's as kept, a plain ticket's one (its text)."""
        rows = self._conn.execute(
            "SELECT role, text FROM messages WHERE ticket = ? ORDER BY position", (ticket_row,)
        ).fetchall()
        if rows:
            return tuple(Message(r, t) for r, t in rows)
        text = self._conn.execute("SELECT text FROM tickets WHERE id = ?", (ticket_row,)).fetchone()
        return (Message("customer", text[0]),) if text is not None else ()

    def thread(self, ticket_row: int) -> tuple[Message, ...]:
        """A ticket's messages, oldest first (a plain ticket: its text as one customer message)."""
        return self._thread(ticket_row)

    def start_score(
        self, ticket_row: int, *, model: dict[str, Any], pack: dict[str, Any], orderings: str, messages: int = 1
    ) -> int:
        """Record that scoring of a saved ticket (its first ``messages`` messages) has started; returns the score id."""
        with _tx(self._conn):
            cur = self._conn.execute(
                """INSERT INTO scores (ticket, status, model_name, model_sha256, stand_in, pack_name, pack_version,
                                      pack_hash, orderings, started_at, messages)
                   VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    ticket_row,
                    model.get("name"),
                    model.get("sha256"),
                    int(bool(model.get("stand_in"))),
                    pack.get("name"),
                    str(pack.get("version", "")),
                    pack.get("hash"),
                    orderings,
                    time.time(),
                    int(messages),
                ),
            )
            return int(cur.lastrowid or 0)

    def finish_score(self, score_id: int, result: TicketResult) -> None:
        """Store a finished (or cancelled, ``complete=False``) result as ``to_dict()`` JSON."""
        import json

        status = "done" if result.complete else "cancelled"
        with _tx(self._conn):
            self._conn.execute(
                """UPDATE scores SET status = ?, finished_at = ?, prefill_ms = ?, total_ms = ?, summary = ?,
                                     result_json = ?, model_name = ?, model_sha256 = ?, pack_hash = ?
                   WHERE id = ?""",
                (
                    status,
                    time.time(),
                    result.timing.prefill_ms,
                    result.timing.total_ms,
                    result.summary(),
                    json.dumps(result.to_dict(), ensure_ascii=False),
                    result.model.get("name"),
                    result.model.get("sha256"),
                    result.pack.get("hash"),
                    score_id,
                ),
            )

    def cancel_score(self, score_id: int) -> None:
        """Record that a score was cancelled before it computed anything (no result)."""
        with _tx(self._conn):
            self._conn.execute(
                "UPDATE scores SET status = 'cancelled', finished_at = ? WHERE id = ? AND status = 'running'",
                (time.time(), score_id),
            )

    def fail_score(self, score_id: int, error: str) -> None:
        """Record that a score stopped with an error."""
        with _tx(self._conn):
            self._conn.execute(
                "UPDATE scores SET status = 'failed', finished_at = ?, error = ? WHERE id = ?",
                (time.time(), error, score_id),
            )

    # -- reading --------------------------------------------------------------------
    def search(self, query: str = "", *, limit: int = 200) -> list[HistoryEntry]:
        """Newest first; every word of ``query`` must occur in the ticket, its id, summary or model."""
        where, params = [], []
        for word in query.split():
            pattern = "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            where.append(
                "(t.text LIKE ? ESCAPE '\\' OR t.ticket_id LIKE ? ESCAPE '\\' "
                "OR s.summary LIKE ? ESCAPE '\\' OR s.model_name LIKE ? ESCAPE '\\')"
            )
            params += [pattern] * 4
        sql = f"""
            SELECT t.id, s.id, t.ticket_id, substr(t.text, 1, {PREVIEW_CHARS}), s.status, s.model_name,
                   s.pack_name, s.pack_version, s.summary, s.total_ms, coalesce(s.started_at, t.updated_at),
                   coalesce(s.messages, 1), (SELECT count(*) FROM messages m WHERE m.ticket = t.id)
            FROM tickets t LEFT JOIN scores s ON s.ticket = t.id
            {"WHERE " + " AND ".join(where) if where else ""}
            ORDER BY coalesce(s.started_at, t.updated_at) DESC, s.id DESC
            LIMIT ?"""
        rows = self._conn.execute(sql, (*params, limit)).fetchall()
        return [
            HistoryEntry(
                ticket_row=r[0],
                score_id=r[1],
                ticket_id=r[2],
                preview=" ".join(r[3].split()),
                status=r[4] or "",
                model_name=r[5],
                pack=f"{r[6]} v{r[7]}" if r[6] else None,
                summary=r[8],
                total_ms=r[9],
                when=r[10],
                messages=max(1, r[12]),
                scored=r[11],
            )
            for r in rows
        ]

    def load(self, score_id: int) -> SavedScore:
        """A score with its ticket text and result (KeyError when absent)."""
        row = self._conn.execute(
            """SELECT t.id, s.id, t.ticket_id, t.text, s.status, s.result_json, s.error, coalesce(s.messages, 1)
               FROM scores s JOIN tickets t ON t.id = s.ticket WHERE s.id = ?""",
            (score_id,),
        ).fetchone()
        if row is None:
            raise KeyError(score_id)
        return self._saved(row)

    def load_ticket(self, ticket_row: int) -> SavedScore:
        """A ticket with its newest score, if any (KeyError when absent)."""
        row = self._conn.execute(
            """SELECT t.id, s.id, t.ticket_id, t.text, s.status, s.result_json, s.error, coalesce(s.messages, 1)
               FROM tickets t LEFT JOIN scores s ON s.ticket = t.id WHERE t.id = ?
               ORDER BY s.started_at DESC, s.id DESC LIMIT 1""",
            (ticket_row,),
        ).fetchone()
        if row is None:
            raise KeyError(ticket_row)
        return self._saved(row)

    def scored_messages(self, score_id: int) -> int:
        """How many of its ticket's messages a score scored (1 for a plain ticket; KeyError when absent)."""
        row = self._conn.execute("SELECT coalesce(messages, 1) FROM scores WHERE id = ?", (score_id,)).fetchone()
        if row is None:
            raise KeyError(score_id)
        return int(row[0])

    def _saved(self, row: tuple[Any, ...]) -> SavedScore:
        kept = self._conn.execute("SELECT count(*) FROM messages WHERE ticket = ?", (row[0],)).fetchone()[0]
        return SavedScore(
            ticket_row=row[0],
            score_id=row[1],
            ticket_id=row[2],
            text=row[3],
            status=row[4] or "",
            result=_result(row[5]),
            error=row[6],
            messages=self._thread(row[0]) if kept else (),
            scored=int(row[7]),
        )

    def results(self, ticket_row: int) -> list[TicketResult]:
        """Every stored result of a ticket, oldest first."""
        rows = self._conn.execute(
            "SELECT result_json FROM scores WHERE ticket = ? AND result_json IS NOT NULL ORDER BY started_at, id",
            (ticket_row,),
        ).fetchall()
        return [r for r in (_result(j) for (j,) in rows) if r is not None]


# -- helpers --------------------------------------------------------------------------------


def _result(raw: str | None) -> TicketResult | None:
    import json

    if not raw:
        return None
    try:
        return ticket_result_from_dict(json.loads(raw))
    except (ValueError, TypeError, KeyError) as exc:  # a result from another schema stays readable as text only
        log.warning("stored result cannot be read: %s", exc)
        return None


@contextmanager
def _tx(conn: sqlite3.Connection) -> Iterator[None]:
    """One transaction: committed on success, rolled back on error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _connect(path: Path | None) -> sqlite3.Connection:
    """Open, check and migrate; ``None`` gives an in-memory database.

    Raises:
        sqlite3.DatabaseError: not a database, damaged, or cannot be opened.
        HistoryUnavailable: written by a newer triage.
    """
    if path is not None:
        if path.is_dir():
            raise sqlite3.DatabaseError(f"{path} is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path) if path else ":memory:", timeout=5.0, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        # Read-only checks first, so a file we must leave alone is not touched (WAL rewrites the header).
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])  # fails here for a non-database
        if version > SCHEMA_VERSION:
            raise HistoryUnavailable(
                f"was written by a newer triage (schema {version}, this one knows {SCHEMA_VERSION})"
            )
        if path is not None:
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {check}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable across app crashes
        _migrate(conn, version)
    except BaseException:
        conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    for number, statements in MIGRATIONS:
        if number <= version:
            continue
        with _tx(conn):
            for sql in statements:
                conn.execute(sql)
            conn.execute(f"PRAGMA user_version = {int(number)}")
        log.info("history migrated to schema %d", number)


def is_busy(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in (_BUSY, _LOCKED)


def describe_error(exc: BaseException) -> str:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) == _NOTADB:
        return "not a database file"
    if code is not None and (code & 0xFF) == _CORRUPT:
        return "the database is damaged"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)

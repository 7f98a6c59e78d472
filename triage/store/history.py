"""The history of scored tickets, in SQLite.

One file, ``history.sqlite3`` in the user data dir (:attr:`UserDirs.history_db`),
in WAL mode so a reader never blocks the app and a crash never tears a page.
A ticket is saved when it is submitted and its result when scoring ends, each
in its own transaction: a crash loses at most the unfinished score, never
earlier history. Re-scoring a ticket adds a score; earlier ones are kept.

A ticket may be a thread (:mod:`triage.domain.thread`): its messages are kept in
order (table ``messages``, migration 4) and it stays **one** ticket row as it grows:
each new message is saved (its own transaction) into the same row, whose ``text``
becomes the thread as the prompt writes it. A plain ticket is found by its id and the
hash of its text (the same text under another id is a row of its own, so each id finds its
ticket); a thread's row is found by its row id (or by its ticket id and first message), and
its ``sha256`` column holds ``thread:<row>`` instead, so a pasted text never lands on a
thread. Each score records how many of the messages it scored.

The schema is versioned with ``PRAGMA user_version`` and grows by numbered
migrations (:data:`MIGRATIONS`).

Only a file that really is a triage history is ever used, changed or moved. A path that is
a folder, a device, a FIFO, or a file that is not SQLite (or SQLite without triage's tables)
is refused (:class:`NotAHistory`) and left as it is. A triage history that is damaged (its
header says SQLite and a triage schema, its pages fail SQLite's check) is moved aside as
``history.sqlite3.bad-<time>`` (with its ``-wal``/``-shm``) by a command that writes the
history, and a new one is started; :attr:`History.notice` names both files. Every other
fault is a :class:`HistoryFault` with a specific message: locked by another process
(:class:`HistoryLocked`), a read-only file or folder (:class:`HistoryReadOnly`), a full disk
(:class:`HistoryFull`), a newer schema (:class:`HistoryNewer`), damaged
(:class:`HistoryDamaged`). :meth:`History.open_writable` and :meth:`History.open_readonly`
raise them; :meth:`History.open` (the app) never raises and keeps the session's history in
memory instead, saying why. Read-only uses (``stats``, ``label --export``, ``learn
--history``) open the file with SQLite's ``mode=ro``: a read-only file works for them.

This module is core: it must not import Textual.
"""

from __future__ import annotations

import hashlib
import logging
import os
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
from triage.errors import TriageError
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
_PERM, _READONLY, _IOERR, _FULL, _CANTOPEN = 3, 8, 10, 13, 14
_READONLY_DIRECTORY = _READONLY | (6 << 8)
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_S = 5.0  # how long a command waits for another process's write lock before it says "locked"


class HistoryFault(TriageError):
    """The history cannot be used for what was asked; nothing in it was changed.

    ``kind`` names the fault for callers that map it (``triage serve`` answers ``locked`` with
    409): ``locked``, ``read-only``, ``full``, ``newer``, ``damaged``, ``not-a-history`` or
    ``unusable``. ``path`` is the history file.
    """

    kind = "unusable"
    code = 1

    def __init__(self, path: Path | None, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, exit_code=self.code)
        self.path = path


class HistoryLocked(HistoryFault):
    """Another process holds the history's write lock (or an exclusive lock) longer than we wait."""

    kind = "locked"


class HistoryReadOnly(HistoryFault):
    """The history file (or its folder) cannot be written by this user or on this disk."""

    kind = "read-only"


class HistoryFull(HistoryFault):
    """The disk holding the history is full."""

    kind = "full"


class HistoryNewer(HistoryFault):
    """The history was written by a newer triage: left as it is."""

    kind = "newer"
    code = 2


class HistoryDamaged(HistoryFault):
    """The history fails SQLite's checks. ``movable``: it is recognisably triage's, so a writer may move it aside."""

    kind = "damaged"

    def __init__(self, path: Path | None, message: str, *, reason: str, movable: bool, hint: str | None = None):
        super().__init__(path, message, hint=hint)
        self.reason = reason
        self.movable = movable


class NotAHistory(HistoryFault):
    """The path is not a triage history (a folder, a device, a text file, another program's database)."""

    kind = "not-a-history"
    code = 2


HistoryUnavailable = HistoryFault  # the name before HistoryFault had kinds


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
        """Open (or create) the history at ``path`` (default: the user data dir), for the app.

        Never raises for a bad file: a damaged triage history is moved aside and a new one
        started; anything else that cannot be used (see :class:`HistoryFault`) gives an
        in-memory history. Either way :attr:`notice` tells the user.
        """
        try:
            return cls.open_writable(path)
        except HistoryFault as exc:
            log.warning("history left alone: %s", exc.message)
            return cls(_connect(None, "rw"), None, f"{exc.message}; this session's history is kept in memory only")

    @classmethod
    def open_writable(cls, path: Path | None = None) -> History:
        """Open (or create) the history for a command that writes to it.

        A damaged triage history is moved aside (its ``-wal``/``-shm`` too) and a new one
        started; :attr:`notice` then names both files. Nothing else is ever moved.

        Raises:
            HistoryFault: a subclass saying what is wrong (locked, read-only, full disk, newer
                schema, not a history, damaged and not movable); nothing was changed.
        """
        path = history_path(path)
        real = check_history_path(path)
        try:
            return cls(_connect(real, "rw"), real)
        except HistoryDamaged as exc:
            if not exc.movable:
                raise
            damaged = exc
        try:
            aside = move_aside(real)
        except OSError as exc:
            raise HistoryFault(
                real,
                f"the history {real} is damaged ({damaged.reason}) and cannot be moved aside "
                f"({exc.strerror or exc}); nothing was changed",
                hint=f"move it away yourself (mv {real} {real}.bad), then run again",
            ) from None
        log.error("history %s was damaged (%s); moved aside to %s", real, damaged.reason, aside)
        notice = f"history {real} was damaged ({damaged.reason}); it was moved aside to {aside} and a new one started"
        try:
            return cls(_connect(real, "rw"), real, notice)
        except HistoryFault as exc:
            exc.message = f"{notice}, but the new one cannot be used: {exc.message}"
            exc.args = (exc.message,)
            raise

    @classmethod
    def open_readonly(cls, path: Path | None = None, *, must_exist: bool = False) -> History:
        """Open the history only to read it (SQLite ``mode=ro``): nothing is created, migrated or moved.

        A read-only file (or folder) works. A history that does not exist yet is an empty
        in-memory one with a :attr:`notice`, unless ``must_exist`` (the user named the file).
        A history of an older schema is read as it is (tables it does not have yet read as empty).

        Raises:
            HistoryFault: locked, newer schema, damaged, not a history, cannot be read; or
                ``must_exist`` and there is no file.
        """
        shown = history_path(path)
        real = check_history_path(shown)
        if not real.exists():
            if must_exist:
                raise NotAHistory(
                    shown, f"there is no history {shown}", hint="name the history file triage keeps (--history-file)"
                )
            return cls(_connect(None, "rw"), None, f"there is no history at {shown} yet")
        return cls(_connect(real, "ro"), real)

    def close(self) -> None:
        """Close the database (pending work is already committed)."""
        self._conn.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Reads (or writes) on :attr:`conn` whose SQLite errors become :class:`HistoryFault` messages."""
        try:
            yield
        except sqlite3.Error as exc:
            raise fault_of(exc, self.path) from exc

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction on this history (``BEGIN IMMEDIATE``): committed on success, rolled back on error.

        For the modules that keep more in the same file (labels, features). A SQLite error
        (locked, read-only, full disk) is raised as a :class:`HistoryFault`.
        """
        with _tx(self._conn, self.path):
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
            # One row per (id, text): the first id a text was kept under keys it by the text's hash; the
            # same text under another id is a row of its own (keyed "<hash>:<id hash>"), so that every id
            # the user gave finds its ticket (`triage label ID`).
            alias = f"{ticket.sha256}:{hashlib.sha256(ticket.id.encode('utf-8')).hexdigest()[:16]}"
            with _tx(self._conn, self.path):
                found = None
                for rid, tid in self._conn.execute(
                    "SELECT id, ticket_id FROM tickets WHERE sha256 IN (?, ?)", (ticket.sha256, alias)
                ).fetchall():
                    if tid == ticket.id:
                        found = rid
                if found is not None:
                    self._conn.execute("UPDATE tickets SET updated_at = ? WHERE id = ?", (now, found))
                    return int(found)
                taken = self._conn.execute("SELECT 1 FROM tickets WHERE sha256 = ?", (ticket.sha256,)).fetchone()
                cur = self._conn.execute(
                    "INSERT INTO tickets (ticket_id, sha256, text, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                    (ticket.id, alias if taken else ticket.sha256, ticket.text, now, now),
                )
                return int(cur.lastrowid or 0)
        with _tx(self._conn, self.path):
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
        with _tx(self._conn, self.path):
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
        with _tx(self._conn, self.path):
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
        with _tx(self._conn, self.path):
            self._conn.execute(
                "UPDATE scores SET status = 'cancelled', finished_at = ? WHERE id = ? AND status = 'running'",
                (time.time(), score_id),
            )

    def fail_score(self, score_id: int, error: str) -> None:
        """Record that a score stopped with an error."""
        with _tx(self._conn, self.path):
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
def _tx(conn: sqlite3.Connection, path: Path | None = None) -> Iterator[None]:
    """One transaction: committed on success, rolled back on error; SQLite errors as :class:`HistoryFault`."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise fault_of(exc, path) from exc
    try:
        yield
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:  # the error itself may have ended the transaction
                pass
        if isinstance(exc, sqlite3.Error):
            raise fault_of(exc, path) from exc
        raise


def check_history(path: Path | None = None) -> str | None:
    """Open the history for writing once and close it: for a server's start-up (``triage serve``).

    A damaged triage history is moved aside here, and the notice to print is returned (it names
    both files); None when there was nothing to say.

    Raises:
        HistoryFault: the history cannot be used (``kind``: ``locked``, ``read-only``, ``full``,
            ``newer``, ``damaged``, ``not-a-history``, ``unusable``); nothing was changed.
    """
    with History.open_writable(path) as history:
        return history.notice


def history_path(path: Path | None = None) -> Path:
    """The history file: ``path`` (``~`` expanded), else the user data dir's."""
    if path is not None:
        return Path(path).expanduser()
    from triage.store.paths import user_dirs

    return user_dirs().history_db


def check_history_path(path: Path) -> Path:
    """The real file behind ``path`` (symlinks followed), once it is a history or nothing yet.

    Raises:
        NotAHistory: a folder, a device, a FIFO or socket, or a file that is not SQLite. An
            empty file is taken (SQLite makes it a database; nothing in it is lost).
    """
    from triage.store.outputs import describe_kind, path_kind

    kind = path_kind(path)
    real = Path(os.path.realpath(path))
    if kind in ("missing", "dangling"):
        return real
    if kind != "file":
        raise NotAHistory(
            path,
            f"{path} is {describe_kind(kind)}, not a triage history; triage leaves it as it is",
            hint="name the history file (a new name starts a new history)",
        )
    try:
        with open(real, "rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        raise HistoryFault(path, f"the history {path} cannot be read ({exc.strerror or exc})") from None
    if head and not head.startswith(SQLITE_MAGIC):
        raise NotAHistory(
            path,
            f"{path} is not a triage history (it is not a SQLite database); triage leaves it as it is",
            hint="name the history file (a new name starts a new history)",
        )
    return real


def _header_version(path: Path) -> int:
    """``user_version`` as the file's header holds it (0 when unreadable)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
    except OSError:
        return 0
    return int.from_bytes(head[60:64], "big") if head.startswith(SQLITE_MAGIC) and len(head) >= 64 else 0


def _connect(path: Path | None, mode: str) -> sqlite3.Connection:
    """Open, check and (``rw``) migrate; ``None`` gives an in-memory database.

    ``mode``: ``rw`` (created if missing; a write is tried, so a read-only or locked file is
    found now) or ``ro`` (SQLite ``mode=ro``; older schemas read as they are).

    Raises:
        HistoryFault: a subclass saying what is wrong.
    """
    if path is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn, 0, None)
        return conn
    if mode == "rw":
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryFault(
                path,
                f"the history {path} cannot be created ({exc.strerror or exc})",
                hint="name a history file in a folder you may write to (--history-file)",
            ) from None
    try:
        return _open_checked(path, mode, immutable=False)
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        side = path.with_name(path.name + "-wal")
        if mode == "ro" and code in (_READONLY_DIRECTORY, _CANTOPEN) and not side.exists():
            # a WAL history in a folder this user cannot write (no -shm can be made): with no -wal
            # beside it, the file itself holds every committed change and is read as it stands
            try:
                return _open_checked(path, mode, immutable=True)
            except sqlite3.Error as again:
                raise fault_of(again, path) from again
        raise fault_of(exc, path) from exc


def _open_checked(path: Path, mode: str, *, immutable: bool) -> sqlite3.Connection:
    from urllib.parse import quote

    if mode == "ro":
        uri = f"file:{quote(str(path))}?mode=ro" + ("&immutable=1" if immutable else "")
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    else:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        # Read-only checks first, so a file we must leave alone is not touched (WAL rewrites the header).
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])  # fails here for a non-database
        if version > SCHEMA_VERSION:
            raise HistoryNewer(
                path,
                f"the history {path} was written by a newer triage (schema {version}, this one knows "
                f"{SCHEMA_VERSION}); it was left as it is",
                hint="use that newer triage, or name another history file (--history-file)",
            )
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "tickets" not in tables:
            raise NotAHistory(
                path,
                f"{path} is a SQLite database but not a triage history (it has no tickets table); "
                "triage leaves it as it is",
                hint="name the history file (a new name starts a new history)",
            )
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise sqlite3.DatabaseError(f"integrity check failed: {check}")
        if mode == "rw":
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable across app crashes
            _migrate(conn, version, path)
            try:  # a write, rolled back: a read-only file, a read-only folder or a held lock is found now
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        else:
            _shadow_missing(conn, version)
    except BaseException:  # a SQLite error is made a HistoryFault by the caller (after a read-only retry)
        conn.close()
        raise
    return conn


def _shadow_missing(conn: sqlite3.Connection, version: int) -> None:
    """Read-only, an older schema is read as it is: each table it does not have yet is an empty TEMP table."""
    for number, statements in MIGRATIONS:
        if number > version:
            for sql in statements:
                if sql.lstrip().startswith("CREATE TABLE"):
                    conn.execute(sql.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))


def _migrate(conn: sqlite3.Connection, version: int, path: Path | None) -> None:
    for number, statements in MIGRATIONS:
        if number <= version:
            continue
        with _tx(conn, path):
            for sql in statements:
                conn.execute(sql)
            conn.execute(f"PRAGMA user_version = {int(number)}")
        log.info("history migrated to schema %d", number)


def fault_of(exc: BaseException, path: Path | None) -> HistoryFault:
    """The :class:`HistoryFault` a SQLite (or OS) error on the history at ``path`` is."""
    if isinstance(exc, HistoryFault):
        return exc
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    errno_ = getattr(exc, "errno", None)
    import errno as errnos

    if primary in (_BUSY, _LOCKED):
        return HistoryLocked(
            path,
            f"the history {path} is locked by another process (another triage is writing it); nothing was changed",
            hint="wait for it to finish, or close the other triage (the app, triage serve), then run again",
        )
    if primary == _FULL or errno_ in (errnos.ENOSPC, errnos.EDQUOT):
        return HistoryFull(
            path,
            f"the history {path} cannot be written: the disk is full; nothing was changed",
            hint="free some space on that disk, then run again",
        )
    if primary in (_READONLY, _PERM) or errno_ in (errnos.EACCES, errnos.EPERM, errnos.EROFS):
        where = "its folder cannot be written" if code == _READONLY_DIRECTORY else "the file is read-only"
        return HistoryReadOnly(
            path,
            f"the history {path} cannot be written: {where}; nothing was changed",
            hint=f"make it writable (chmod u+w {path}), or name another history file (--history-file); "
            "triage stats, label --export and learn --history only read it and work as it is",
        )
    if primary in (_CORRUPT, _NOTADB) or "integrity check failed" in str(exc):
        reason = describe_error(exc)
        movable = path is not None and _header_version(path) >= 1
        if movable:
            message = f"the history {path} is damaged ({reason}); nothing was read"
            hint = (
                "a command that writes the history (triage label, score --history, the app) moves it "
                "aside and starts a new one; or restore it from a backup"
            )
        else:
            message = (
                f"{path} is damaged ({reason}) and is not recognisably a triage history; triage leaves it as it is"
            )
            hint = "name the history file (a new name starts a new history)"
        return HistoryDamaged(path, message, reason=reason, movable=movable, hint=hint)
    if primary == _CANTOPEN:
        return HistoryFault(
            path,
            f"the history {path} cannot be opened ({describe_error(exc)})",
            hint="check that the file and its folder may be read (and written, for commands that store)",
        )
    return HistoryFault(path, f"the history {path} cannot be used ({describe_error(exc)})")


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

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

The schema and its migrations are :mod:`triage.store.history_schema`; finding and opening the
file, :mod:`triage.store.history_open`; what goes wrong, :mod:`triage.store.history_faults`.

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
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from triage.domain.result import TicketResult, ticket_result_from_dict
from triage.domain.thread import Message
from triage.domain.ticket import Ticket
from triage.store.files import move_aside
from triage.store.history_faults import HistoryDamaged, HistoryFault, NotAHistory, fault_of, tx
from triage.store.history_open import check_history_path, connect, history_path

log = logging.getLogger(__name__)

STATUSES = ("running", "done", "cancelled", "failed")
PREVIEW_CHARS = 200


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
    when: object  # when the score started (or the ticket was saved), as stored: shown through triage.store.times
    messages: int = 1  # the ticket's messages now (a thread grows)
    scored: int = 1  # of them, how many this score scored


# A ticket and one of its scores as load_ticket and load_score select them, by the columns' declared types:
# ticket row, score id (None: never scored), ticket id, text, status, result_json, error, messages scored.
_ScoreRow = tuple[int, int | None, str, str, str | None, str | None, str | None, int]


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
            return cls(connect(None, "rw"), None, f"{exc.message}; this session's history is kept in memory only")

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
            return cls(connect(real, "rw"), real)
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
            return cls(connect(real, "rw"), real, notice)
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
            return cls(connect(None, "rw"), None, f"there is no history at {shown} yet")
        return cls(connect(real, "ro"), real)

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
        with tx(self._conn, self.path):
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
            with tx(self._conn, self.path):
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
        with tx(self._conn, self.path):
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
        self,
        ticket_row: int,
        *,
        model: Mapping[str, object],
        pack: Mapping[str, object],
        orderings: str,
        messages: int = 1,
    ) -> int:
        """Record that scoring of a saved ticket (its first ``messages`` messages) has started; returns the score id."""
        with tx(self._conn, self.path):
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
        with tx(self._conn, self.path):
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
        with tx(self._conn, self.path):
            self._conn.execute(
                "UPDATE scores SET status = 'cancelled', finished_at = ? WHERE id = ? AND status = 'running'",
                (time.time(), score_id),
            )

    def fail_score(self, score_id: int, error: str) -> None:
        """Record that a score stopped with an error."""
        with tx(self._conn, self.path):
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

    def _saved(self, row: _ScoreRow) -> SavedScore:
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

"""Finding and opening the history file: which file, whether it is a history, a checked connection.

:func:`check_history_path` refuses (and leaves) a path that is no regular file (a folder, a FIFO, a
device) without opening it; :func:`connect` opens it read-write (created if missing, migrated, a
write tried so that a read-only or locked file is found at once) or read-only (SQLite's
``mode=ro``; a WAL file in a folder this user cannot write is read as it stands), after a quick
integrity check. The file is only ever opened by SQLite (a file that is not SQLite is SQLite's
``NOTADB``: :class:`NotAHistory`). Errors are :class:`~triage.store.history_faults.HistoryFault` subclasses.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from triage.store.history_faults import (
    _CANTOPEN,
    _READONLY_DIRECTORY,
    HistoryFault,
    HistoryNewer,
    NotAHistory,
    fault_of,
    not_sqlite,
)
from triage.store.history_schema import SCHEMA_VERSION, migrate, shadow_missing
from triage.store.sqlite_file import SMALLEST_PAGE

BUSY_TIMEOUT_S = 5.0  # how long a command waits for another process's write lock before it says "locked"


def history_path(path: Path | None = None) -> Path:
    """The history file: ``path`` (``~`` expanded), else the user data dir's."""
    if path is not None:
        return Path(path).expanduser()
    from triage.store.paths import user_dirs

    return user_dirs().history_db


def check_history_path(path: Path) -> Path:
    """The real file behind ``path`` (symlinks followed), once it is a regular file or nothing yet.

    Only the path is looked at (``stat``), never the file opened: closing a plain descriptor of a
    history would drop this process's SQLite locks on it (:mod:`triage.store.sqlite_file`). A file
    that is not SQLite is found by SQLite itself when :func:`connect` reads its header (read-only,
    before anything is written) and refused as :class:`NotAHistory`; an empty file is taken (SQLite
    makes it a database; nothing in it is lost).

    Raises:
        NotAHistory: a folder, a device, a FIFO or socket, a file shorter than SQLite's smallest page.
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
        size = os.stat(real).st_size
    except OSError:  # gone since: nothing yet (SQLite makes it, or says why not)
        return real
    if 0 < size < SMALLEST_PAGE:  # no database is shorter than a page; SQLite alone takes a 1-byte file for one
        raise not_sqlite(path)
    return real


def connect(path: Path | None, mode: str) -> sqlite3.Connection:
    """Open, check and (``rw``) migrate; ``None`` gives an in-memory database.

    ``mode``: ``rw`` (created if missing; a write is tried, so a read-only or locked file is
    found now) or ``ro`` (SQLite ``mode=ro``; older schemas read as they are).

    Raises:
        HistoryFault: a subclass saying what is wrong.
    """
    if path is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute("PRAGMA foreign_keys = ON")
        migrate(conn, 0, None)
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
        return open_checked(path, mode, immutable=False)
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        side = path.with_name(path.name + "-wal")
        if mode == "ro" and code in (_READONLY_DIRECTORY, _CANTOPEN) and not side.exists():
            # a WAL history in a folder this user cannot write (no -shm can be made): with no -wal
            # beside it, the file itself holds every committed change and is read as it stands
            try:
                return open_checked(path, mode, immutable=True)
            except sqlite3.Error as again:
                raise fault_of(again, path) from again
        raise fault_of(exc, path) from exc


def open_checked(path: Path, mode: str, *, immutable: bool) -> sqlite3.Connection:
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
            migrate(conn, version, path)
            try:  # a write, rolled back: a read-only file, a read-only folder or a held lock is found now
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        else:
            shadow_missing(conn, version)
    except BaseException:  # a SQLite error is made a HistoryFault by the caller (after a read-only retry)
        conn.close()
        raise
    return conn

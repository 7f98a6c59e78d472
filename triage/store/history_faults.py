"""The history's faults: what goes wrong with a SQLite history file, as one :class:`HistoryFault` each.

A SQLite (or OS) error on the history becomes a fault with a specific message and hint
(:func:`fault_of`): locked by another process, read-only, a full disk, a newer schema, damaged
(movable aside only when its header says a triage history), not a history at all. :func:`tx` is
one transaction whose SQLite errors are raised as faults.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from triage.errors import HistoryError

# SQLite primary result codes (sqlite3 exposes the extended code; the low byte is the primary).
_CORRUPT, _NOTADB = 11, 26
_BUSY, _LOCKED = 5, 6
_PERM, _READONLY, _IOERR, _FULL, _CANTOPEN = 3, 8, 10, 13, 14
_READONLY_DIRECTORY = _READONLY | (6 << 8)


class HistoryFault(HistoryError):
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


@contextmanager
def tx(conn: sqlite3.Connection, path: Path | None = None) -> Iterator[None]:
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


def header_version(path: Path) -> int:
    """``user_version`` as the file's header holds it (0 when unreadable or not SQLite).

    Read through SQLite (:func:`triage.store.sqlite_file.user_version`), never a plain ``open()``: closing
    that would drop this process's SQLite locks on the history.
    """
    from triage.store.sqlite_file import user_version

    return user_version(path) or 0


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
        from triage.store.sqlite_file import user_version

        if primary == _NOTADB and path is not None and user_version(path) is None:
            return not_sqlite(path)
        reason = describe_error(exc)
        movable = path is not None and header_version(path) >= 1
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


def not_sqlite(path: Path) -> NotAHistory:
    """The refusal of a file that is not a SQLite database at all (SQLite found no header of its own)."""
    return NotAHistory(
        path,
        f"{path} is not a triage history (it is not a SQLite database); triage leaves it as it is",
        hint="name the history file (a new name starts a new history)",
    )


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

"""Looking at a file that may be a SQLite database (a history) without a plain ``open`` of it.

POSIX drops every lock a process holds on a file when it closes *any* descriptor of that file: a
plain ``open`` and ``close`` of a history this process also has a SQLite connection to takes that
connection's locks away, and another process may then check the WAL into the file and delete it
under this one ("How To Corrupt An SQLite Database File", section 2.2: acknowledged writes lost, a
corrupt index). SQLite's own opens keep them: a process's connections to one file share one lock
table, and SQLite defers closing a descriptor while locks are held. So triage looks at such a file
only through SQLite: :func:`user_version` reads the header with an ``immutable`` read-only
connection (no lock taken, no ``-wal``/``-shm`` read or made, nothing written).

This module is core: it must not import Textual.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

SMALLEST_PAGE = 512  # SQLite's smallest page: a database file that holds anything is at least one page


def user_version(path: str | Path) -> int | None:
    """The ``user_version`` the header of the SQLite file at ``path`` holds (read through SQLite).

    None when ``path`` is not a regular file with a SQLite header (missing, shorter than a page, a
    folder, a FIFO, a device, another format) or cannot be read.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size < SMALLEST_PAGE:
        return None  # never open a FIFO or device (it may block); a file shorter than a page is no database
    from urllib.parse import quote

    uri = f"file:{quote(os.path.abspath(path))}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error:  # SQLITE_NOTADB: not SQLite's header; anything else: it cannot be read
        return None
    finally:
        conn.close()


def is_sqlite(path: str | Path) -> bool:
    """Whether ``path`` is a regular file with SQLite's header (looked at through SQLite only)."""
    return user_version(path) is not None

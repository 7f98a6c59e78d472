"""Issue 42: listings never move or replace a file; they read the history read-only, as ``triage stats`` does.

``triage history``, ``GET /v1/tickets`` (a server started without ``--history`` too: the page polls it),
``stats`` and ``label --export`` only read: a damaged history is refused with a message and left where it
is (only a command that writes moves it aside); a write-locked history is read as it stands; no history yet
is an empty list, and no file is made for it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_clean
from test_hostile_history import make_history, snapshot

pytest.importorskip("starlette")
from fake_engine import FakeEngine  # noqa: E402
from test_serve import request, settings  # noqa: E402

from triage.serve.local import serving  # noqa: E402

READERS = (
    ["history"],
    ["history", "--json"],
    ["stats", "--json"],
    ["label", "--export", "-"],
)


def damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page * 2 : page * 5] = b"\xa5" * (page * 3)  # b-tree pages trashed; SQLite's header and triage's schema stay
    path.write_bytes(bytes(data))


def files(folder: Path) -> dict[str, Any]:
    """:func:`snapshot` but SQLite's own ``-wal``/``-shm`` (a read-only connection to a WAL file makes them)."""
    return {k: v for k, v in snapshot(folder).items() if not k.endswith(("-wal", "-shm"))}


def test_a_damaged_history_is_refused_by_every_listing_and_never_moved(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "history.sqlite3"
    make_history(path)
    damage(path)
    before = files(tmp_path)
    for args in READERS:
        proc = cli([*args, "--history-file", str(path)], tmp_path / "home")
        assert_clean(proc)
        assert proc.returncode == 1 and "is damaged" in proc.stderr and proc.stdout == "", (args, proc.stderr)
        assert files(tmp_path) == before, args  # nothing renamed, created or replaced
    # the page's poll, on a server started without --history (it keeps nothing, and lists the history)
    with serving(FakeEngine(), settings(history_path=path)) as (base, _):
        status, _, data = request(base, "GET", "/v1/tickets")
    body = json.loads(data)
    assert status == 409 and "is damaged" in body["error"], body
    assert files(tmp_path) == before and not list(tmp_path.glob("*.bad-*"))
    # a command that writes still moves it aside (and says so): the listing only left it to that one
    proc = cli(["label", "T-1", "queue=billing", "--history-file", str(path)], tmp_path / "home")
    assert proc.returncode == 2 and "moved aside to" in proc.stderr, proc.stderr
    assert len(list(tmp_path.glob("history.sqlite3.bad-*"))) == 1


def test_a_write_locked_history_is_listed_as_stats_reads_it(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "history.sqlite3"
    n = make_history(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # a writer mid-transaction (another triage storing labels)
    try:
        proc = cli(["history", "--json", "--history-file", str(path)], tmp_path / "home")
        assert proc.returncode == 0, proc.stderr
        assert sorted(json.loads(line)["id"] for line in proc.stdout.splitlines()) == ["T-1", "T-2", "T-3"]
        assert "kept in memory" not in proc.stderr
        proc = cli(["stats", "--json", "--history-file", str(path)], tmp_path / "home")
        assert proc.returncode == 0 and json.loads(proc.stdout)["labels"] == n, proc.stderr
        with serving(FakeEngine(), settings(history_path=path)) as (base, _):
            status, _, data = request(base, "GET", "/v1/tickets")
        assert status == 200 and sorted(t["id"] for t in json.loads(data)["tickets"]) == ["T-1", "T-2", "T-3"]
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_no_history_yet_is_an_empty_list_and_no_file_is_made(tmp_path: Path, cli: Any, triage_home: Path) -> None:
    from triage.store.paths import user_dirs

    default = user_dirs().history_db
    proc = cli(["history"])
    assert proc.returncode == 0 and "holds no tickets yet" in proc.stderr, proc.stderr
    assert not default.exists()
    path = tmp_path / "later.sqlite3"
    with serving(FakeEngine(), settings(history_path=path)) as (base, _):
        status, _, data = request(base, "GET", "/v1/tickets")
    assert status == 200 and json.loads(data) == {"history": str(path), "tickets": []}
    assert not path.exists() and not default.exists()

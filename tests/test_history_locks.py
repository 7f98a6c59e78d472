"""Issue 42: no process opens its history by any path but its SQLite connection while it has one.

POSIX drops every lock a process holds on a file when the process closes any descriptor of that file.
``triage serve`` read the history's header with a plain ``open()`` on every label request, which took
the engine thread's connection's locks away; another process closing its connection then found itself
the last one, checked the WAL into the file and deleted it under the server: the server's later
commits went to a deleted WAL (lost), and the next reader in the server got "disk I/O error".

Here one connection of this process stays open while every way triage looks at the history (opening
it to write and to read, the listings, the export checks, the serve routes, the fault messages) runs
in this process; another process then probes the locks with ``F_GETLK``, and writes and closes beside
it; what this process writes afterwards must be in the file. A scan of triage/ finds no plain file
opening of the history's path.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from fake_engine import FakeEngine

from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.store import labels as lab
from triage.store.history import History

ROOT = Path(__file__).resolve().parents[1]

# Another process asks the kernel who holds SQLite's locks: the SHARED range of the database file
# (every WAL connection holds it while open) and the "DMS" byte of the -shm file (each WAL user's mark).
PROBE = r"""
import fcntl, os, struct, sys
db = sys.argv[1]
out = {}
for name, path, start, n in (("db", db, 0x40000002, 510), ("shm", db + "-shm", 128, 1)):
    fd = os.open(path, os.O_RDWR)
    got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, start, n, 0))
    kind, _, _, _, pid = struct.unpack("hhqqi", got)
    out[name] = pid if kind != fcntl.F_UNLCK else None
    os.close(fd)
print(__import__("json").dumps(out))
"""

WRITE_BESIDE = r"""
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=10)
c.execute("INSERT INTO tickets (ticket_id, sha256, text, created_at, updated_at) VALUES ('OTHER', 'other', 'x', 0, 0)")
c.commit()
c.close()
"""

READ_FRESH = r"""
import json, sqlite3, sys
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print(json.dumps({"ids": sorted(r[0] for r in c.execute("SELECT ticket_id FROM tickets")),
                  "check": c.execute("PRAGMA integrity_check").fetchone()[0]}))
"""


def holders(path: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def seeded(path: Path) -> None:
    """A history with T-1 scored and labelled (and its WAL checked in, so the file alone holds it)."""
    with History.open_writable(path) as h:
        text = "My card was charged twice for the March invoice."
        result = FakeEngine().score_ticket(make_ticket(text, "T-1"), default_pack())
        row = h.save_ticket(make_ticket(text, "T-1"))
        sid = h.start_score(row, model=result.model, pack=result.pack, orderings=result.orderings)
        h.finish_score(sid, result)
        scored = lab.find_ticket(h, "T-1")
        lab.record(h, scored, [lab.Answer(c.id, c.choice) for c in scored.result.criteria], origin="cli")


def every_look_at_the_history(path: Path, tmp_path: Path, cli: Any) -> None:
    """Each way triage opens, lists, checks or classifies the history, in this process."""
    from triage.serve.tickets import recent_tickets, record_labels
    from triage.store.history import check_history
    from triage.store.history_faults import header_version
    from triage.store.history_open import check_history_path, connect
    from triage.store.outputs import check_output, is_sqlite, sqlite_side_of

    History.open_writable(path).close()
    History.open_readonly(path).close()
    History.open(path).close()
    check_history(path)
    check_history_path(path)
    connect(path, "ro").close()
    assert header_version(path) >= 1 and is_sqlite(path)
    for target in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            check_output(target, force=True)
        except Exception as exc:  # refused, as it must be: never written over
            assert "database" in str(exc), exc
        sqlite_side_of(target)
    assert "T-1" in [t["id"] for t in recent_tickets(path, 5)["tickets"]]
    assert record_labels(path, "T-1", {"urgency": "high"})
    for args in (
        ("history", "--history-file", str(path)),
        ("history", "--json", "--history-file", str(path)),
        ("stats", "--history-file", str(path)),
        ("label", "--export", str(tmp_path / "out.jsonl"), "--force", "--history-file", str(path)),
        ("label", "T-1", "queue=billing", "--history-file", str(path)),
    ):
        proc = cli(list(args))
        assert proc.returncode == 0, (args, proc.stderr)


def test_every_look_at_the_history_keeps_this_process_s_sqlite_locks(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "history.sqlite3"
    seeded(path)
    keeper = History.open_writable(path)  # the server's engine thread, the app: one connection held open
    try:
        before = holders(path)
        assert before["db"] is not None and before["shm"] is not None, before  # what the probe sees when held
        every_look_at_the_history(path, tmp_path, cli)
        assert holders(path) == before  # still this process's: nothing closed a plain descriptor of the file
    finally:
        keeper.close()


def test_a_write_after_another_process_closed_beside_it_is_in_the_file(tmp_path: Path, cli: Any) -> None:
    """The issue's loss: acknowledged writes of the long-lived connection gone after another writer closed."""
    path = tmp_path / "history.sqlite3"
    seeded(path)
    keeper = History.open_writable(path)
    try:
        keeper.save_ticket(make_ticket("Where is my parcel?", "K-1"))
        every_look_at_the_history(path, tmp_path, cli)
        subprocess.run([sys.executable, "-c", WRITE_BESIDE, str(path)], check=True, timeout=60)
        keeper.save_ticket(make_ticket("The app crashes at login.", "K-2"))  # acknowledged: it returned
        assert keeper.conn.execute("SELECT count(*) FROM tickets").fetchone()[0] == 4  # no "disk I/O error"
        while_open = fresh_read(path)  # another process reads while this one still has it open (a server runs)
    finally:
        keeper.close()
    assert while_open == {"ids": ["K-1", "K-2", "OTHER", "T-1"], "check": "ok"}
    assert fresh_read(path) == while_open


def fresh_read(path: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", READ_FRESH, str(path)], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


# -- the scan ---------------------------------------------------------------------------------------
OPENERS = {
    "open",
    "fdopen",
    "read_bytes",
    "read_text",
    "write_bytes",
    "write_text",
    "mmap",
    "copy",
    "copyfile",
    "copy2",
    "copyfileobj",
    "truncate",
}
NOT_FILES = {"History", "cls", "webbrowser", "gzip", "zf", "urllib", "request"}  # ``History.open`` is no file
# The modules that hold or handle the history: they open no file at all (the history only through SQLite).
HISTORY_MODULES = [
    "triage/store/history.py",
    "triage/store/history_open.py",
    "triage/store/history_faults.py",
    "triage/store/history_schema.py",
    "triage/store/sqlite_file.py",
    "triage/store/labels.py",
    "triage/store/label_marks.py",
    "triage/store/recent.py",
    "triage/store/training.py",
    "triage/store/features.py",
    "triage/serve/tickets.py",
    "triage/session.py",
    "triage/tui/desk.py",
]
NAMES_THE_HISTORY = re.compile(r"hist|history_db|sqlite", re.IGNORECASE)


def file_openings(source: str) -> list[tuple[int, str]]:
    """Every call that opens, reads or writes a file by path in ``source``: (line, the call's text)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in OPENERS:
            out.append((node.lineno, ast.get_source_segment(source, node) or ""))
        elif isinstance(f, ast.Attribute) and f.attr in OPENERS:
            receiver = f.value.id if isinstance(f.value, ast.Name) else None
            if receiver not in NOT_FILES:
                out.append((node.lineno, ast.get_source_segment(source, node) or ""))
    return out


def test_no_module_opens_the_history_by_any_path_but_sqlite() -> None:
    found = []
    for p in sorted((ROOT / "triage").rglob("*.py")):
        rel = str(p.relative_to(ROOT))
        for line, call in file_openings(p.read_text(encoding="utf-8")):
            if rel in HISTORY_MODULES or NAMES_THE_HISTORY.search(call):
                found.append(f"{rel}:{line}: {call[:80]}")
    assert found == []


def test_the_scan_finds_what_it_looks_for() -> None:
    """The scan is not blind: the two plain opens of the history issue 42 found, as they were, are found."""
    before = """
def check_history_path(path):
    with open(real, "rb") as fh:
        head = fh.read(100)
def header_version(path):
    with open(path, "rb") as fh:
        return fh.read(100)
def other(history_path):
    return history_path.read_bytes(), History.open(history_path)
"""
    assert [line for line, _ in file_openings(before)] == [3, 6, 9]  # History.open is left out: no file
    for rel in HISTORY_MODULES:
        assert (ROOT / rel).is_file(), rel  # a module renamed leaves the list, and the scan, behind: say so


def test_a_probe_of_the_header_never_takes_a_small_file_for_a_database(tmp_path: Path) -> None:
    from triage.store.sqlite_file import is_sqlite, user_version

    one = tmp_path / "one"
    one.write_bytes(b"x")  # SQLite alone reads a 1-byte file as an empty database
    assert user_version(one) is None and not is_sqlite(one)
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100, encoding="utf-8")
    assert user_version(text) is None
    db = tmp_path / "real.sqlite3"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    assert user_version(db) == 7 and is_sqlite(db)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # never opened (it would block until a writer came)
    assert user_version(fifo) is None and user_version(tmp_path) is None and user_version(tmp_path / "missing") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "notes.txt", "one", "real.sqlite3"]  # nothing made


def test_two_connections_that_open_one_new_history_at_once_migrate_it_once(tmp_path: Path) -> None:
    """Both read schema 0 before either migrates (the page's ticket list and a score at once, on a new file):
    the second finds the first's migrations applied inside its own write transaction and repeats none."""
    from triage.store.history_schema import SCHEMA_VERSION, migrate

    path = tmp_path / "history.sqlite3"
    a = sqlite3.connect(path, isolation_level=None)
    b = sqlite3.connect(path, isolation_level=None)
    try:
        va = int(a.execute("PRAGMA user_version").fetchone()[0])
        vb = int(b.execute("PRAGMA user_version").fetchone()[0])
        assert va == vb == 0
        migrate(a, va, path)
        migrate(b, vb, path)  # before the fix: "table tickets already exists"
        assert int(b.execute("PRAGMA user_version").fetchone()[0]) == SCHEMA_VERSION
    finally:
        a.close()
        b.close()

"""Issue 33: the history and the files triage writes for the user, run as a user would: `triage` commands.

Most run in this process (the ``cli`` fixture: main() with its own streams, exit code, stdout and stderr);
those where the process matters run ``triage`` in a subprocess: as the unprivileged user, on a full disk, and
waiting out the real busy timeout of a history another process holds.

A file triage did not write is never moved or replaced; a history that cannot be used is a specific
message and a non-zero exit; the read-only commands open the history read-only. Devices, FIFOs, a
full disk and read-only files are private ones each test makes itself (a FIFO and a copy of a null
device's node under tmp_path, a small tmpfs mounted under tmp_path, a temporary folder read as the
unprivileged user ``nobody``); no system file is touched.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_clean, run_triage
from fake_engine import FakeEngine

from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.store import history_open
from triage.store import labels as lab
from triage.store.history import History
from triage.store.history_schema import SCHEMA_VERSION

# How long a command run in this process waits for another's write lock: the product waits 5 s
# (history_open.BUSY_TIMEOUT_S) before the same refusal.
SHORT_BUSY_S = 0.2

TEXTS = {
    "T-1": "My card was charged twice for the March invoice. Please refund one of them today.",
    "T-2": "The parcel says in transit for nine days now. Where is it?",
    "T-3": "How do I change the e-mail address on my account?",
}


def score_into(h: History, ticket_id: str, text: str) -> lab.ScoredTicket:
    result = FakeEngine().score_ticket(make_ticket(text, ticket_id), default_pack())
    row = h.save_ticket(make_ticket(text, ticket_id))
    sid = h.start_score(row, model=result.model, pack=result.pack, orderings=result.orderings)
    h.finish_score(sid, result)
    return lab.find_ticket(h, ticket_id)


def make_history(path: Path, *, labelled: int = 3) -> int:
    """A history with TEXTS scored and ``labelled`` of them labelled on every criterion; returns the label count."""
    with History.open_writable(path) as h:
        for i, (tid, text) in enumerate(TEXTS.items()):
            scored = score_into(h, tid, text)
            if i < labelled:
                answers = [lab.Answer(c.id, c.choice) for c in scored.result.criteria]
                lab.record(h, scored, answers, origin="cli")
        n = lab.count(h)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
    conn.close()
    return n


@pytest.fixture
def hist(tmp_path: Path) -> tuple[Path, int]:
    path = tmp_path / "history.sqlite3"
    return path, make_history(path)


def snapshot(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry of ``folder`` but ``home``: its mode and (for regular files) bytes."""
    out = {}
    for p in sorted(folder.iterdir()):
        if p.name == "home":  # the TRIAGE_HOME of the runs (their log)
            continue
        st = os.lstat(p)
        out[p.name] = (st.st_mode, p.read_bytes() if stat.S_ISREG(st.st_mode) else None)
    return out


def private_null(tmp_path: Path, name: str = "null-copy") -> Path:
    """A character device node of this test's own (the null device's numbers), under tmp_path."""
    node = tmp_path / name
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here ({exc})")
    return node


# -- 1. a file triage did not write is never moved or replaced ----------------------------------


def test_label_export_over_the_history_is_refused_even_with_force(
    tmp_path: Path, cli: Any, hist: tuple[Path, int]
) -> None:
    path, _ = hist
    (tmp_path / "link.jsonl").symlink_to(path)
    before = snapshot(tmp_path)
    for target in (path, tmp_path / "link.jsonl", tmp_path / "." / path.name):
        proc = cli(["label", "--export", str(target), "--force", "--history-file", str(path)], tmp_path / "home")
        assert_clean(proc)
        assert proc.returncode == 2, proc.stderr
        assert "never writes over a file it reads" in proc.stderr
    other = tmp_path / "other.sqlite3"
    make_history(other)
    for target in (other, Path(f"{other}-wal"), Path(f"{path}-shm")):
        proc = cli(["label", "--export", str(target), "--force", "--history-file", str(path)], tmp_path / "home")
        assert_clean(proc)
        assert proc.returncode == 2 and "never writes over a database" in proc.stderr, proc.stderr
    after = snapshot(tmp_path)
    for name, entry in before.items():
        assert after[name] == entry, name


@pytest.mark.parametrize(
    "kind", ["text", "long-text", "one-byte", "sqlite-magic", "folder", "fifo", "device", "other-db"]
)
def test_a_path_that_is_not_a_history_is_refused_and_left_as_it_is(tmp_path: Path, cli: Any, kind: str) -> None:
    target = tmp_path / "notes.txt"
    if kind == "text":
        target.write_text("my notes\nmore notes\n", encoding="utf-8")
    elif kind == "long-text":  # longer than a page: SQLite itself says it is no database (issue 42: no open())
        target.write_text("my notes, line after line\n" * 200, encoding="utf-8")
    elif kind == "one-byte":  # SQLite alone would take it for an empty database, and write over it
        target.write_bytes(b"x")
    elif kind == "sqlite-magic":  # SQLite's magic, then no header SQLite accepts
        target.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4080)
    elif kind == "folder":
        target.mkdir()
        (target / "keep.txt").write_text("keep", encoding="utf-8")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        target = private_null(tmp_path)
    else:
        conn = sqlite3.connect(target)
        conn.execute("CREATE TABLE recipes (name TEXT)")
        conn.commit()
        conn.close()
    before = snapshot(tmp_path)
    for args in (
        ["stats", "--json"],
        ["label", "T-1", "queue=billing"],
        ["label", "--export", str(tmp_path / "o")],
        ["history"],
    ):
        proc = cli([*args, "--history-file", str(target)], tmp_path / "home")
        assert_clean(proc)
        if args == ["history"] and kind in ("folder", "fifo", "device"):  # `history` names no file but a file
            assert proc.returncode == 2 and "no history file" in proc.stderr, proc.stderr
            continue
        assert proc.returncode == 2, (args, proc.stderr)
        assert "not a triage history" in proc.stderr, proc.stderr
        assert proc.stdout == ""
    assert snapshot(tmp_path) == before  # nothing renamed, created or replaced
    assert not list(tmp_path.glob("*.bad-*"))


def test_a_damaged_history_is_moved_aside_naming_both_files(tmp_path: Path, cli: Any, hist: tuple[Path, int]) -> None:
    path, _ = hist
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page * 2 : page * 5] = b"\xa5" * (page * 3)  # b-tree pages trashed; SQLite's header and triage's schema stay
    path.write_bytes(bytes(data))
    damaged = bytes(data)
    # only reading: refused, nothing moved
    proc = cli(["stats", "--json", "--history-file", str(path)], tmp_path / "home")
    assert_clean(proc)
    assert proc.returncode == 1 and "is damaged" in proc.stderr and proc.stdout == "", proc.stderr
    assert path.read_bytes() == damaged and not list(tmp_path.glob("*.bad-*"))
    # writing: moved aside, said on stderr with both names
    proc = cli(["label", "T-1", "queue=billing", "--history-file", str(path)], tmp_path / "home")
    assert_clean(proc)
    [aside] = tmp_path.glob("history.sqlite3.bad-*")
    assert aside.read_bytes() == damaged
    assert f"history {path} was damaged" in proc.stderr and f"moved aside to {aside}" in proc.stderr, proc.stderr
    assert proc.returncode == 2 and "no ticket 'T-1'" in proc.stderr  # the new history is empty


def _drain(fifo: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(fifo, "rb") as fh:
            into.append(fh.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def test_label_export_writes_through_a_fifo_and_a_device_and_to_stdout_for_dash(
    tmp_path: Path, cli: Any, hist: tuple[Path, int]
) -> None:
    path, _ = hist
    home = tmp_path / "home"
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _drain(fifo, got)
    proc = cli(["label", "--export", str(fifo), "--history-file", str(path)], home)
    reader.join(timeout=60)
    assert_clean(proc)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO, not a file put in its place
    assert [json.loads(line)["id"] for line in got[0].decode().splitlines()] == ["T-1", "T-2", "T-3"]

    device = private_null(tmp_path)
    link = tmp_path / "to-device.jsonl"
    link.symlink_to(device)
    for target in (device, link):
        proc = cli(["label", "--export", str(target), "--history-file", str(path)], home)  # no --force needed
        assert_clean(proc)
        assert proc.returncode == 0, proc.stderr
    assert stat.S_ISCHR(os.lstat(device).st_mode) and os.path.islink(link) and os.readlink(link) == str(device)

    before = set(os.listdir(tmp_path))
    proc = cli(["label", "--export", "-", "--history-file", str(path)], home)
    assert_clean(proc)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["id"] for line in proc.stdout.splitlines()] == ["T-1", "T-2", "T-3"]
    assert "to standard output" in proc.stderr
    assert set(os.listdir(tmp_path)) == before and not (home / "-").exists() and not Path("-").exists()

    proc = cli(["label", "--export", str(tmp_path), "--force", "--history-file", str(path)], home)
    assert proc.returncode == 2 and "is a folder" in proc.stderr


def test_a_symlinked_export_replaces_the_file_it_points_at_and_keeps_the_link(
    tmp_path: Path, cli: Any, hist: tuple[Path, int]
) -> None:
    path, _ = hist
    real = tmp_path / "real.jsonl"
    real.write_text("old\n", encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    proc = cli(["label", "--export", str(link), "--history-file", str(path)], tmp_path / "home")
    assert proc.returncode == 2 and "--force" in proc.stderr  # an existing file needs --force, through a link too
    proc = cli(["label", "--export", str(link), "--force", "--history-file", str(path)], tmp_path / "home")
    assert_clean(proc)
    assert proc.returncode == 0 and os.path.islink(link) and len(real.read_text().splitlines()) == 3


def test_pack_init_never_writes_over_its_export_or_a_history(tmp_path: Path, cli: Any, hist: tuple[Path, int]) -> None:
    path, _ = hist
    export = tmp_path / "fd.csv"
    rows = ["Subject,Group"] + [f"ticket {i},{'billing' if i % 2 else 'shipping'}" for i in range(20)]
    export.write_text("\n".join(rows) + "\n", encoding="utf-8")
    before = snapshot(tmp_path)
    for out in (export, path):
        proc = cli(
            ["pack", "init", str(export), "--text", "Subject", "--criteria", "queue=Group", "-o", str(out), "--force"],
            tmp_path / "home",
        )
        assert_clean(proc)
        assert proc.returncode == 2, proc.stderr
    assert snapshot(tmp_path) == before


def test_learn_refuses_its_history_as_output(tmp_path: Path, cli: Any, hist: tuple[Path, int]) -> None:
    path, _ = hist
    link = tmp_path / "head.npz"
    link.symlink_to(path)
    proc = cli(
        ["learn", "--history", "--history-file", str(path), "-o", str(link), "--force", "--model", "/none.gguf"],
        tmp_path / "home",
    )
    assert_clean(proc)
    assert proc.returncode == 2 and "never writes over a file it reads" in proc.stderr, proc.stderr


# -- 2. history faults are messages ----------------------------------------------------------


def test_a_newer_history_is_never_zero_labels(tmp_path: Path, cli: Any, hist: tuple[Path, int]) -> None:
    path, n = hist
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    for args in (["stats", "--json"], ["label", "--export", str(tmp_path / "x.jsonl")], ["label", "T-1", "queue=x"]):
        proc = cli([*args, "--history-file", str(path)], tmp_path / "home")
        assert_clean(proc)
        assert proc.returncode == 2 and "newer triage" in proc.stderr, proc.stderr
        assert proc.stdout == ""
    assert path.read_bytes() == before and n > 0


@pytest.fixture
def locked(hist: tuple[Path, int]) -> Iterator[tuple[Path, int]]:
    """Another process holds the history with an exclusive lock (readers are shut out too)."""
    path, n = hist
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "c.execute('PRAGMA locking_mode = EXCLUSIVE')\n"
            "c.execute('BEGIN EXCLUSIVE')\n"
            "c.execute('UPDATE tickets SET updated_at = updated_at')\n"
            "print('held', flush=True)\n"
            "time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield path, n
    finally:
        holder.kill()
        holder.wait(timeout=30)


@pytest.mark.slow  # each command waits out the busy timeout (5 s) in its own process, as a user's does
def test_a_locked_history_is_a_message_never_zero_labels(tmp_path: Path, locked: tuple[Path, int]) -> None:
    path, _ = locked
    for args in (["stats", "--json"], ["label", "T-1", "queue=billing"]):
        proc = run_triage([*args, "--history-file", str(path)], tmp_path / "home")
        assert_clean(proc)
        assert proc.returncode == 1, proc.stderr
        assert "is locked by another process" in proc.stderr and proc.stdout == "", proc.stderr


def test_a_held_write_lock_leaves_reading_alone_and_refuses_a_label(
    tmp_path: Path, cli: Any, hist: tuple[Path, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, n = hist
    monkeypatch.setattr(history_open, "BUSY_TIMEOUT_S", SHORT_BUSY_S)  # the same refusal, sooner
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # a writer mid-transaction (WAL: readers go on)
    try:
        proc = cli(["stats", "--json", "--history-file", str(path)], tmp_path / "home")
        assert proc.returncode == 0 and json.loads(proc.stdout)["labels"] == n, proc.stderr
        proc = cli(["label", "T-1", "queue=billing", "--history-file", str(path)], tmp_path / "home")
        assert_clean(proc)
        assert proc.returncode == 1 and "is locked by another process" in proc.stderr, proc.stderr
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with History.open_readonly(path) as h:
        assert lab.count(h) == n


AS_NOBODY = """
import contextlib, io, json, os, sys
from triage.cli import main
warm, args = json.loads(sys.argv[1]), json.loads(sys.argv[2])
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main(warm)  # as root first: every module this command reads is imported (the interpreter lives under /root)
os.setgid(65534)
os.setuid(65534)
assert os.geteuid() == 65534
sys.exit(main(args))
"""


def run_as_nobody(args: list[str], warm: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRIAGE_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", AS_NOBODY, json.dumps(warm), json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.parametrize("folder_mode", [0o755, 0o777], ids=["folder-read-only", "folder-writable"])
def test_a_read_only_history_is_read_by_stats_export_and_history_and_refused_for_labels(
    tmp_path: Path, folder_mode: int
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to the unprivileged user nobody")
    folder = Path(tempfile.mkdtemp(prefix="triage-ro-"))  # tmp_path's parents are root's only: nobody cannot reach
    try:
        folder.chmod(0o755)
        path = folder / "history.sqlite3"
        warm_path = tmp_path / "warm.sqlite3"
        n = make_history(path, labelled=3)
        make_history(warm_path)
        path.chmod(0o444)
        folder.chmod(folder_mode)
        home = folder / "home"
        home.mkdir()
        home.chmod(0o777)
        before = path.read_bytes()
        out = folder / "export.jsonl"
        proc = run_as_nobody(
            ["stats", "--json", "--history-file", str(path)],
            ["stats", "--json", "--history-file", str(warm_path)],
            home,
        )
        assert_clean(proc)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["labels"] == n > 0
        proc = run_as_nobody(
            ["label", "--export", "-", "--history-file", str(path)],
            ["label", "--export", str(tmp_path / "w.jsonl"), "--history-file", str(warm_path)],
            home,
        )
        assert_clean(proc)
        assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 3, proc.stderr
        proc = run_as_nobody(  # the listing reads it as stats does (issue 42: it was "kept in memory only")
            ["history", "--json", "--history-file", str(path)],
            ["history", "--json", "--history-file", str(warm_path)],
            home,
        )
        assert_clean(proc)
        assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 3, proc.stderr
        proc = run_as_nobody(
            ["label", "T-1", "queue=shipping", "--history-file", str(path)],
            ["label", "T-1", "queue=shipping", "--history-file", str(warm_path)],
            home,
        )
        assert_clean(proc)
        assert proc.returncode == 1 and "cannot be written" in proc.stderr, proc.stderr
        assert path.read_bytes() == before and not out.exists()
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs of this test's own under tmp_path (skipped where mounting is not permitted)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_under_the_history_stores_nothing_and_says_so(tmp_path: Path, small_disk: Path) -> None:
    src = tmp_path / "made.sqlite3"
    n = make_history(src, labelled=0)
    path = small_disk / "history.sqlite3"
    shutil.copyfile(src, path)
    reader = sqlite3.connect(path)  # open while the disk fills: its -wal and -shm exist before the disk is full
    reader.execute("SELECT count(*) FROM tickets").fetchone()
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as fh:  # the rest of the disk
        for size in (65536, 4096, 1):
            try:
                while True:
                    fh.write(b"\0" * size)
            except OSError:
                pass
    rows = [{"id": tid, "labels": {"queue": "billing", "urgency": "high"}} for tid in TEXTS]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    proc = run_triage(["label", "--file", str(labels), "--history-file", str(path)], tmp_path / "home")
    assert_clean(proc)
    assert proc.returncode == 1, proc.stderr
    assert "the disk is full" in proc.stderr and "nothing was changed" in proc.stderr, proc.stderr
    reader.close()
    filler.unlink()
    with History.open_readonly(path) as h:
        assert lab.count(h) == n == 0


# -- 3 (label files) and 4 (labels keep their meaning) ----------------------------------------


def test_one_file_giving_a_ticket_two_answers_for_one_criterion_is_refused(
    tmp_path: Path, cli: Any, hist: tuple[Path, int]
) -> None:
    path, n = hist
    rows = [
        {"id": "T-2", "labels": {"queue": "billing"}},
        {"id": "T-3", "labels": {"queue": "billing"}},
        {"id": "T-2", "labels": {"queue": "shipping"}},
        {"id": "T-3", "labels": {"queue": "billing"}},  # the same answer again: fine, stored once
    ]
    f = tmp_path / "labels.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    proc = cli(["label", "--file", str(f), "--history-file", str(path)], tmp_path / "home")
    assert_clean(proc)
    assert proc.returncode == 2, proc.stderr
    assert f"{f}:3: ticket 'T-2': criterion 'queue' is 'shipping' here and 'billing' at {f}:1" in proc.stderr
    assert "nothing was stored" in proc.stderr
    with History.open_readonly(path) as h:
        assert lab.count(h) == n
    f.write_text("".join(json.dumps(r) + "\n" for r in rows[:2] + rows[3:]), encoding="utf-8")
    proc = cli(["label", "--file", str(f), "--history-file", str(path)], tmp_path / "home")
    assert proc.returncode == 0 and "stored 2 label(s) on 2 ticket(s)" in proc.stderr, proc.stderr
    assert "1 answer(s) given again" in proc.stderr


def test_a_row_giving_one_key_twice_and_a_nul_byte_are_named(tmp_path: Path, cli: Any, hist: tuple[Path, int]) -> None:
    path, n = hist
    f = tmp_path / "labels.jsonl"
    f.write_bytes(
        b'{"id": "T-2", "labels": {"queue": "billing"}}\n'
        b'{"id": "T-3", "labels": {"queue": "billing", "queue": "shipping"}}\n'
        b'{"id": "T-1", "labels": {"queue": "bil\x00ling"}}\n'
    )
    proc = cli(["label", "--file", str(f), "--history-file", str(path)], tmp_path / "home")
    assert_clean(proc)
    assert proc.returncode == 2, proc.stderr
    assert f"{f}:2: not read: key 'queue' is given twice" in proc.stderr
    assert f"{f}:3: holds a NUL byte" in proc.stderr
    with History.open_readonly(path) as h:
        assert lab.count(h) == n


BIG = 100_000


@pytest.mark.slow
def test_label_file_of_100000_rows_is_stored_in_bounded_memory(tmp_path: Path) -> None:
    """Peak RSS of `triage label --file` over 100,000 rows stays under 200 MB (it was 1.1 GB)."""
    path = tmp_path / "history.sqlite3"
    with History.open_writable(path) as h:  # one real scored ticket, then its rows copied in bulk
        first = score_into(h, "seed", "A seed ticket about a double charge on my card.")
        (result_json, pack_hash) = h.conn.execute(
            "SELECT result_json, pack_hash FROM scores WHERE id = ?", (first.score_id,)
        ).fetchone()
        with h.transaction() as conn:
            conn.executemany(
                "INSERT INTO tickets (ticket_id, sha256, text, created_at, updated_at) VALUES (?, ?, ?, 1, 1)",
                ((f"B-{i}", f"bulk-{i}", f"Ticket {i}: the parcel is late again.") for i in range(BIG)),
            )
            conn.execute(
                """INSERT INTO scores (ticket, status, pack_hash, orderings, started_at, finished_at, result_json)
                   SELECT id, 'done', ?, 'none', 1, 1, ? FROM tickets WHERE ticket_id LIKE 'B-%'""",
                (pack_hash, result_json),
            )
    options = [o.id for o in next(c for c in first.result.criteria if c.id == "queue").options]
    f = tmp_path / "labels.jsonl"
    with open(f, "w", encoding="utf-8") as fh:
        for i in range(BIG):
            fh.write(json.dumps({"id": f"B-{i}", "labels": {"queue": options[i % len(options)]}}) + "\n")
    fh_bad = tmp_path / "labels-bad.jsonl"
    shutil.copyfile(f, fh_bad)
    with open(fh_bad, "a", encoding="utf-8") as fh:
        fh.write('{"id": "B-7", "labels": {"queue": "the moon"}}\n')
    measure = (
        "import json, resource, subprocess, sys\n"
        "p = subprocess.run(json.loads(sys.argv[1]), capture_output=True, text=True)\n"
        "print(json.dumps({'code': p.returncode, 'err': p.stderr[-3000:],"
        " 'kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n"
    )
    env = {**os.environ, "TRIAGE_HOME": str(tmp_path / "home")}
    peaks = {}
    for name, labels_file, code in (("bad", fh_bad, 2), ("good", f, 0)):
        cmd = [sys.executable, "-m", "triage.cli", "label", "--file", str(labels_file), "--history-file", str(path)]
        out = subprocess.run(
            [sys.executable, "-c", measure, json.dumps(cmd)], capture_output=True, text=True, env=env, timeout=1800
        )
        got = json.loads(out.stdout)
        assert got["code"] == code, got["err"]
        if name == "bad":  # the one bad row, at the end, is named; nothing was stored
            assert f"{fh_bad}:{BIG + 1}: ticket 'B-7', criterion 'queue': no option 'the moon'" in got["err"]
            with History.open_readonly(path) as h:
                assert lab.count(h) == 0
        peaks[name] = got["kb"] / 1024
        print(f"label --file {BIG} rows ({name}): peak RSS {peaks[name]:.0f} MB")
        assert peaks[name] < 200, f"peak RSS {peaks[name]:.0f} MB"
    with History.open_readonly(path) as h:
        assert lab.count(h) == BIG


def test_learn_history_uses_only_labels_given_under_its_pack(tmp_path: Path) -> None:
    from triage.store import features as feat
    from triage.store.training import training_rows

    pack = default_pack()
    path = tmp_path / "history.sqlite3"
    with History.open_writable(path) as h:
        for tid, text in TEXTS.items():
            scored = score_into(h, tid, text)
            lab.record(h, scored, [lab.Answer("queue", scored.result.criteria[0].options[0].id)], origin="cli")
        # the same text labelled under another version of the pack: its option ids may mean something else
        h.conn.execute("UPDATE labels SET pack_hash = 'older-version' WHERE ticket = (SELECT min(id) FROM tickets)")
        got = training_rows(h, pack, feat.Identity("m", "f", pack.hash))
    assert len(got.rows) == 2
    assert got.notes() == [
        f"1 label(s) left out: given under another version of pack 'support' (pack hash older-versio, "
        f"this one is {pack.hash[:12]})"
    ]


def test_a_text_kept_under_one_id_can_be_labelled_under_each_id_it_was_scored_with(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "history.sqlite3"
    with History.open_writable(path) as h:
        a = score_into(h, "A-1", TEXTS["T-1"])
        b = score_into(h, "B-1", TEXTS["T-1"])  # the same text, scored again with another id
        again = score_into(h, "A-1", TEXTS["T-1"])  # and with the first id again: its own row
        assert a.ticket_row != b.ticket_row and again.ticket_row == a.ticket_row
        assert len(h.results(a.ticket_row)) == 2 and len(h.results(b.ticket_row)) == 1
    for tid in ("A-1", "B-1"):
        proc = cli(["label", tid, "queue=billing", "--history-file", str(path)], tmp_path / "home")
        assert_clean(proc)
        assert proc.returncode == 0, proc.stderr
    proc = cli(["label", "--export", "-", "--history-file", str(path)], tmp_path / "home")
    assert sorted(json.loads(line)["id"] for line in proc.stdout.splitlines()) == ["A-1", "B-1"]


def test_check_history_for_a_server_says_what_was_moved_and_raises_a_locked_kind(
    tmp_path: Path, hist: tuple[Path, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from triage.store.history import check_history
    from triage.store.history_faults import HistoryFault, HistoryLocked, NotAHistory

    monkeypatch.setattr(history_open, "BUSY_TIMEOUT_S", SHORT_BUSY_S)  # the same refusal, sooner
    path, _ = hist
    assert check_history(path) is None
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page * 2 : page * 5] = b"\xa5" * (page * 3)
    path.write_bytes(bytes(data))
    notice = check_history(path)
    [aside] = tmp_path.glob("history.sqlite3.bad-*")
    assert notice is not None and str(path) in notice and str(aside) in notice
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(HistoryLocked) as info:
            check_history(path)
        assert isinstance(info.value, HistoryFault) and info.value.kind == "locked" and info.value.exit_code == 1
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(NotAHistory) as refused:
        check_history(tmp_path / "notes.txt")
    assert refused.value.kind == "not-a-history" and refused.value.exit_code == 2


def test_the_apps_export_writes_through_a_device_and_never_over_a_database(
    tmp_path: Path, hist: tuple[Path, int]
) -> None:
    from triage.errors import InputError
    from triage.store.export import export_result

    path, _ = hist
    result = FakeEngine().score_ticket(make_ticket(TEXTS["T-1"], "T-1"), default_pack())
    device = private_null(tmp_path)
    export_result(result, device, fmt="json")
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    before = path.read_bytes()
    with pytest.raises(InputError, match="never writes over a database"):
        export_result(result, path, fmt="json")
    assert path.read_bytes() == before
    out = export_result(result, tmp_path / "r.json")
    assert json.loads(out.read_text(encoding="utf-8"))["ticket_id"] == "T-1"


def test_label_file_with_old_mac_line_ends_and_one_endless_line(
    tmp_path: Path, cli: Any, hist: tuple[Path, int]
) -> None:
    path, n = hist
    f = tmp_path / "cr.jsonl"
    rows = [{"id": "T-2", "labels": {"queue": "billing"}}, {"id": "T-3", "labels": {"queue": "shipping"}}]
    f.write_bytes(b"\xef\xbb\xbf" + "\r".join(json.dumps(r) for r in rows).encode() + b"\r")
    proc = cli(["label", "--file", str(f), "--history-file", str(path)], tmp_path / "home")
    assert_clean(proc)
    assert proc.returncode == 0 and "stored 2 label(s)" in proc.stderr, proc.stderr
    endless = tmp_path / "endless.jsonl"
    endless.write_bytes(b'{"id": "T-1", "labels": {"queue": "billing"}}\n' + b"x" * (9 << 20))
    proc = cli(["label", "--file", str(endless), "--history-file", str(path)], tmp_path / "home")
    assert_clean(proc)
    assert proc.returncode == 2 and "line 2: it is longer than 8 MiB" in proc.stderr, proc.stderr
    with History.open_readonly(path) as h:
        assert lab.count(h) == n + 2

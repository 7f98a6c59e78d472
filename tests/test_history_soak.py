"""Issue 42: serve, the app's desk and the CLI write one history at the same time, and nothing is lost.

About a minute, on private files in tmp_path: a real ``triage serve --history-file F`` (tests/serve_fake.py: the
command itself on the scripted engine) takes scores and labels over HTTP and answers ``GET /v1/tickets``, while
beside it, each in its own process, ``triage label --file`` stores thousands of labels at a time, ``triage score
--history`` keeps backlogs (the scripted engine through the real command), and a desk (the app's
:class:`~triage.tui.desk.Desk` on its history, opened and closed as the app is started and quit) scores and
labels; a reader here holds ``BEGIN IMMEDIATE`` and a read transaction for a second and a half now and then.
Afterwards SQLite's ``integrity_check`` is ``ok`` and every acknowledged write (HTTP 200, exit status 0, a desk
write that said no fault) is in the file. A refusal (409 locked, exit 1) is allowed: it is not acknowledged.

Before the fix (the server read the history's header with a plain ``open()`` on every label request, which
dropped its engine thread's SQLite locks) this lost acknowledged scores and labels.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from conftest import home_env  # noqa: E402
from fake_engine import FakeEngine  # noqa: E402
from test_serve import request  # noqa: E402
from test_serve_hardening import Served  # noqa: E402

from triage.domain.pack import default_pack  # noqa: E402
from triage.domain.ticket import make_ticket  # noqa: E402
from triage.store.history import History  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SOAK_S = 40.0  # how long the writers run side by side
SEEDED = 1000  # tickets scored before, for `label --file` (two labels each a run) and the HTTP labels
QUEUES = ("billing", "technical", "account", "shipping", "general")
URGENCIES = ("high", "medium", "low")

# `triage ARGS` with the scripted engine in place of a model (as tests/serve_fake.py does for `serve`).
FAKE_TRIAGE = f"""
import sys
sys.path.insert(0, {str(ROOT / "tests")!r})
sys.path.insert(0, {str(ROOT)!r})
from fake_engine import FakeEngine

class Fake(FakeEngine):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

import triage.scoring.loader as loader
loader.load_engine = lambda *a, **k: Fake(fixed_time=False)
from triage.cli import main
raise SystemExit(main(sys.argv[1:]))
"""

# The app's desk in its own process: opened as the app opens its history, a few tickets scored and answered,
# closed as the app is quit, again and again; prints what was acknowledged (no fault said).
DESK = f"""
import json, sys, time
sys.path.insert(0, {str(ROOT / "tests")!r})
sys.path.insert(0, {str(ROOT)!r})
from fake_engine import FakeEngine
from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.scoring.engine import TicketScored
from triage.store.history import History
from triage.tui.desk import Desk

path, until = sys.argv[1], time.time() + float(sys.argv[2])
engine, pack = FakeEngine(fixed_time=False), default_pack()
acked = {{"tickets": [], "labels": [], "faults": 0, "rounds": 0}}
r = 0
while time.time() < until:
    r += 1
    history = History.open(path)
    if history.path is None:  # kept in memory (locked when it opened): nothing of it is acknowledged
        acked["faults"] += 1
        history.close()
        time.sleep(0.2)
        continue
    faults = []
    desk = Desk(history, {{}}, on_fault=faults.append)
    for i in range(5):
        tid, text = f"D-{{r}}-{{i}}", f"Desk ticket {{r}}/{{i}}: the invoice was charged twice."
        before = len(faults)
        sub = desk.submit(make_ticket(text, tid), pack)
        desk.start(sub, engine)
        assert sub.claim()
        events = desk.score(engine, sub, cancel=sub.cancel.is_set)
        final = [e for e in events if isinstance(e, TicketScored)][-1]
        desk.decided(sub.id, final.result)
        if len(faults) == before:
            acked["tickets"].append(tid)
        crit = final.result.criteria[0]
        option = crit.options[-1].id
        if desk.answer(final.result, text, (sub.ticket_row, sub.score_id), crit.id, option):
            acked["labels"].append([tid, crit.id, option])
    acked["faults"] += len(faults)
    acked["rounds"] += 1
    history.close()
    time.sleep(0.3)
print(json.dumps(acked))
"""


def seed(path: Path) -> None:
    """SEEDED tickets L-0... scored (the scripted engine) and kept, as `score --history` keeps them."""
    engine, pack = FakeEngine(), default_pack()
    with History.open_writable(path) as h:
        for i in range(SEEDED):
            ticket = make_ticket(f"Seeded ticket {i}: my parcel has not arrived and I was charged twice.", f"L-{i}")
            result = engine.score_ticket(ticket, pack)
            row = h.save_ticket(ticket)
            h.finish_score(h.start_score(row, model=result.model, pack=result.pack, orderings=result.orderings), result)


class Writers:
    """What each writer was told was kept: the acknowledged writes, to find in the file afterwards."""

    def __init__(self) -> None:
        self.http_scores: list[str] = []
        self.http_labels: list[tuple[str, str, str]] = []
        self.http_refused: list[int] = []
        self.listed = 0
        self.file_runs: list[int] = []  # labels stored by each `label --file` that exited 0
        self.file_refused = 0
        self.score_runs: list[list[str]] = []  # the ids of each `score --history` that exited 0
        self.score_refused = 0
        self.holds = 0
        self.errors: list[str] = []

    def loop(self, until: float, step: Callable[[int], None]) -> threading.Thread:
        def run() -> None:
            i = 0
            while time.time() < until:
                try:
                    step(i)
                except Exception as exc:  # the test fails on it below, with what it was
                    self.errors.append(f"{step.__name__}: {exc!r}")
                    return
                i += 1

        t = threading.Thread(target=run, name=step.__name__, daemon=True)
        t.start()
        return t


def test_serve_the_desk_and_the_cli_write_one_history_and_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    path = tmp_path / "history.sqlite3"
    seed(path)
    script = tmp_path / "fake_triage.py"
    script.write_text(FAKE_TRIAGE, encoding="utf-8")
    env = home_env(home, COLUMNS="200")
    env.pop("TRIAGE_MODEL", None)
    w = Writers()

    served = Served(home, "--history-file", str(path))
    try:
        served.wait_serving()
        until = time.time() + SOAK_S
        desk = subprocess.Popen(
            [sys.executable, "-c", DESK, str(path), str(SOAK_S)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

        def http_score(i: int) -> None:
            tid = f"S-{i}"
            text = f"Served ticket {i}: the app crashes at login since the update."
            status, _, body = request(served.base, "POST", "/v1/score", {"id": tid, "text": text, "history": True})
            if status == 200:
                assert json.loads(body)["ticket_id"] == tid
                w.http_scores.append(tid)
            else:
                assert status == 409, (status, body[:500])  # the history was locked: said, not acknowledged
                w.http_refused.append(status)

        def http_label(i: int) -> None:
            tid = f"L-{(i * 7) % SEEDED}"
            option = ("angry", "upset", "neutral", "positive")[i % 4]
            status, _, body = request(served.base, "POST", "/v1/label", {"id": tid, "labels": {"sentiment": option}})
            if status == 200:
                w.http_labels.append((tid, "sentiment", option))
            else:
                assert status == 409, (status, body[:500])
                w.http_refused.append(status)
            if i % 10 == 0:
                status, _, body = request(served.base, "GET", "/v1/tickets?limit=20")
                assert status in (200, 409), (status, body[:500])
                w.listed += status == 200

        def label_file(i: int) -> None:
            rows = tmp_path / f"labels-{i}.jsonl"
            with rows.open("w", encoding="utf-8") as fh:
                for n in range(SEEDED):
                    labels = {"queue": QUEUES[(n + i) % len(QUEUES)], "urgency": URGENCIES[(n + i) % len(URGENCIES)]}
                    fh.write(json.dumps({"id": f"L-{n}", "labels": labels}) + "\n")
            proc = subprocess.run(
                [sys.executable, str(script), "label", "--file", str(rows), "--history-file", str(path)],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            if proc.returncode == 0:
                assert f"stored {2 * SEEDED} label(s) on {SEEDED} ticket(s)" in proc.stderr, proc.stderr
                w.file_runs.append(2 * SEEDED)
            else:
                assert proc.returncode == 1 and "locked" in proc.stderr, proc.stderr  # nothing stored, said so
                w.file_refused += 1

        def score_history(i: int) -> None:
            ids = [f"C-{i}-{n}" for n in range(40)]
            backlog = tmp_path / f"backlog-{i}.jsonl"
            backlog.write_text(
                "".join(json.dumps({"id": t, "text": f"Backlog {t}: where is my refund?"}) + "\n" for t in ids),
                encoding="utf-8",
            )
            proc = subprocess.run(
                [
                    sys.executable,
                    str(script),
                    "score",
                    str(backlog),
                    "--jsonl",
                    "--history",
                    "--history-file",
                    str(path),
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            if proc.returncode == 0:
                assert f"kept {len(ids)} scored ticket(s)" in proc.stderr, proc.stderr
                w.score_runs.append(ids)
            else:
                assert "locked" in proc.stderr, proc.stderr[-2000:]
                w.score_refused += 1
            time.sleep(0.5)

        def hold(i: int) -> None:
            time.sleep(4.0)
            conn = sqlite3.connect(path, timeout=10, isolation_level=None)
            try:
                conn.execute("BEGIN IMMEDIATE")  # the write lock, held: every writer waits or says "locked"
                time.sleep(1.5)
                conn.execute("ROLLBACK")
                conn.execute("BEGIN")  # a read transaction, held: the WAL cannot be checked in past it
                conn.execute("SELECT count(*) FROM labels").fetchone()
                time.sleep(1.5)
                conn.execute("COMMIT")
                w.holds += 1
            finally:
                conn.close()

        threads = [w.loop(until, f) for f in (http_score, http_label, label_file, score_history, hold)]
        for t in threads:
            t.join(SOAK_S + 180)
        out, err = desk.communicate(timeout=120)
        assert desk.returncode == 0, err[-3000:]
        desk_acked = json.loads(out)
    finally:
        code = served.stop()
    assert not w.errors, w.errors
    assert code == 143, served.stderr[-3000:]  # stopped by SIGTERM, as it says (128 + 15)
    assert "Traceback" not in served.stderr, served.stderr[-3000:]

    counts = {
        "http scores": len(w.http_scores),
        "http labels": len(w.http_labels),
        "http refused": len(w.http_refused),
        "ticket lists": w.listed,
        "label --file runs": len(w.file_runs),
        "label --file refused": w.file_refused,
        "score --history runs": len(w.score_runs),
        "score --history refused": w.score_refused,
        "desk tickets": len(desk_acked["tickets"]),
        "desk labels": len(desk_acked["labels"]),
        "desk faults": desk_acked["faults"],
        "holds": w.holds,
    }
    print(counts)  # what this run did (pytest -s shows it)
    # every writer had its turn: the test is about them side by side
    assert w.http_scores and w.http_labels and w.file_runs and w.score_runs and w.holds, counts
    assert desk_acked["tickets"] and desk_acked["labels"], counts

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        done = {
            tid
            for (tid,) in conn.execute(
                "SELECT t.ticket_id FROM tickets t JOIN scores s ON s.ticket = t.id WHERE s.status = 'done'"
            )
        }
        labels = {
            (tid, crit, opt, origin)
            for tid, crit, opt, origin in conn.execute(
                "SELECT t.ticket_id, l.criterion, l.option, l.origin FROM labels l JOIN tickets t ON t.id = l.ticket"
            )
        }
        by_file = conn.execute("SELECT count(*) FROM labels WHERE origin = 'file'").fetchone()[0]
    finally:
        conn.close()
    assert not [t for t in w.http_scores if t not in done], "acknowledged HTTP scores lost"
    assert not [lab for lab in w.http_labels if (*lab, "serve") not in labels], "acknowledged HTTP labels lost"
    assert by_file == sum(w.file_runs), "labels of `label --file` runs that exited 0, lost (or a refused run's kept)"
    assert not [t for ids in w.score_runs for t in ids if t not in done], "`score --history` tickets lost"
    assert not [t for t in desk_acked["tickets"] if t not in done], "the desk's scores lost"
    assert not [lab for lab in desk_acked["labels"] if (*lab, "app") not in labels], "the desk's labels lost"
    assert all(f"L-{n}" in done for n in range(SEEDED))  # the seeded history is all there

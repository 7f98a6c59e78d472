"""Issue 42: a stored time that is no time (milliseconds, text, infinity) is shown as unknown, never a traceback.

One score row with ``started_at`` in milliseconds made ``triage history --json`` die with "year 318857 is out
of range". Every listing shows such a time as ``unknown`` (``--json``: ``"time": null`` with ``"time_raw"``):
``triage history`` (the table, the narrow paragraphs, ``--json``) and the app's history screen.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from conftest import assert_clean
from fake_engine import FakeEngine, fake_app, wait_until

from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.store import times
from triage.store.history import History

NOW = time.time()
BAD = {"MS-1": NOW * 1000, "TEXT-1": "yesterday", "INF-1": float("inf"), "NEG-1": -1e20}


def history_with_bad_times(path: Path) -> None:
    engine, pack = FakeEngine(), default_pack()
    with History.open_writable(path) as h:
        for tid in ("OK-1", *BAD):
            ticket = make_ticket(f"Ticket {tid}: my parcel is late.", tid)
            result = engine.score_ticket(ticket, pack)
            row = h.save_ticket(ticket)
            h.finish_score(h.start_score(row, model=result.model, pack=result.pack, orderings=result.orderings), result)
    conn = sqlite3.connect(path)
    for tid, value in BAD.items():  # as another writer (or a hand) stored them
        conn.execute(
            "UPDATE scores SET started_at = ? WHERE ticket = (SELECT id FROM tickets WHERE ticket_id = ?)", (value, tid)
        )
    conn.commit()
    conn.close()


def test_times_that_are_no_time_are_unknown() -> None:
    assert times.seconds(NOW) == NOW and times.iso(0) == "1970-01-01T00:00:00+00:00"
    for value in (*BAD.values(), float("nan"), None, True, b"1"):
        assert times.seconds(value) is None and times.shown(value) == "unknown" and times.iso(value) is None
    assert times.raw(float("inf")) == "inf" and times.raw(NOW * 1000) == NOW * 1000


def test_triage_history_lists_a_history_with_times_out_of_range(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "history.sqlite3"
    history_with_bad_times(path)
    proc = cli(["history", "--json", "--history-file", str(path)])
    assert_clean(proc)
    assert proc.returncode == 0, proc.stderr
    listed = {r["id"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert set(listed) == {"OK-1", *BAD}
    assert listed["OK-1"]["time"] is not None and "time_raw" not in listed["OK-1"]
    for tid, value in BAD.items():
        assert listed[tid]["time"] is None, tid
        assert listed[tid]["time_raw"] == (str(value) if value == float("inf") else value), tid
    for columns in ("200", "40"):  # the table, and the paragraphs of a narrow console
        proc = cli(["history", "--history-file", str(path)], env={"COLUMNS": columns})
        assert_clean(proc)
        assert proc.returncode == 0 and proc.stdout.count("unknown") == len(BAD), proc.stdout
        assert "OK-1" in proc.stdout and "MS-1" in proc.stdout


async def test_the_apps_history_screen_lists_them(tmp_path: Path, monkeypatch: Any) -> None:
    from textual.widgets import DataTable

    from triage.store.paths import user_dirs
    from triage.tui.screens.history import HistoryScreen

    history_with_bad_times(user_dirs().history_db)
    app = fake_app()
    async with app.run_test(size=(120, 32)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen), what="the history screen")
        table = app.screen.query_one(DataTable)
        await wait_until(pilot, lambda: table.row_count == 1 + len(BAD), what="every row listed")
        shown = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert shown.count("unknown") == len(BAD), shown

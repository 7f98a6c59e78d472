"""The app's desk (triage/tui/desk.py), driven without a terminal: submissions, their history rows, labels, faults.

The desk decides and keeps; the main screen shows (its own tests drive the real app through ``run_test``). Here
a fake engine and a real SQLite history file.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fake_engine import FakeEngine

from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.errors import InputError
from triage.scoring.engine import TicketScored
from triage.store import labels as lab
from triage.store.history import History
from triage.tui.desk import Desk

PACK = default_pack()


@pytest.fixture
def history(tmp_path: Path):  # type: ignore[no-untyped-def]
    h = History.open_writable(tmp_path / "history.sqlite3")
    yield h
    h.close()


def desk_of(history: History, **config: object) -> tuple[Desk, list[str]]:
    faults: list[str] = []
    return Desk(history, dict(config), on_fault=faults.append), faults


def run_to_end(desk: Desk, engine: FakeEngine, sub) -> TicketScored:  # type: ignore[no-untyped-def]
    """What the screen's score worker does, on this thread: claim, then the desk's one session call."""
    assert sub.claim()
    final = [e for e in desk.score(engine, sub, cancel=sub.cancel.is_set) if isinstance(e, TicketScored)]
    return final[-1]


def in_a_worker(fn):  # type: ignore[no-untyped-def]
    """Run ``fn`` on another thread, as the app's score worker runs, and return what it returned."""
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(30)
    return out[0]


def test_a_submission_is_saved_at_once_then_scored_and_kept(history: History) -> None:
    desk, faults = desk_of(history)
    engine = FakeEngine()
    sub = desk.submit(make_ticket("My parcel is late", "T-1"), PACK)
    [entry] = history.search()  # saved before any model is up: a crash keeps the ticket
    assert entry.ticket_id == "T-1" and entry.score_id is None and desk.scoring and desk.is_current(sub.id)
    desk.start(sub, engine)
    final = in_a_worker(lambda: run_to_end(desk, engine, sub))  # kept by the worker, on a connection of its own
    assert sub.score_id is not None and history.search()[0].status == "done"
    assert desk.decided(sub.id, final.result) is sub and not desk.scoring and not faults
    assert desk.decided(sub.id, final.result) is None  # a second answer for it is unknown


def test_the_score_row_runs_while_the_worker_scores(history: History) -> None:
    desk, faults = desk_of(history)
    engine = FakeEngine(hold_after=1)
    sub = desk.submit(make_ticket("My parcel is late", "T-1"), PACK)
    desk.start(sub, engine)
    t = threading.Thread(target=lambda: run_to_end(desk, engine, sub))
    t.start()
    assert engine.held.wait(10)
    assert sub.score_id is not None and history.search()[0].status == "running"
    engine.gate.set()
    t.join(10)
    assert history.search()[0].status == "done" and not faults


def test_a_new_submission_supersedes_one_whose_worker_never_began(history: History) -> None:
    desk, _ = desk_of(history)
    engine = FakeEngine()
    first = desk.submit(make_ticket("first"), PACK)
    desk.start(first, engine)
    second = desk.submit(make_ticket("second"), PACK)
    assert first.cancel.is_set() and first.finished and not first.claim()  # the desk ended it, not its worker
    assert desk.is_current(second.id) and not desk.is_current(first.id)
    rows = {e.preview: (e.score_id is not None, e.status) for e in history.search()}
    assert rows["first"] == (True, "cancelled") and rows["second"][0] is False  # the second is not started yet


def test_a_stale_result_is_kept_but_is_not_current(history: History) -> None:
    desk, _ = desk_of(history)
    engine = FakeEngine()
    first = desk.submit(make_ticket("first"), PACK)
    desk.start(first, engine)
    assert first.claim()  # its worker began before the next submit
    second = desk.submit(make_ticket("second"), PACK)
    assert first.cancel.is_set() and not first.finished  # its worker posts the (cancelled) result itself
    final = [e for e in desk.score(engine, first, cancel=lambda: False)][-1]
    assert desk.decided(first.id, final.result) is first and not desk.is_current(first.id)
    assert desk.is_current(second.id)
    assert [e.status for e in history.search() if e.preview == "first"] == ["done"]


def test_escape_before_the_model_is_up_leaves_no_score_row(history: History) -> None:
    desk, _ = desk_of(history)
    sub = desk.submit(make_ticket("waiting for the model"), PACK)
    desk.pending = sub
    assert desk.cancel() == "unstarted" and desk.pending is None and not desk.scoring
    assert [e.score_id for e in history.search()] == [None]
    assert desk.cancel() is None  # nothing runs any more


def test_escape_while_scoring_lets_the_worker_end_it(history: History) -> None:
    desk, _ = desk_of(history)
    engine = FakeEngine(hold_after=1)
    sub = desk.submit(make_ticket("long one"), PACK)
    desk.start(sub, engine)
    assert sub.claim()
    out: list[TicketScored] = []

    def worker() -> None:
        events = desk.score(engine, sub, cancel=sub.cancel.is_set)
        out.extend(e for e in events if isinstance(e, TicketScored))

    t = threading.Thread(target=worker)
    t.start()
    assert engine.held.wait(10)
    assert desk.cancel() == "cancelling"
    t.join(10)
    assert not out[-1].result.complete
    desk.decided(sub.id, out[-1].result)
    assert history.search()[0].status == "cancelled"


def test_a_history_kept_in_memory_is_written_on_its_own_thread_through_the_keeper() -> None:
    import queue

    from triage.store.history_open import connect

    history = History(connect(None, "rw"), None, "kept in memory only")  # as when the file was locked at start
    desk, faults = desk_of(history)
    engine = FakeEngine()
    sub = desk.submit(make_ticket("kept in memory", "T-M"), PACK)
    desk.start(sub, engine)
    writes: queue.Queue[object] = queue.Queue()

    def keeper(write):  # type: ignore[no-untyped-def]
        done = threading.Event()
        writes.put((write, done))
        done.wait(10)

    t = threading.Thread(target=lambda: run_to_end_with(desk, engine, sub, keeper))
    t.start()
    while t.is_alive() or not writes.empty():  # this thread is the history's (the app's screen)
        try:
            write, done = writes.get(timeout=0.05)  # type: ignore[misc]
        except queue.Empty:
            continue
        write()
        done.set()
    t.join(10)
    assert [e.status for e in history.search()] == ["done"] and not faults
    history.close()


def run_to_end_with(desk: Desk, engine: FakeEngine, sub, keeper) -> None:  # type: ignore[no-untyped-def]
    assert sub.claim()
    list(desk.score(engine, sub, cancel=sub.cancel.is_set, keeper=keeper))


def test_answers_are_labels_and_the_refit_comes_due(history: History) -> None:
    desk, _ = desk_of(history, auto_learn=True, auto_learn_every=2)
    engine = FakeEngine()
    sub = desk.submit(make_ticket("Charged twice", "T-2"), PACK)
    desk.start(sub, engine)
    result = run_to_end(desk, engine, sub).result
    desk.decided(sub.id, result)
    rows = (sub.ticket_row, sub.score_id)
    crit = PACK.criteria[0]
    assert desk.answer(result, "Charged twice", rows, crit.id, crit.options[0].id) and not desk.learn_due
    assert desk.answer(result, "Charged twice", rows, PACK.criteria[1].id, PACK.criteria[1].options[0].id)
    assert desk.learn_due and desk.labels_since_fit == 2
    assert lab.current(history, sub.ticket_row)[crit.id].option == crit.options[0].id  # type: ignore[arg-type]
    with pytest.raises(InputError):
        desk.answer(result, "Charged twice", rows, crit.id, "no-such-option")
    assert desk.labels_since_fit == 2
    assert not desk.answer(result, "Charged twice", (None, None), crit.id, crit.options[0].id)  # no history rows


def test_a_history_that_cannot_be_written_is_said_and_scoring_goes_on(history: History) -> None:
    desk, faults = desk_of(history)
    engine = FakeEngine()
    history.conn.close()  # every write now fails (sqlite3.ProgrammingError)
    sub = desk.submit(make_ticket("still scored"), PACK)
    assert sub.ticket_row is None and faults and faults[0].startswith("Could not save to history")
    desk.start(sub, engine)
    final = run_to_end(desk, engine, sub)
    assert final.result.complete and desk.decided(sub.id, final.result) is sub


def test_the_desk_never_imports_textual() -> None:
    import subprocess
    import sys

    code = "import sys, triage.tui.desk; print('textual' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"

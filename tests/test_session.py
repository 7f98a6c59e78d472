"""The one scoring session (triage/session.py): scoring, the fit policy and the history, for every front end.

A fake engine (tests/fake_engine.py) and a real SQLite history file; the real engine's keeping of what a head
reads is covered through ``triage score --history`` (tests/test_score_cli.py) and the app's tests.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeEngine

from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.errors import TriageError
from triage.learning.fit import Fits
from triage.scoring.engine import Prefilled, TicketScored
from triage.scoring.options import ScoreOptions
from triage.session import Session
from triage.store import labels as lab
from triage.store.history import History

ROOT = Path(__file__).resolve().parents[1]
PACK = default_pack()


def statuses(path: Path) -> list[str]:
    with History.open(path) as h:
        return [e.status for e in reversed(h.search())]


def test_score_keeps_the_ticket_before_the_engine_starts_and_the_result_when_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    engine = FakeEngine(hold_after=2)
    session = Session(engine, history_path=path)
    seen: list[str] = []

    def run() -> None:
        for event in session.score(make_ticket("My parcel never came.", "T-1"), PACK, ScoreOptions(), keep=True):
            seen.append(type(event).__name__)

    t = threading.Thread(target=run)
    t.start()
    assert engine.held.wait(10), "the engine never reached its hold"
    assert statuses(path) == ["running"]  # saved, in its own transaction, while the engine works
    engine.gate.set()
    t.join(10)
    assert seen[0] == "Prefilled" and seen[-1] == "TicketScored" and seen.count("CriterionScored") == len(PACK.criteria)
    assert statuses(path) == ["done"]
    with History.open(path) as h:
        [entry] = h.search()
        assert entry.ticket_id == "T-1" and h.load(entry.score_id).result is not None  # type: ignore[arg-type]


def test_a_cancelled_score_is_kept_cancelled_never_running(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    engine = FakeEngine(hold_after=1)
    session = Session(engine, history_path=path)
    stop = threading.Event()
    events: list[Any] = []

    def run() -> None:
        events.extend(session.score(make_ticket("Refund please"), PACK, ScoreOptions(), keep=True, cancel=stop.is_set))

    t = threading.Thread(target=run)
    t.start()
    assert engine.held.wait(10)
    stop.set()
    t.join(10)
    final = events[-1]
    assert isinstance(final, TicketScored) and not final.result.complete
    assert statuses(path) == ["cancelled"]


class FailingEngine(FakeEngine):
    """Fails after its prefill, as the real engine does on a full KV cache."""

    def score(self, *args: Any, **kw: Any):  # type: ignore[no-untyped-def]
        for event in super().score(*args, **kw):
            yield event
            if isinstance(event, Prefilled):
                raise TriageError("the KV cache is full")


def test_an_engine_error_is_kept_as_the_scores_error_then_raised(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    session = Session(FailingEngine(), history_path=path)
    with pytest.raises(TriageError, match="KV cache is full"):
        list(session.score(make_ticket("Help"), PACK, ScoreOptions(), keep=True))
    assert statuses(path) == ["failed"]
    with History.open(path) as h:
        [entry] = h.search()
        assert h.load(entry.score_id).error == "the KV cache is full"  # type: ignore[arg-type]


def test_without_keep_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    session = Session(FakeEngine(), history_path=path)
    events = list(session.score(make_ticket("Hello"), PACK, ScoreOptions()))
    assert isinstance(events[-1], TicketScored) and not session.history_open and not path.exists()


def test_score_many_keeps_each_ticket_and_each_failure_in_input_order(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    session = Session(FakeEngine(), history_path=path)
    tickets = [make_ticket(text, f"T-{i}") for i, text in enumerate(["Late parcel", "FAIL here", "Locked out"])]
    out = list(session.score_many(iter(tickets), PACK, ScoreOptions(), keep=True))
    assert [t.id for t, _, _ in out] == ["T-0", "T-1", "T-2"]
    assert [isinstance(done, TriageError) for _, _, done in out] == [False, True, False]
    assert all(scoring.kept for _, scoring, _ in out)
    session.close()
    assert statuses(path) == ["done", "failed", "done"]


def test_the_fit_policy_is_asked_again_for_every_ticket_unless_fits_are_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    import triage.session as session_mod

    asked: list[str] = []
    real = session_mod.choose_fits

    def counting(model: Any, pack: Any, options: Any, request: Any = None) -> Fits:
        asked.append(pack.name)
        return real(model, pack, options, request)

    monkeypatch.setattr(session_mod, "choose_fits", counting)
    session = Session(FakeEngine())
    for text in ("one", "two"):
        list(session.score(make_ticket(text), PACK, ScoreOptions()))
    assert asked == [PACK.name, PACK.name]  # a head stored meanwhile is applied from the next ticket on
    fixed = Session(FakeEngine(), fits=Fits())
    list(fixed.score(make_ticket("three"), PACK, ScoreOptions()))
    assert asked == [PACK.name, PACK.name]  # Ray's workers: the driver chose


def test_a_session_without_an_engine_keeps_and_labels_but_does_not_score(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    scored = Session(FakeEngine(), history_path=path)
    events = list(scored.score(make_ticket("Charged twice", "T-9"), PACK, ScoreOptions(), keep=True))
    scored.close()
    history = History.open_writable(path)
    keeper = Session(None, history=history)
    with pytest.raises(TriageError, match="no model is loaded"):
        keeper.fits(PACK, ScoreOptions())
    [entry] = history.search()
    result = events[-1].result
    crit = PACK.criteria[0]
    target = lab.ScoredTicket(entry.ticket_row, "T-9", "Charged twice", entry.score_id, result)  # type: ignore[arg-type]
    keeper.label(target, [lab.Answer(crit.id, crit.options[-1].id)], origin="app")
    assert lab.current(history, entry.ticket_row)[crit.id].option == crit.options[-1].id
    keeper.close()  # not the session's to close
    assert history.search()
    history.close()


def test_failures_are_typed_and_keep_their_hint(tmp_path: Path) -> None:
    from triage.errors import EngineError, FitError, HistoryError, InputError
    from triage.session import FitRequest

    with pytest.raises(FitError) as fit:  # an explicit head that cannot be read: nothing is kept
        list(
            Session(FakeEngine(), request=FitRequest(head=str(tmp_path / "no.npz"))).score(
                make_ticket("x"), PACK, ScoreOptions()
            )
        )
    assert isinstance(fit.value, InputError) and fit.value.exit_code == 2
    with pytest.raises(EngineError) as engine:
        list(
            Session(FailingEngine(), history_path=tmp_path / "h.sqlite3").score(
                make_ticket("x"), PACK, ScoreOptions(), keep=True
            )
        )
    assert engine.value.message == "the KV cache is full"
    (tmp_path / "dir.sqlite3").mkdir()  # a history that cannot be opened for writing
    with pytest.raises(HistoryError):
        list(
            Session(FakeEngine(), history_path=tmp_path / "dir.sqlite3").score(
                make_ticket("x"), PACK, ScoreOptions(), keep=True
            )
        )


def test_a_lenient_session_passes_a_calibration_that_does_not_fit_over_with_a_notice(tmp_path: Path) -> None:
    from triage.session import FitRequest

    session = Session(FakeEngine(), request=FitRequest(calibration=str(tmp_path / "missing.json")))
    fits = session.fits(PACK, ScoreOptions(), lenient=True)
    said = Session.notices(fits)
    assert fits.calibration is None and said["calibration"] and said["calibration"].endswith("scoring without it")


def test_a_history_that_refuses_is_said_through_on_fault_and_scoring_goes_on(tmp_path: Path) -> None:
    history = History.open_writable(tmp_path / "h.sqlite3")
    history.conn.close()  # every write now fails
    faults: list[str] = []
    session = Session(FakeEngine(), history=history, on_fault=faults.append)
    events = list(session.score(make_ticket("still scored"), PACK, ScoreOptions(), keep=True))
    assert events[-1].result.complete and faults and faults[0].startswith("Could not save to history")


def test_a_score_on_another_thread_keeps_through_its_own_connection(tmp_path: Path) -> None:
    history = History.open_writable(tmp_path / "h.sqlite3")  # this thread's, as the app's screen holds it
    session = Session(FakeEngine(), history=history)
    t = threading.Thread(
        target=lambda: list(session.score(make_ticket("on a worker"), PACK, ScoreOptions(), keep=True))
    )
    t.start()
    t.join(30)
    assert [e.status for e in history.search()] == ["done"]
    history.close()


def test_serve_maps_each_failure_to_its_status_in_one_place() -> None:
    from triage.errors import EngineError, FitError, ResultNotKept
    from triage.serve.worker import error_event
    from triage.store.history_faults import HistoryLocked

    assert error_event(FitError("head h.npz does not fit", hint="learn again"))["status"] == 422
    assert error_event(EngineError("the KV cache is full"))["status"] == 422
    assert error_event(HistoryLocked(None, "the history is locked"))["status"] == 409
    event = error_event(ResultNotKept("the ticket was scored but its result could not be kept: locked", hint="retry"))
    assert event == {
        "status": 409,
        "error": "the ticket was scored but its result could not be kept: locked",
        "hint": "retry",
    }

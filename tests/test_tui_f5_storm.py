"""F5 pressed 20 times fast: every score row in history ends (done or cancelled), none stays "unfinished".

Before, each press started a thread worker and the next press cancelled it; a worker
cancelled before its thread ran (Textual's pool has a few threads; the rest queue) never
ran its body, so its history row stayed ``running`` for ever.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events

from triage.scoring.engine import TicketScored

TICKET = "My card was charged twice for the same order; please refund one of them."


async def test_f5_twenty_times_fast_leaves_no_unfinished_history_row() -> None:
    engine = FakeEngine(delay=0.05)  # each criterion takes a while: presses land mid-score
    app = fake_app(FakeFactory(engine))
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")
        main = app.main
        main.ticket.set_ticket(TICKET)
        for _ in range(20):  # as a terminal delivers a burst: the keys, one after another, no pause between
            app.post_message(events.Key("f5", None))
        await wait_until(
            pilot, lambda: main.result is not None and main.result.complete, timeout=30, what="the last result"
        )
        await wait_until(
            pilot,
            lambda: all(e.status != "running" for e in app.history.search()),
            timeout=10,
            what="every score row to end",
        )
        entries = [e for e in app.history.search() if e.score_id is not None]
        assert len(entries) == 20
        assert sorted({e.status for e in entries}) == ["cancelled", "done"]
        assert sum(e.status == "done" for e in entries) == 1  # the last press's
        assert main.current is not None and main.current.finished and not main.desk.subs
        assert len(engine.scored) < 20  # a press superseded before its turn is never scored at all


async def test_f5_then_escape_in_one_burst_ends_the_row_as_cancelled() -> None:
    # Every score holds after its first criterion until the gate opens (never here), so the last one is still
    # running when Escape is handled, however slowly the app gets to it. (With only a delay, a loaded machine
    # could finish the last score before Escape was handled: a complete result, rightly kept as done.)
    engine = FakeEngine(delay=0.05, hold_after=1)
    app = fake_app(FakeFactory(engine))
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")
        main = app.main
        main.ticket.set_ticket(TICKET)
        for _ in range(5):
            app.post_message(events.Key("f5", None))
        app.post_message(events.Key("escape", None))
        await wait_until(pilot, lambda: len(app.history.search()) == 5, timeout=10, what="the five rows")
        await wait_until(pilot, lambda: not main.scoring, timeout=10, what="the cancel")
        await wait_until(
            pilot,
            lambda: all(e.status == "cancelled" for e in app.history.search()),
            timeout=10,
            what="every row cancelled",
        )
        assert len(app.history.search()) == 5 and (main.result is None or not main.result.complete)


class SlowToStop(FakeEngine):
    """Takes a while to return once cancelled, as a decode without an abort check would."""

    def score(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for event in super().score(*args, **kwargs):
            if isinstance(event, TicketScored) and not event.result.complete:
                time.sleep(0.5)  # the app is closing meanwhile: no screen reads this result any more
            yield event


async def test_quitting_while_a_score_runs_ends_its_row_as_cancelled() -> None:
    from triage.store.history import History

    engine = SlowToStop(hold_after=1)
    app = fake_app(FakeFactory(engine))
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")
        app.main.ticket.set_ticket(TICKET)
        await pilot.press("f5")
        await wait_until(pilot, engine.held.is_set, what="the score to be under way")
        await pilot.press("ctrl+q")
    history = History.open()
    try:
        assert [e.status for e in history.search()] == ["cancelled"]  # not "unfinished"
    finally:
        history.close()

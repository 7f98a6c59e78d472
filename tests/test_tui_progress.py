"""The app before and during a long paste's score: the expected time under the ticket, a bar while it reads.

With the scripted engine: the token count line says "about N s" once the engine has measured its rate
(never before), from the ticket cut to its budget, so a paste twice as long is expected to take as long;
during the prefill the summary shows a bar of the tokens done, and Esc still cancels at once.
"""

from __future__ import annotations

from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until

from triage.lab import debias
from triage.scoring.prompt import TICKET_TOKENS
from triage.tui.app import TriageApp
from triage.tui.counting import decode_overhead
from triage.tui.widgets.score_summary import about_seconds

LOG = "".join(
    f"2026-12-01T10:{i % 60:02d}:00Z ERROR worker-{i % 7} job {i} failed: timeout after 30s\n" for i in range(400)
)


async def ready(app: TriageApp, pilot: object) -> None:
    await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")


def subtitle(app: TriageApp) -> str:
    return str(app.main.ticket.border_subtitle)


async def test_the_count_line_says_about_how_long_from_the_measured_rate() -> None:
    engine = FakeEngine()
    app = fake_app(FakeFactory(engine))
    async with app.run_test(size=(110, 32)) as pilot:
        await ready(app, pilot)
        main = app.main
        main.ticket.set_ticket("Where is my parcel?")
        await wait_until(pilot, lambda: "tokens" in subtitle(app), what="the token count")
        assert "about" not in subtitle(app) and "under" not in subtitle(app)  # nothing measured yet: no guess
        engine.speed.record(100, 1000.0)  # what a score measures: 100 tokens a second
        orders = [debias.orders_for(len(c.options), "none") for c in app.pack.criteria]
        overhead = decode_overhead(engine.builder(app.pack), orders, engine.n_ctx)
        for text in (LOG, LOG + LOG):  # 32 KB and 64 KB: both cut to the budget, so both take as long
            main.ticket.set_ticket(text)
            want, counted = about_seconds((TICKET_TOKENS + overhead) / 100), f"{len(text.strip()):,} tokens"
            await wait_until(pilot, lambda c=counted: c in subtitle(app), what="the whole paste's count")
            assert want in subtitle(app) and f"over the {TICKET_TOKENS}-token budget" in subtitle(app)
        main.ticket.set_ticket("Where is my parcel?")
        short = about_seconds((len("Where is my parcel?") + overhead) / 100)
        await wait_until(pilot, lambda: f"of {TICKET_TOKENS:,}" in subtitle(app) and short in subtitle(app))


async def test_a_bar_moves_during_the_prefill_and_escape_cancels_at_once() -> None:
    engine = FakeEngine(prefill_steps=4, prefill_hold_at=2)
    app = fake_app(FakeFactory(engine))
    async with app.run_test(size=(110, 32)) as pilot:
        await ready(app, pilot)
        main = app.main
        main.ticket.set_ticket(LOG)
        await pilot.press("f5")
        await wait_until(pilot, engine.held.is_set, what="the fake to hold half-way through its prefill")
        await wait_until(pilot, lambda: "50%" in str(main.summary.render()), what="the bar at 50%")
        shown = str(main.summary.render())
        assert "reading the ticket" in shown and "━" in shown and "─" in shown and "esc cancels" in shown
        assert all(c.state != "done" for c in main.decisions.cards)  # nothing decided during the prefill
        await pilot.press("escape")
        await wait_until(pilot, lambda: not main.scoring, what="the cancel")
        assert main.result is not None and not main.result.complete and main.result.criteria == []
        # the next ticket runs its prefill to the end, and its cards fill
        engine.prefill_hold_at = None
        main.ticket.set_ticket(LOG + "one more line")
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None and main.result.complete, what="the second result")
        assert [c.state for c in main.decisions.cards] == ["done"] * len(app.pack.criteria)

"""A thread in the app on the real smollm2-135m: score a ticket, add an agent reply (F9), and the re-score
evaluates only the new message and the tails (the summary line's numbers are the engine's); history keeps one
ticket with two decisions, and the timeline shows both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_engine import fake_app, wait_until
from textual import events

from triage.scoring.engine import Engine
from triage.scoring.prefix_store import common_length
from triage.tui.screens.timeline import TimelineScreen

pytestmark = [pytest.mark.model, pytest.mark.slow]

TICKET = "My parcel has said 'in transit' for 9 days. Order 4411. Where is it?"
AGENT = "Sorry about the delay. I have asked the carrier for a trace; expect news in two days."


async def test_a_reply_is_scored_at_the_cost_of_its_own_tokens(smollm2_path: Path) -> None:
    def factory(requested: str | None, notice: Any) -> Engine:
        return Engine(smollm2_path, name="smollm2-135m", stand_in=True, n_ctx=2048)

    app = fake_app(factory, config={})
    async with app.run_test(size=(110, 40)) as pilot:
        main = app.main
        await wait_until(pilot, lambda: main.model_state == "ready", timeout=120, what="smollm2-135m to load")

        async def scored(*keys: str) -> Any:
            before = main.result
            await pilot.press(*keys)
            await wait_until(
                pilot,
                lambda: main.result is not None and main.result is not before and not main.scoring,
                timeout=180,
                what="the score",
            )
            return main.result

        app.post_message(events.Paste(TICKET))
        await wait_until(pilot, lambda: main.ticket.ticket_text == TICKET, what="the paste")
        first = await scored("f5")
        await pilot.press("f9")  # the box turns to the thread; the editor takes the reply
        assert main.composing and main.ticket.text == ""
        app.post_message(events.Paste(AGENT))
        await wait_until(pilot, lambda: main.ticket.ticket_text == AGENT, what="the reply")
        second = await scored("f9")

        # only the new message (and the tails) went through the model: the engine's own counts
        engine = main.host.engine
        assert engine is not None
        builder = engine.builder(app.pack, second.readout)
        orders = [[tuple(range(len(c.options)))] for c in app.pack.criteria]
        old = builder.build(TICKET, orders, n_ctx=engine.n_ctx).prefix
        new = builder.build(main.open_ticket.text, orders, n_ctx=engine.n_ctx, messages=main.open_ticket.messages)
        shared = common_length(old, new.prefix)
        assert second.ticket_id == first.ticket_id and TICKET in main.open_ticket.text
        assert second.thread.messages == 2 and second.thread.previous == 1 and second.thread.edited is None
        assert second.thread.reused == shared - len(builder.stable_tokens) > 0
        assert second.tokens.evaluated == len(new.prefix) - shared + second.tokens.tails
        assert second.tokens.evaluated < first.tokens.evaluated
        summary = main.summary.details_text  # the engine's figures (ctrl+o)
        want = f"evaluated {second.tokens.evaluated} tokens, reused {second.thread.reused} of the thread"
        assert want in summary, summary

        # history: one thread (one ticket row) with a decision per message
        entries = app.history.search()
        assert len({e.ticket_row for e in entries}) == 1
        assert sorted((e.scored, e.messages, e.status) for e in entries) == [(1, 2, "done"), (2, 2, "done")]
        assert [m.role for m in app.history.thread(main.open_row)] == ["customer", "agent"]

        # the timeline shows both
        await pilot.press("ctrl+t")
        await wait_until(pilot, lambda: isinstance(app.screen, TimelineScreen))
        points = app.screen.points
        assert [p.messages for p in points] == [1, 2]
        assert [p.result.to_dict() for p in points] == [first.to_dict(), second.to_dict()]
        print(
            f"turn 2: evaluated {second.tokens.evaluated} (tails {second.tokens.tails}), reused {second.thread.reused};"
            f" turn 1 evaluated {first.tokens.evaluated}"
        )

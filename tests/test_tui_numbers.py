"""Honest numbers on the main screen (issue 40): criteria read in one shared decode say "shared", never
``0 ms · 0 tok``; the token count is on the box it describes; the time estimate counts the tokens the rate was
measured on; a cancelled score says what it did. Scripted engine, the real app."""

from __future__ import annotations

from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events

from triage.domain.pack import default_pack
from triage.lab import debias
from triage.store.export import to_markdown
from triage.tui.app import TriageApp
from triage.tui.counting import count_ticket, decode_overhead

TICKET = "My parcel has said 'in transit' for nine days. Order 4411. Please send a replacement."
REPLY = "Sorry about the delay. I have asked the carrier for a trace."


async def _scored(app: TriageApp, pilot: object, text: str = TICKET) -> None:
    await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
    app.post_message(events.Paste(text))
    await wait_until(pilot, lambda: bool(app.main.ticket.ticket_text), what="the paste")
    await pilot.press("f5")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: app.main.result is not None and not app.main.scoring, what="the result")


async def test_cards_of_a_shared_decode_say_shared_never_0_ms_0_tok() -> None:
    app = fake_app(FakeFactory(FakeEngine(shared=True)))
    async with app.run_test(size=(140, 45)) as pilot:
        await _scored(app, pilot)
        cards = app.main.decisions.cards
        await pilot.pause(0.1)
        edges = [str(c.border_subtitle) for c in cards]
        assert all("0 ms · 0 tok" not in e for e in edges), edges
        assert all(e.endswith("shared") for e in edges[1:]), edges
        assert "tok · shared" in edges[0], edges  # the carrier: the decode's figures, said to be shared


async def test_the_count_is_on_the_box_it_describes() -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(140, 45)) as pilot:
        await _scored(app, pilot)
        main = app.main
        await pilot.press("f9")
        main.ticket.insert(REPLY)
        await wait_until(pilot, lambda: "with this message" in str(main.thread_view.border_subtitle), what="count")
        assert "tokens" not in str(main.ticket.border_subtitle)
        await pilot.press("f9")
        await wait_until(pilot, lambda: main.result is not None and main.result.thread.messages == 2, what="reply")
        await wait_until(pilot, lambda: str(main.thread_view.border_subtitle).startswith("thread: "), what="recount")
        # the editor is empty: it shows no count of the reply that was in it
        assert main.ticket.text == "" and "tokens" not in str(main.ticket.border_subtitle)


def test_the_estimate_counts_the_tails_and_the_kept_thread_that_the_last_score_measured() -> None:
    pack = default_pack()
    engine = FakeEngine()
    builder = engine.builder(pack)
    orders = [debias.orders_for(len(c.options), "none") for c in pack.criteria]
    every = count_ticket(TICKET, pack, orders, builder=builder, n_ctx=engine.n_ctx)
    one_cue = count_ticket(TICKET, pack, orders, builder=builder, n_ctx=engine.n_ctx, tails=12)
    assert every is not None and one_cue is not None
    block = decode_overhead(builder, orders, engine.n_ctx, tails=0)
    assert one_cue.decode_tokens == len(TICKET) + block + 12 < every.decode_tokens
    reply = count_ticket(TICKET, pack, orders, builder=builder, n_ctx=engine.n_ctx, tails=12, kept=len(TICKET) - 5)
    assert reply is not None and reply.decode_tokens == 5 + block + 12


async def test_a_cancelled_score_says_what_it_read_not_a_prefill_of_0_ms() -> None:
    engine = FakeEngine(prefill_steps=5, prefill_hold_at=1)
    app = fake_app(FakeFactory(engine))
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
        main = app.main
        main.ticket.set_ticket(TICKET)
        await pilot.press("f5")
        await wait_until(pilot, engine.held.is_set, what="the read at 20%")
        await wait_until(pilot, lambda: "20%" in str(main.summary.render()), what="the bar at 20%")
        await pilot.press("escape")
        await wait_until(pilot, lambda: main.result is not None and not main.scoring, what="the cancel")
        result = main.result
        assert not result.complete
        total = result.tokens.evaluated
        assert f"read {total // 5:,} of {total:,} tokens (20%), no decision made" in main.summary.details_text
        for shown in (main.summary.details_text, main.summary.brief_text, to_markdown(result)):
            assert "prefill 0 ms" not in shown and f"evaluated {total}" not in shown, shown
        assert "cancelled" in main.summary.brief_text


async def test_a_warning_is_short_on_its_card_and_explained_once() -> None:
    app = fake_app(FakeFactory(FakeEngine(low_coverage=("queue", "urgency"))))
    async with app.run_test(size=(140, 45)) as pilot:
        await _scored(app, pilot)
        main = app.main
        bodies = [str(c.render()) for c in main.decisions.cards[:2]]
        assert all("⚠ low coverage (20%)" in b and "next-token mass" not in b for b in bodies), bodies
        summary = str(main.summary.render())
        assert summary.count("low coverage on queue, urgency:") == 1 and "less sure" in summary


async def test_after_a_reply_the_estimate_counts_only_what_the_next_score_evaluates() -> None:
    engine = FakeEngine(shared=True, delay=0.12)  # the reply's score outlasts the box's 0.3 s recount after F9
    app = fake_app(FakeFactory(engine))
    async with app.run_test(size=(140, 45)) as pilot:
        await _scored(app, pilot)
        main = app.main
        await pilot.press("f9")
        main.ticket.insert(REPLY)
        for _ in range(8):  # a slow machine: 10 tokens a second, so that the tokens counted show in the seconds
            engine.speed.record(10, 1000.0)
        await pilot.press("f9")
        await wait_until(pilot, lambda: main.result is not None and main.result.thread.messages == 2, what="reply")
        result = main.result
        pack = app.pack
        orders = [debias.orders_for(len(c.options), "none") for c in pack.criteria]
        builder = engine.builder(pack)
        want = count_ticket(
            main.open_ticket.text,
            pack,
            orders,
            builder=builder,
            n_ctx=engine.n_ctx,
            speed=engine.speed,
            tails=result.tokens.tails,
            kept=result.tokens.ticket,
        )
        assert want is not None and want.seconds is not None
        from triage.tui.widgets.score_summary import about_seconds

        # the count after the score is made with this score's tails and kept thread, not every question's tail
        assert want.decode_tokens == decode_overhead(builder, orders, engine.n_ctx, tails=result.tokens.tails)
        every = count_ticket(
            main.open_ticket.text, pack, orders, builder=builder, n_ctx=engine.n_ctx, speed=engine.speed
        )
        assert every is not None and about_seconds(every.seconds or 0) != about_seconds(want.seconds)
        await wait_until(
            pilot,
            lambda: about_seconds(want.seconds) in str(main.thread_view.border_subtitle),
            what="the estimate from the measured figures",
        )

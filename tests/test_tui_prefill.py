"""The app reads the ticket ahead while the agent types or pastes (triage/tui/screens/main_prefill.py).

A scripted engine (tests/fake_engine.py): its ``prefill`` records what it read, honours the cancel, and makes the
next score of that text report the prefilled tokens as cached. The real engine's prefill: tests/test_prefill.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events

from triage.tui.app import TriageApp
from triage.tui.widgets import ticket_input

TICKET = "I was charged twice for my March invoice, please refund one"


async def ready(app: TriageApp, pilot: object) -> None:
    await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")


async def type_text(pilot: object, text: str) -> None:
    for ch in text:
        await pilot.press("space" if ch == " " else ch)  # type: ignore[attr-defined]


def put(app: TriageApp, text: str) -> None:
    """``text`` into the box as one edit (typing it key by key may pause longer than the debounce on a busy
    machine)."""
    app.main.ticket.insert(text)


async def score(app: TriageApp, pilot: object) -> None:
    main = app.main
    main.result = None
    await pilot.press("f5")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: main.result is not None, what="the result")


async def test_typing_then_pausing_prefills_once_and_the_score_costs_only_the_tails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ticket_input, "DEBOUNCE_S", 1.0)  # keys come faster than that even on a busy machine
    engine = FakeEngine()
    app = fake_app(FakeFactory(engine), read_ahead=True)
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        await type_text(pilot, TICKET)
        await wait_until(pilot, lambda: len(engine.prefills) == 1, what="the prefill after the pause")
        await asyncio.sleep(1.2)  # longer than the pause: still one
        [(text, done)] = engine.prefills
        assert text == TICKET and done.complete and done.evaluated == done.tokens
        assert engine.scored == []  # read ahead, not scored
        await score(app, pilot)
        result = app.main.result
        assert result is not None and result.complete
        tok = result.tokens
        assert tok.prefix_cached == tok.prefix == done.tokens and tok.evaluated == tok.tails
        # the hit rate (cached over input tokens: prefix and tails) counts the prefilled tokens as cached
        assert tok.hit_rate == tok.prefix / tok.total_input > 0.5
        assert f"{tok.prefix} cached (hit rate {tok.hit_rate:.0%})" in app.main.summary.details_text
        assert len(engine.prefills) == 1  # the score did not read it ahead again


async def test_an_edit_cancels_the_running_prefill_and_the_next_pause_reads_the_rest() -> None:
    engine = FakeEngine(prefill_delay=3.0)
    app = fake_app(FakeFactory(engine), read_ahead=True)
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        put(app, TICKET)
        await wait_until(pilot, engine.prefilling.is_set, what="the prefill to start")
        await asyncio.sleep(0.3)
        put(app, " today")  # the next edit
        await wait_until(pilot, lambda: len(engine.prefills) >= 1, what="the first prefill to stop")
        first = engine.prefills[0][1]
        assert engine.prefills[0][0] == TICKET and not first.complete and 0 < first.evaluated < first.tokens
        await wait_until(pilot, lambda: len(engine.prefills) == 2, timeout=10, what="the second prefill")
        text, second = engine.prefills[1]
        assert text == TICKET + " today" and second.complete
        assert second.cached == first.cached + first.evaluated  # it went on from where the first stopped
        await score(app, pilot)
        tok = app.main.result.tokens  # type: ignore[union-attr]
        assert tok.prefix_cached == tok.prefix and tok.evaluated == tok.tails


async def test_score_pressed_during_the_prefill_of_the_same_text_waits_for_it() -> None:
    engine = FakeEngine(prefill_delay=1.0)
    app = fake_app(FakeFactory(engine), read_ahead=True)
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        put(app, TICKET)
        await wait_until(pilot, engine.prefilling.is_set, what="the prefill to start")
        await score(app, pilot)
        [(_, done)] = engine.prefills
        assert done.complete  # not cancelled: its work is the score's
        tok = app.main.result.tokens  # type: ignore[union-attr]
        assert tok.prefix_cached == tok.prefix and tok.evaluated == tok.tails


async def test_score_pressed_during_the_prefill_of_another_text_cancels_it() -> None:
    engine = FakeEngine(prefill_delay=5.0)
    app = fake_app(FakeFactory(engine), read_ahead=True)
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        main = app.main
        put(app, TICKET)
        await wait_until(pilot, engine.prefilling.is_set, what="the prefill to start")
        main.stop_prefill(unless=TICKET)  # F5 on the same text lets it run...
        assert engine.prefilling.is_set()
        main.ticket.load_text("Another ticket entirely")  # ...another text stops it (an edit)
        await wait_until(pilot, lambda: len(engine.prefills) == 1, what="the prefill to stop")
        assert not engine.prefills[0][1].complete


async def test_auto_score_on_paste_reuses_what_was_read_ahead_and_the_scored_ticket_is_not_read_again() -> None:
    engine = FakeEngine()
    app = fake_app(FakeFactory(engine), read_ahead=True)
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        app.main.auto_score = True
        put(app, "Order 1234: ")
        await wait_until(pilot, lambda: len(engine.prefills) == 1, what="the prefill of what was typed")
        app.post_message(events.Paste(TICKET))  # the paste ends: the app scores at once
        await wait_until(pilot, lambda: app.main.result is not None, what="the auto-score")
        tok = app.main.result.tokens  # type: ignore[union-attr]
        first = engine.prefills[0][1]
        assert tok.stable < tok.prefix_cached < first.tokens  # the prompt up to the paste was computed already
        assert tok.evaluated == tok.prefix - tok.prefix_cached + tok.tails
        await asyncio.sleep(0.6)
        assert len(engine.prefills) == 1 and engine.scored == ["Order 1234: " + TICKET]  # not read again


async def test_a_changed_stable_block_is_said_once() -> None:
    engine = FakeEngine()
    engine.stable_note = "stable prefix changed, so its prefill is paid again once (pack: a → b)"
    app = fake_app(FakeFactory(engine), read_ahead=True)
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        put(app, TICKET)
        await wait_until(pilot, lambda: len(engine.prefills) == 1, what="the prefill")  # it paid the block
        await score(app, pilot)
        assert app.main.summary.brief_text.count("stable prefix changed") == 1
        app.main.ticket.load_text("A second ticket about a late parcel")
        await score(app, pilot)
        assert "stable prefix changed" not in app.main.summary.brief_text


async def test_without_read_ahead_nothing_is_prefilled() -> None:
    engine = FakeEngine()
    app = fake_app(FakeFactory(engine), read_ahead=False)
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        put(app, TICKET)
        await asyncio.sleep(0.8)
        assert engine.prefills == []


@pytest.mark.model
@pytest.mark.slow
async def test_on_the_real_engine_a_paste_read_ahead_leaves_only_the_tails_for_f5(smollm2_path: Path) -> None:
    from triage.scoring.engine import Engine

    def factory(requested: str | None, notice: Any) -> Engine:
        return Engine(smollm2_path, name="smollm2-135m", stand_in=True, n_ctx=2048)

    app = fake_app(factory, config={}, read_ahead=True)
    async with app.run_test(size=(100, 32)) as pilot:
        main = app.main
        await wait_until(pilot, lambda: main.model_state == "ready", timeout=120, what="smollm2-135m to load")
        app.post_message(events.Paste(TICKET))
        await wait_until(pilot, lambda: main.read_ahead is not None, timeout=120, what="the read-ahead")
        done = main.read_ahead.result  # type: ignore[union-attr]
        assert done.complete and done.evaluated == done.tokens - done.cached
        await score(app, pilot)
        tok = main.result.tokens  # type: ignore[union-attr]
        assert tok.prefix_cached == tok.prefix == done.tokens and tok.evaluated == tok.tails

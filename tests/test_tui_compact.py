"""80x24 is a first-class size (issue 40): after a score every criterion's decision is on screen, with and
without a thread open, the cards compact (one line each) where the full ones do not fit; the footer shows the
keys that work now. Scripted engine, the real app, at 80x24 and 140x45."""

from __future__ import annotations

from typing import Any

import pytest
from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events
from textual.widgets._footer import FooterKey

from triage.tui.app import TriageApp
from triage.tui.widgets.key_footer import KeyFooter

TICKET = (
    "Hello,\nI was charged twice for my March invoice (INV-2031) and nobody answers my emails.\n"
    "Please refund one of the charges today or I will cancel my subscription.\n-- Ann Jones"
)
REPLY = "Sorry about the delay. I have refunded the second charge; it shows in 3 days."


def screen_lines(app: TriageApp) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


def footer(app: TriageApp) -> list[str]:
    return [f"{k.key_display} {k.description}".strip() for k in app.main.query_one(KeyFooter).query(FooterKey)]


def choices_on_screen(app: TriageApp) -> dict[str, bool]:
    """Per card: its whole region is inside the panel's, and its choice is drawn (``▶ choice``) in its rows."""
    panel, lines = app.main.decisions, screen_lines(app)
    out = {}
    for card in panel.cards:
        r = card.region
        inside = r.height > 0 and panel.region.y <= r.y and r.bottom <= panel.region.bottom
        drawn = "\n".join(lines[r.y : r.bottom])
        out[card.spec.id] = inside and f"▶ {card.result.choice}" in drawn  # type: ignore[union-attr]
    return out


async def _settled(app: TriageApp, pilot: Any) -> None:
    await wait_until(pilot, lambda: all(choices_on_screen(app).values()), what="every choice on screen", timeout=5)


@pytest.mark.parametrize("size", [(80, 24), (140, 45)])
async def test_every_criterions_choice_is_on_screen_with_and_without_a_thread(size: tuple[int, int]) -> None:
    app = fake_app(FakeFactory(FakeEngine(low_coverage=("needs_approval",))))
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
        main = app.main
        app.post_message(events.Paste(TICKET))
        await wait_until(pilot, lambda: bool(main.ticket.ticket_text))
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None and not main.scoring, what="the result")
        await _settled(app, pilot)
        assert main.decisions.has_class("-compact") == (size == (80, 24))
        keys = footer(app)
        assert "f6 Label" in keys and "esc Cancel" not in keys and "f7 Agreement" in keys
        assert "f10 Note" in keys or "f8·f9·f10 Reply" in keys, keys
        await pilot.press("f9")
        main.ticket.insert(REPLY)
        await pilot.press("f9")
        await wait_until(pilot, lambda: main.result is not None and main.result.thread.messages == 2, what="reply")
        await _settled(app, pilot)
        assert main.thread_view.shown and main.thread_view.region.height >= 3  # the thread is there too
        # labelling on a compact card: the focused card numbers its options, 1-9 answer it
        first = main.decisions.cards[0]
        await pilot.press("f6")
        assert app.focused is first
        if first.compact:
            await pilot.pause()
            row = screen_lines(app)[first.region.y]
            assert all(f"{i + 1}" in row for i in range(len(first.spec.options))), row
        await pilot.press("2")
        assert first.answer == first.spec.options[1][0]


async def test_the_footer_shows_esc_only_while_something_runs() -> None:
    engine = FakeEngine(hold_after=1)
    app = fake_app(FakeFactory(engine))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
        assert "esc Cancel" not in footer(app)
        app.post_message(events.Paste(TICKET))
        await wait_until(pilot, lambda: bool(app.main.ticket.ticket_text))
        await pilot.press("f5")
        await wait_until(pilot, engine.held.is_set, what="half-way")
        await wait_until(pilot, lambda: "esc Cancel" in footer(app), what="esc while scoring")
        engine.gate.set()
        await wait_until(pilot, lambda: app.main.result is not None and not app.main.scoring)
        await wait_until(pilot, lambda: "esc Cancel" not in footer(app) and "f6 Label" in footer(app))

"""At 80x24 the main screen's footer shows every key it holds whole (it leaves keys out rather than cut them),
and the agreement screen (F7) keeps its table's column headings whole (scripted engine, the real app)."""

from __future__ import annotations

from typing import Any

from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events
from textual.widgets._footer import FooterKey

from triage.evaluation.agreement import CriterionAgreement, Rate
from triage.tui.app import TriageApp
from triage.tui.screens.stats import AgreementScreen, agreement_for_width
from triage.tui.widgets.key_footer import Key as FKey
from triage.tui.widgets.key_footer import KeyFooter, fit, in_order

TICKET = "My parcel has said 'in transit' for nine days. Order 4411. Please send a replacement."
REPLY = "Sorry about the delay. I have asked the carrier for a trace."
HEADINGS = ("criterion", "labels", "fixed", "agree", "balanced", "last 50")


def screen_lines(app: TriageApp) -> list[str]:
    """The active screen as text, one string per terminal row."""
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


def footer_labels(app: TriageApp) -> list[str]:
    footer = app.main.query_one(KeyFooter)
    return [f"{k.key_display} {k.description}".strip() for k in footer.query(FooterKey)]


async def footer_whole(app: TriageApp, pilot: Any, *must: str) -> list[str]:
    """Check the main screen's footer now: every key it holds is on its row, whole, and ``must`` are among them."""

    def drawn() -> bool:  # the footer re-composes (and is drawn) a moment after the bindings change
        labels = footer_labels(app)
        row = screen_lines(app)[-1]
        return bool(labels) and all(m in labels for m in must) and all(label in row for label in labels)

    await wait_until(pilot, drawn, what=f"the footer's keys whole on its row, {must} among them")
    footer = app.main.query_one(KeyFooter)
    labels = footer_labels(app)
    assert footer.virtual_size.width <= footer.size.width == 80, labels  # nothing runs past the edge
    for label in must:
        assert label in labels, (label, labels)
    return labels


async def test_the_footer_shows_its_keys_whole_at_80x24_in_every_state() -> None:
    engine = FakeEngine(hold_after=2)
    app = fake_app(FakeFactory(engine))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
        main = app.main
        await footer_whole(app, pilot, "f1 Help", "f2 History", "f5 Score")
        app.post_message(events.Paste(TICKET))
        await wait_until(pilot, lambda: bool(main.ticket.ticket_text))
        await pilot.press("f5")
        await wait_until(pilot, engine.held.is_set, what="half-way")
        scoring = await footer_whole(app, pilot, "f1 Help", "f5 Score", "esc Cancel")
        engine.gate.set()
        await wait_until(pilot, lambda: main.result is not None and not main.scoring, what="the result")
        done = await footer_whole(
            app, pilot, "f1 Help", "f3 Export", "f5 Score", "f6 Label", "f7 Agreement", "f8·f9·f10 Reply"
        )
        assert "esc Cancel" not in done and "esc Cancel" in scoring  # Esc only while something runs
        await pilot.press("f6")  # a card: its own keys come first
        labelling = await footer_whole(app, pilot, "⏎ Confirm", "1-9 Pick", "f1 Help", "f6 Label")
        assert labelling.index("1-9 Pick") < labelling.index("f1 Help")
        main.ticket.focus()
        await pilot.press("f9")  # a thread: the box takes the reply
        main.ticket.insert(REPLY)
        await pilot.press("f9")
        await wait_until(pilot, lambda: main.result is not None and main.result.thread.messages == 2, what="reply")
        await footer_whole(app, pilot, "f1 Help", "f6 Label", "f7 Agreement", "f8·f9·f10 Reply")
    # wide enough, nothing is left out: the timeline, the palette
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
        app.post_message(events.Paste(TICKET))
        await wait_until(pilot, lambda: bool(app.main.ticket.ticket_text))
        await pilot.press("f5")
        await wait_until(pilot, lambda: app.main.result is not None and not app.main.scoring)
        await pilot.pause(0.1)
        labels = footer_labels(app)
        assert "^t Timeline" in labels and "^p palette" in labels and "f4 Copy" in labels


def test_fit_leaves_out_the_palette_then_disabled_keys_then_the_least_needed_and_keeps_help() -> None:
    keys = [
        FKey("app.help", "f1", "Help"),
        FKey("app.history", "f2", "History"),
        FKey("score", "f5", "Score"),
        FKey("cancel", "esc", "Cancel", enabled=False),
        FKey("timeline", "^t", "Timeline"),
        FKey("command_palette", "^p", "palette", palette=True),
    ]
    assert fit(keys, 200) == [0, 1, 2, 3, 4, 5]
    total = sum(k.width for k in keys)
    assert fit(keys, total - 1) == [0, 1, 2, 3, 4]  # the palette's key first
    assert fit(keys, total - keys[5].width - 1) == [0, 1, 2, 4]  # then the key that does nothing now
    assert fit(keys, 30) == [0, 1, 2]  # then the timeline
    assert fit(keys, 8) == [0]  # help stays whatever the width
    assert keys[0].width == len("f1 Help") + 1
    order = [FKey("x", "⏎", "Confirm"), FKey("y", "f6", "Label"), FKey("z", "f1", "Help"), FKey("w", "^t", "Time")]
    assert in_order(order) == [0, 2, 1, 3]


def _rows(names: list[str]) -> list[CriterionAgreement]:
    return [
        CriterionAgreement("support", n, 12, 3, Rate(12, 9), Rate(12, 9), {"zero-shot": Rate(12, 9)}, [], 0.7)
        for n in names
    ]


def test_the_agreement_table_is_drawn_for_its_width_with_whole_headings() -> None:
    import io

    from rich.console import Console

    def drawn(renderable: Any, width: int) -> list[str]:
        console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
        console.print(renderable)
        return console.export_text().splitlines()

    rows = _rows(["queue", "needs_approval"])
    wide = drawn(agreement_for_width(rows, 120), 120)
    assert all(h in wide[1] for h in (*HEADINGS, "by source")) and wide[0].endswith("┓")
    narrow = drawn(agreement_for_width(rows, 74), 74)
    assert all(h in narrow[1] for h in HEADINGS) and narrow[0].endswith("┓") and "by source" not in narrow[1]
    assert any(line.startswith("by source: queue: zero-shot 75% of 12") for line in narrow)
    tiny = drawn(agreement_for_width(rows, 40), 40)
    assert tiny[0].startswith("queue: 12 label(s), 3 fixed")  # as lines: nothing to cut


async def test_f7_at_80x24_keeps_every_column_heading_whole() -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
        main = app.main
        app.post_message(events.Paste(TICKET))
        await wait_until(pilot, lambda: bool(main.ticket.ticket_text))
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None and not main.scoring)
        await pilot.press("f6", "enter", "enter", "enter", "enter", "enter")  # all five cards
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, AgreementScreen))
        await pilot.pause(0.2)
        lines = screen_lines(app)
        [heads] = [line for line in lines if "criterion" in line]
        assert all(f" {h} " in heads for h in HEADINGS), heads
        [top] = [line for line in lines if "┏" in line]
        assert "┓" in top  # the table's right edge is on screen
        assert any("esc Close" in line for line in lines[-1:])  # this screen's own footer

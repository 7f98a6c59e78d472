"""The agent's answer is the decision in the app's exports, its clipboard line and its history list, and a label
keeps its meaning over a thread (issue 40): scripted engine, the real app, a real SQLite history."""

from __future__ import annotations

from pathlib import Path

from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events
from textual.widgets import DataTable

from triage.domain.ticket import make_ticket
from triage.tui.app import TriageApp
from triage.tui.screens.history import HistoryScreen

TICKET = "The parcel has said 'in transit' for nine days. Please send a replacement."
AGENT = "I have asked the carrier for a trace; you will hear from us within two days."


async def _scored(app: TriageApp, pilot: object) -> None:
    await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
    app.post_message(events.Paste(TICKET))
    await wait_until(pilot, lambda: bool(app.main.ticket.ticket_text), what="the paste")
    await pilot.press("f5")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: app.main.result is not None and not app.main.scoring, what="the result")


async def test_a_correction_is_the_decision_in_markdown_the_clipboard_and_the_history_list(tmp_path: Path) -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(140, 45)) as pilot:
        await _scored(app, pilot)
        main = app.main
        queue = main.decisions.cards[0]
        model = queue.result.choice  # type: ignore[union-attr]
        fixed = next(i for i, (oid, _) in enumerate(queue.spec.options) if oid != model)
        fixed_id = queue.spec.options[fixed][0]
        await pilot.press("f6", str(fixed + 1))
        await wait_until(pilot, lambda: queue.answer == fixed_id, what="the correction")
        md = main.export_to(tmp_path / "t.md", "markdown")
        assert md is not None
        text = md.read_text(encoding="utf-8")
        assert f"| {queue.spec.id} | **{fixed_id}** | corrected | {model} |" in text
        js = main.export_to(tmp_path / "t.json", "json")
        assert js is not None and f'"option": "{fixed_id}"' in js.read_text(encoding="utf-8")
        await pilot.press("f4")
        assert f"{queue.spec.id}={fixed_id} (corrected; model {model} " in app.clipboard
        assert f"{queue.spec.id}={model} (" not in app.clipboard
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        table = app.screen.query_one(DataTable)
        await wait_until(pilot, lambda: table.row_count == 1)
        cell = str(table.get_cell_at((0, 5)))
        assert cell.startswith(f"{queue.spec.id}={fixed_id} ✔ (corrected; model {model} "), cell


async def test_a_correction_stays_a_correction_after_a_reply_and_says_its_message() -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(140, 45)) as pilot:
        await _scored(app, pilot)
        main = app.main
        card = main.decisions.cards[1]
        # the fake chooses option (len(text) + i) % n: correct to the option the model will choose after the reply
        thread = make_ticket(
            None, main.result.ticket_id, [{"role": "customer", "text": TICKET}, {"role": "agent", "text": AGENT}]
        )
        n = len(card.spec.options)
        later = card.spec.options[(len(thread.text) + 1) % n][0]
        assert later != card.result.choice  # type: ignore[union-attr]
        card.focus()
        await pilot.press(str([o for o, _ in card.spec.options].index(later) + 1))
        await wait_until(pilot, lambda: "you: " in str(card.border_subtitle), what="the correction")
        main.ticket.focus()
        await pilot.press("f9")
        main.ticket.insert(AGENT)
        await pilot.press("f9")
        await wait_until(pilot, lambda: main.result is not None and main.result.thread.messages == 2, what="reply")
        await wait_until(pilot, lambda: card.result is not None and card.result.choice == later)
        sub = str(card.border_subtitle)
        assert f"✔ you: {later} (msg 1)" in sub and "confirmed" not in sub, sub

"""Answering cards in the app: a confirmation or a correction per card, kept in the history at once, shown again."""

from __future__ import annotations

from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events

from triage.store import labels as lab
from triage.store.history import History
from triage.tui.app import TriageApp
from triage.tui.screens.history import HistoryScreen

TICKET = "The parcel has said 'in transit' for nine days. Please send a replacement."


async def _scored(app: TriageApp, pilot: object) -> None:
    await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
    app.post_message(events.Paste(TICKET))
    await wait_until(pilot, lambda: bool(app.main.ticket.ticket_text), what="the paste")
    await pilot.press("f5")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: app.main.result is not None, what="the result")


async def test_correct_one_card_confirm_another_in_three_keys_then_reopen_shows_them() -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(100, 40)) as pilot:
        await _scored(app, pilot)
        main = app.main
        cards = main.decisions.cards
        first, second = cards[0], cards[1]
        wrong = next(i for i, (oid, _) in enumerate(first.spec.options) if oid != first.result.choice)  # type: ignore[union-attr]
        await pilot.press("f6")  # to the first open card
        assert app.focused is first
        await pilot.press(str(wrong + 1))  # a correction: 2 keys
        assert app.focused is second  # the next open card
        await pilot.press("enter")  # a confirmation: 1 key
        assert first.answer == first.spec.options[wrong][0] and second.answer == second.result.choice  # type: ignore[union-attr]
        assert "you: " in str(first.border_subtitle) and "confirmed" in str(second.border_subtitle)
        assert cards[2].answer is None  # a card nobody answered is no label
        [row] = {e.ticket_row for e in app.history.search()}
        now = lab.current(app.history, row)
        assert {k: (v.option, v.kind, v.origin) for k, v in now.items()} == {
            first.spec.id: (first.spec.options[wrong][0], "correction", "app"),
            second.spec.id: (second.result.choice, "confirmation", "app"),  # type: ignore[union-attr]
        }
    # a new app on the same history: reopen the ticket (F2), its labels are shown
    app2 = fake_app(FakeFactory(FakeEngine()))
    async with app2.run_test(size=(100, 40)) as pilot:
        await wait_until(pilot, lambda: app2.main.model_state == "ready")
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app2.screen, HistoryScreen))
        await pilot.press("enter", "enter")
        await wait_until(pilot, lambda: app2.screen is app2.main and app2.main.result is not None)
        cards = app2.main.decisions.cards
        assert cards[0].answer == first.spec.options[wrong][0] and cards[1].answer == second.result.choice  # type: ignore[union-attr]
        assert cards[2].answer is None
        # change a label after reopening: a new answer, the first one's shown decision stays
        cards[0].focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: cards[0].answer == cards[0].result.choice)  # type: ignore[union-attr]
    with History.open() as h:
        judged = {j.criterion: j for j in lab.judged(h)}
        assert judged[first.spec.id].option == first.result.choice and judged[first.spec.id].changed == 2  # type: ignore[union-attr]


async def test_clicking_an_option_row_labels_it() -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(100, 40)) as pilot:
        await _scored(app, pilot)
        card = app.main.decisions.cards[0]
        last = len(card.spec.options) - 1
        await pilot.click(card, offset=(4, 1 + card.options_top + last))  # inside the border: the last option
        await wait_until(pilot, lambda: card.answer is not None, what="the click to label")
        assert card.answer == card.spec.options[last][0]
        [row] = {e.ticket_row for e in app.history.search()}
        assert lab.current(app.history, row)[card.spec.id].option == card.spec.options[last][0]


async def test_answering_before_the_result_or_without_history_stores_nothing() -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready")
        await pilot.press("f6")
        assert app.main.decisions.cards[0].answer is None  # nothing scored: F6 says so
        await _scored(app, pilot)
        app.main.result_rows = (None, None)  # as when the history could not be written
        app.main.decisions.cards[0].focus()
        await pilot.press("enter")
        assert app.main.decisions.cards[0].answer is None
        assert lab.count(app.history) == 0


async def test_agreement_screen_shows_the_numbers_and_a_chart() -> None:
    from textual_plotext import PlotextPlot

    from triage.tui.screens.stats import AgreementScreen

    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(120, 48)) as pilot:
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, AgreementScreen))
        assert "No labels yet" in str(app.screen.query_one("#stats-empty").render())
        await pilot.press("escape")
        await _scored(app, pilot)
        await pilot.press("f6", "enter", "enter")  # confirm two cards
        card = app.main.decisions.cards[2]
        wrong = next(i for i, (oid, _) in enumerate(card.spec.options) if oid != card.result.choice)  # type: ignore[union-attr]
        await pilot.press(str(wrong + 1))  # correct the third
        await wait_until(pilot, lambda: lab.count(app.history) == 3)
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, AgreementScreen))
        screen = app.screen
        assert isinstance(screen, AgreementScreen)
        rates = {r.criterion: r.overall.rate for r in screen.rows}
        assert rates == {c.spec.id: (0.0 if c is card else 1.0) for c in app.main.decisions.cards[:3]}
        assert screen.query_one(PlotextPlot) is not None
        table = screen.query_one("#stats-table")
        await pilot.pause()
        assert table.region.height > 0


def test_kill_9_of_the_app_right_after_a_correction_keeps_the_label(tmp_path) -> None:
    """The real app (scripted engine) in its own process, killed with SIGKILL just after a card is corrected."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "app_then_kill.py"
    script.write_text(
        "import asyncio, sys, time\n"
        "from textual import events\n"
        "from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until\n"
        "async def main():\n"
        "    app = fake_app(FakeFactory(FakeEngine()))\n"
        "    async with app.run_test(size=(100, 40)) as pilot:\n"
        "        await wait_until(pilot, lambda: app.main.model_state == 'ready')\n"
        f"        app.post_message(events.Paste({TICKET!r}))\n"
        "        await wait_until(pilot, lambda: bool(app.main.ticket.ticket_text))\n"
        "        await pilot.press('f5')\n"
        "        await wait_until(pilot, lambda: app.main.result is not None)\n"
        "        card = app.main.decisions.cards[0]\n"
        "        wrong = next(i for i, (o, _) in enumerate(card.spec.options) if o != card.result.choice)\n"
        "        await pilot.press('f6', str(wrong + 1))\n"
        "        print(card.spec.options[wrong][0], flush=True)\n"
        "        time.sleep(60)  # the app is still running: killed here\n"
        "asyncio.run(main())\n",
        encoding="utf-8",
    )
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        corrected = proc.stdout.readline().strip()
        assert corrected, "the app did not get to the correction"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    with History.open() as h:
        [j] = lab.judged(h)
        assert j.option == corrected and j.shown_option != corrected


async def test_export_over_an_existing_file_asks_first(tmp_path) -> None:
    import json

    from textual.widgets import Input

    from triage.tui.screens.export import ExportScreen

    target = tmp_path / "out.json"
    target.write_text("the user's own file\n", encoding="utf-8")
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(100, 40)) as pilot:
        await _scored(app, pilot)
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(app.screen, ExportScreen) and bool(app.screen.query("#export-path")))
        app.screen.query_one("#export-path", Input).value = str(target)
        await pilot.press("enter", "enter")  # the format (JSON), then the file
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)  # asked, not written
        assert "exists" in str(app.screen.query_one("#export-warning").render())
        assert target.read_text(encoding="utf-8") == "the user's own file\n"
        await pilot.press("enter")  # yes, replace it
        await wait_until(pilot, lambda: app.screen is app.main)
        assert json.loads(target.read_text(encoding="utf-8"))["ticket_id"] == app.main.result.ticket_id  # type: ignore[union-attr]


async def test_the_auto_refit_counts_labels_of_earlier_sessions() -> None:
    # auto_learn_every 3: two labels in one session, one in the next, and the third label starts a re-fit
    config = {"auto_learn": True, "auto_learn_every": 3}
    app = fake_app(FakeFactory(FakeEngine()), config=config)
    async with app.run_test(size=(100, 40)) as pilot:
        await _scored(app, pilot)
        assert app.main.desk.labels_since_fit == 0  # a fresh history
        await pilot.press("f6", "enter", "enter")  # two confirmations
        await wait_until(pilot, lambda: app.main.desk.labels_since_fit == 2, what="two labels counted")
    app2 = fake_app(FakeFactory(FakeEngine()), config=config)
    async with app2.run_test(size=(100, 40)) as pilot:
        await _scored(app2, pilot)
        assert app2.main.desk.labels_since_fit == 2  # the earlier session's labels count
        learned: list[str] = []
        app2.main.action_learn = lambda: learned.append("re-fit")  # type: ignore[method-assign]
        await pilot.press("f6", "enter")  # the third label
        await wait_until(pilot, lambda: learned == ["re-fit"], what="the re-fit after the third label")

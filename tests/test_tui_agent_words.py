"""Agent words on agent screens (issue 40): the palette's wording, each screen's own footer, the agreement chart's
legend (one name per line) and its note while there is no trend to draw. Scripted engine, the real app."""

from __future__ import annotations

from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events

from triage.evaluation.agreement import CriterionAgreement, Rate
from triage.tui.app import TriageApp
from triage.tui.screens.help import HelpScreen
from triage.tui.screens.stats import AgreementScreen, line_labels
from triage.tui.screens.timeline import TimelineScreen

TICKET = "My parcel has said 'in transit' for nine days. Order 4411. Please send a replacement."


def screen_lines(app: TriageApp) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


def _row(pack: str, criterion: str, blocks: int) -> CriterionAgreement:
    return CriterionAgreement(pack, criterion, 12, 3, Rate(12, 9), Rate(12, 9), {}, [Rate(20, 15)] * blocks, 0.7)


def test_the_agreement_legend_names_each_line_once() -> None:
    rows = [_row("support", "queue", 2), _row("team", "queue", 2), _row("support", "urgency", 2)]
    assert line_labels(rows) == ["support/queue", "team/queue", "urgency"]


async def test_help_timeline_and_agreement_show_their_own_keys_and_the_palette_reads_right() -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
        main = app.main
        app.post_message(events.Paste(TICKET))
        await wait_until(pilot, lambda: bool(main.ticket.ticket_text))
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None and not main.scoring)
        said = [c.help for c in app.get_system_commands(main)]
        assert any("as a customer reply" in h for h in said) and not any("an customer" in h for h in said)
        assert any("as an agent reply" in h for h in said) and any("as an internal note" in h for h in said)
        for key, screen in (("f1", HelpScreen), ("ctrl+t", TimelineScreen)):
            await pilot.press(key)
            await wait_until(pilot, lambda s=screen: isinstance(app.screen, s), what=str(screen))
            await pilot.pause(0.1)
            last = screen_lines(app)[-1]
            assert "Close" in last and "f5 Score" not in last, last  # this screen's keys, not the main screen's
            await pilot.press("escape")
            await wait_until(pilot, lambda: app.screen is main)
        await pilot.press("f6", "2")  # one label: one block, no trend yet
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, AgreementScreen))
        await pilot.pause(0.1)
        note = str(app.screen.query_one("#stats-chart-note").render())
        assert "it shows from the second block (now at most 1)" in note
        assert not app.screen.query_one("#stats-chart").display


async def test_the_summary_is_in_agent_words_and_ctrl_o_shows_the_engines_figures() -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
        main = app.main
        assert "by name" not in str(main.status.render())
        app.post_message(events.Paste(TICKET))
        await wait_until(pilot, lambda: bool(main.ticket.ticket_text))
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None and not main.scoring)
        brief = str(main.summary.render())
        assert "scored in 0.4 s" in brief and "prefix" not in brief and "cached" not in brief and "by name" not in brief
        await pilot.press("ctrl+o")
        shown = str(main.summary.render())
        assert "prefill 120 ms" in shown and "cached" in shown and "by name" in shown
        await pilot.press("ctrl+o")
        assert str(main.summary.render()) == brief
        # ctrl+d stays the editor's delete-right key
        main.ticket.focus()
        await pilot.press("home", "ctrl+d")
        assert main.ticket.text == TICKET[1:]

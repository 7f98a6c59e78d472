"""The team's loop in the app, on the real smollm2-135m: score, correct and confirm cards, quit, reopen and see
the labels; after 20 labels (the default) the background re-fit stores a head and the next ticket's cards say
`learned`."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import MIXED, labelled_rows
from fake_engine import fake_app, wait_until
from textual import events

from triage.domain.pack import parse_pack
from triage.scoring.engine import Engine
from triage.store import labels as lab
from triage.tui.screens.history import HistoryScreen

pytestmark = [pytest.mark.model, pytest.mark.slow]


def _factory(smollm2_path: Path) -> Any:
    def factory(requested: str | None, notice: Any) -> Engine:
        return Engine(smollm2_path, name="smollm2-135m", stand_in=True, n_ctx=512)

    return factory


async def _score(app: Any, pilot: Any, text: str) -> None:
    main = app.main
    before = main.result
    main.ticket.set_ticket("")
    app.post_message(events.Paste(text))
    await wait_until(pilot, lambda: main.ticket.ticket_text.strip() == text.strip(), what="the paste")
    await pilot.press("f5")
    await wait_until(
        pilot,
        lambda: main.result is not None and main.result is not before and not main.scoring,
        timeout=120,
        what="the score",
    )


async def test_label_quit_reopen_then_auto_refit_makes_the_next_ticket_learned(smollm2_path: Path) -> None:
    pack = parse_pack(tomllib.loads(MIXED), "mixed.toml")
    rows = labelled_rows()
    app = fake_app(_factory(smollm2_path), pack=pack, config={})
    async with app.run_test(size=(110, 40)) as pilot:
        main = app.main
        await wait_until(pilot, lambda: main.model_state == "ready", timeout=120, what="smollm2-135m to load")
        # one ticket: correct one card, confirm the other
        await _score(app, pilot, str(rows[0]["text"]))
        topic, mood = main.decisions.card("topic"), main.decisions.card("mood")
        wrong = next(i for i, (o, _) in enumerate(mood.spec.options) if o != mood.result.choice)
        await pilot.press("f6")  # topic first
        await pilot.press("enter")  # confirm topic
        await pilot.press(str(wrong + 1))  # correct mood
        first_ticket = main.result_rows[0]
        now = lab.current(app.history, first_ticket)
        assert now["topic"].kind == "confirmation" and now["mood"].kind == "correction"
    # quit and reopen: the labels are shown
    app = fake_app(_factory(smollm2_path), pack=pack, config={})
    async with app.run_test(size=(110, 40)) as pilot:
        main = app.main
        await wait_until(pilot, lambda: main.model_state == "ready", timeout=120, what="smollm2-135m to load")
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        await pilot.press("enter", "enter")
        await wait_until(pilot, lambda: app.screen is main and main.result is not None)
        assert main.decisions.card("topic").answer == topic.result.choice
        assert main.decisions.card("mood").answer == mood.spec.options[wrong][0]
        # label the topic of 20 more tickets (the default auto_learn_every): the re-fit runs in the background
        payment = [r for r in rows[1:] if r["labels"]["topic"] == "payment"]
        delivery = [r for r in rows[1:] if r["labels"]["topic"] == "delivery"]
        picks = payment[:10] + delivery[:10]
        for r in picks:
            await _score(app, pilot, str(r["text"]))
            card = main.decisions.card("topic")
            index = [o for o, _ in card.spec.options].index(r["labels"]["topic"])
            await pilot.press("f6", str(index + 1))
        await wait_until(
            pilot,
            lambda: (
                "Learned from" in main.notices.text_of("learn") or "Not re-learned" in main.notices.text_of("learn")
            ),
            timeout=120,
            what="the background re-fit",
        )
        said = main.notices.text_of("learn")
        # the first session's 2 labels count (the stored head is older than them: there is none), so the re-fit
        # starts at the 18th new label, on the 20 in the history then (19 topic, 1 mood); the labels given while it
        # runs may be read too
        learned_from = re.search(r"Learned from (\d+) labels", said)
        assert learned_from and 20 <= int(learned_from.group(1)) <= 22, said
        assert "topic" in main.notices.text_of("learn")
        await _score(app, pilot, "My card was charged twice for the lamp, refund me.")
        result = main.result
        assert result.head and "learned from" in result.head
        assert main.decisions.card("topic").result.source == "learned"
        assert str(main.decisions.card("topic").border_subtitle).startswith("learned ·")
        assert "learned from" in str(main.summary.render())

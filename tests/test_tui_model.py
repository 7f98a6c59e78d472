"""The whole flow once with the real engine and smollm2-135m: paste, F5, cards fill, history, export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_engine import fake_app, wait_until
from textual import events

from triage.scoring.engine import Engine

pytestmark = [pytest.mark.model, pytest.mark.slow]

TICKET = (
    "Hello,\nmy card was charged twice for the March invoice.\nPlease refund one charge today, I am very upset!\n-- Ann"
)


async def test_real_model_scores_a_pasted_ticket(smollm2_path: Path, tmp_path: Path) -> None:
    def factory(requested: str | None, notice: Any) -> Engine:
        return Engine(smollm2_path, name="smollm2-135m", stand_in=True, n_ctx=2048)

    # fanout (the one way triage scores) decodes the ticket and every tail in one batch: the cards
    # wait, then fill together.
    app = fake_app(factory, config={})
    async with app.run_test(size=(100, 32)) as pilot:
        main = app.main
        await wait_until(pilot, lambda: main.model_state == "ready", timeout=120, what="smollm2-135m to load")
        assert main.notices.has("stand-in")
        app.post_message(events.Paste(TICKET))
        await wait_until(
            pilot, lambda: "tokens" in str(main.ticket.border_subtitle), timeout=30, what="the token count"
        )
        assert "≈" not in str(main.ticket.border_subtitle)  # counted with the model's own tokenizer
        seen: list[list[str]] = []
        decided = main.decisions.decided

        def spy(result: Any) -> None:  # the cards' states around every streamed criterion
            seen.append([c.state for c in main.decisions.cards])
            decided(result)
            seen.append([c.state for c in main.decisions.cards])

        main.decisions.decided = spy  # type: ignore[method-assign]
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None, timeout=180, what="the score")
        result = main.result
        assert result.complete and [c.id for c in result.criteria] == [
            "queue",
            "urgency",
            "sentiment",
            "needs_approval",
            "type",
        ]
        assert all(c.state == "done" for c in main.decisions.cards)
        assert result.mode == "fanout" and result.readout == "label"
        # Each criterion's result reaches its card as it streams in (in fanout they stream
        # together, right after the one batch): the cards were seen waiting, then part-filled.
        assert seen and seen[0].count("done") == 0, f"cards did not start empty: {seen}"
        assert any(s.count("done") not in (0, 5) for s in seen), f"cards never filled one at a time: {seen}"
        for card in main.decisions.cards:
            assert card.result is not None and "ms" in str(card.border_subtitle)
            assert abs(sum(o.probability for o in card.result.options) - 1) < 1e-6
        assert result.timing.total_ms > 0 and result.tokens.prefix > 0
        [entry] = app.history.search()
        assert entry.status == "done" and entry.model_name == "smollm2-135m"
        assert main.export_to(tmp_path / "r.json", "json") is not None
        assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["model"]["name"] == "smollm2-135m"
        await pilot.press("f5")  # re-score: fanout keeps only the stable block
        await wait_until(pilot, lambda: main.result is not None and not main.scoring, timeout=180)
        again = main.result.tokens  # (an unchanged ticket is read whole again, not from its kept state)
        assert again.prefix_cached == again.stable > 0

"""Esc and ctrl+q during a 2,000-token prefill in the app (real smollm2-135m, one thread).

Before the abort callback, a cancel waited for the running decode: 51-55 s on the product
model. Now llama.cpp asks between graph computations. The bounds are relative to the same
prefill measured uncancelled in this test (a fraction of it), never a fixed time: the
machine is shared. History must agree: the cancelled scores are ``cancelled``, none is left
``running`` ("unfinished"), after Esc and after quitting alike.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fake_engine import fake_app, wait_until
from test_cancel import long_ticket

from triage.scoring import prompt
from triage.scoring.engine import Engine
from triage.store.history import History

pytestmark = [pytest.mark.model, pytest.mark.slow]

TOKENS = 2000  # the bounds are fractions of this prefill, whatever its length
N_CTX = 4096


@pytest.fixture(autouse=True)
def long_prefill(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ticket budget above this test's ticket: one long decode to cancel inside (the product's budget
    keeps a ticket's prefill short; cancelling inside one decode is what is tested here)."""
    monkeypatch.setattr(prompt, "TICKET_TOKENS", 8192)


async def _into_prefill(app: Any, pilot: Any, text: str, prefill_s: float) -> None:
    """Submit ``text`` and wait until its prefill is well under way (not finished)."""
    main = app.main
    main.ticket.set_ticket(text)
    await pilot.press("f5")
    await wait_until(pilot, lambda: main.current is not None and main.current.started, what="the score to start")
    await pilot.pause(0.15 * prefill_s)  # inside the ticket's decode: it takes prefill_s in all
    assert main.current is not None and main.current.prefill_ms is None, "the prefill ended before the cancel"


async def test_escape_and_quit_during_a_long_prefill_return_promptly(smollm2_path: Path) -> None:
    def factory(requested: str | None, notice: Any) -> Engine:
        return Engine(smollm2_path, name="smollm2-135m", stand_in=True, n_ctx=N_CTX, threads=1)

    app = fake_app(factory)
    async with app.run_test(size=(100, 32)) as pilot:
        main = app.main
        await wait_until(pilot, lambda: main.model_state == "ready", timeout=120, what="smollm2-135m to load")
        engine = app.host.engine
        texts = {k: f"Ticket {k}: " + long_ticket(engine, TOKENS) for k in ("first", "second", "third")}
        assert len(engine.tokenizer.encode(texts["first"])) >= TOKENS
        # 1. The same kind of prefill, uncancelled: the yardstick.
        main.ticket.set_ticket(texts["first"])
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None, timeout=600, what="the first ticket's result")
        assert main.result is not None and main.result.complete
        prefill_s = main.result.timing.prefill_ms / 1000
        assert prefill_s > 0.5, f"a {TOKENS}-token prefill took only {prefill_s:.2f} s: too short to cancel inside"
        # 2. Esc during the second ticket's prefill.
        await _into_prefill(app, pilot, texts["second"], prefill_s)
        pressed = time.monotonic()
        await pilot.press("escape")
        await wait_until(pilot, lambda: not main.scoring, timeout=600, what="the cancel")
        esc_s = time.monotonic() - pressed
        assert main.result is not None and not main.result.complete and main.result.criteria == []
        assert esc_s < 0.5 * prefill_s, f"Esc took {esc_s:.2f} s; the whole prefill takes {prefill_s:.2f} s"
        # 3. ctrl+q during the third ticket's prefill: the app ends (on_unmount waits for the score to stop).
        await _into_prefill(app, pilot, texts["third"], prefill_s)
        pressed = time.monotonic()
        await pilot.press("ctrl+q")
    quit_s = time.monotonic() - pressed
    assert quit_s < 0.5 * prefill_s + 1.0, f"quitting took {quit_s:.2f} s; the whole prefill takes {prefill_s:.2f} s"
    assert app.host.lock.acquire(timeout=0), "the score was still running after the app ended"
    app.host.lock.release()
    history = History.open()
    try:
        statuses = {e.ticket_id: e.status for e in history.search()}
    finally:
        history.close()
    assert sorted(statuses.values()) == ["cancelled", "cancelled", "done"], statuses
    print(f"\nprefill {prefill_s:.2f} s; Esc returned in {esc_s:.2f} s; ctrl+q ended the app in {quit_s:.2f} s")

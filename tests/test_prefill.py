"""Prefill while the agent pastes: the fake engine's ``prefill``, ``Session.prefill``, and the real engine's.

The front ends' tests (the app: tests/test_tui_prefill.py; serve: tests/test_serve_prefill.py) build on the fake;
the last tests here run the real engine on the small test model.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeEngine

from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.errors import TriageError
from triage.scoring.engine import Engine, TicketScored
from triage.scoring.options import ScoreOptions
from triage.scoring.prefill_result import PrefillResult
from triage.session import Session

PACK = default_pack()
TEXTS = [
    "I was charged twice for my subscription this month, please refund the second payment.",
    "Where is my parcel? The tracking page has said 'in transit' for nine days.",
    "The app crashes every time I open the settings page on Android 14.",
]
TEXT = "My parcel never came and the tracking page has said 'in transit' for nine days now."


def final(events: object) -> TicketScored:
    return [e for e in events if isinstance(e, TicketScored)][-1]  # type: ignore[attr-defined]


def test_a_prefilled_ticket_scores_with_its_prefix_cached() -> None:
    engine = FakeEngine()
    session = Session(engine)
    done = session.prefill(TEXT, PACK)
    assert isinstance(done, PrefillResult) and done.complete
    assert done.cached == 0 and done.evaluated == done.tokens > 0
    assert engine.prefills == [(TEXT, done)]
    tokens = final(session.score(make_ticket(TEXT), PACK, ScoreOptions())).result.tokens
    assert tokens.prefix_cached == tokens.prefix == done.tokens
    assert tokens.evaluated == tokens.tails  # only the tails were left


def test_a_longer_or_edited_ticket_reuses_the_prefill_up_to_the_first_change() -> None:
    engine = FakeEngine()
    first = engine.prefill(TEXT, PACK)
    longer = engine.prefill(TEXT + " Please help.", PACK)
    # all of the first prefix but what follows the ticket's text in its block is shared
    assert first.tokens - 20 < longer.cached < first.tokens and longer.evaluated == longer.tokens - longer.cached
    edited = TEXT.replace("nine", "ten")
    again = engine.prefill(edited, PACK)
    assert 0 < again.cached < again.tokens and again.evaluated == again.tokens - again.cached
    tokens = final(engine.score(edited, PACK)).result.tokens
    assert tokens.prefix_cached == tokens.prefix


def test_a_cancelled_prefill_keeps_what_it_computed_and_says_incomplete() -> None:
    engine = FakeEngine(prefill_delay=2.0)
    stop = threading.Event()
    got: list[PrefillResult] = []
    t = threading.Thread(target=lambda: got.append(engine.prefill(TEXT, PACK, cancel=stop.is_set)))
    t.start()
    assert engine.prefilling.wait(5)
    time.sleep(0.3)
    stop.set()
    t.join(5)
    [done] = got
    assert not done.complete and 0 < done.evaluated < done.tokens
    tokens = final(engine.score(TEXT, PACK)).result.tokens
    assert tokens.prefix_cached == done.evaluated  # the part done is kept; the score computes the rest


def test_a_changed_stable_block_is_said_once_even_when_a_prefill_paid_it() -> None:
    engine = FakeEngine()
    engine.stable_note = "stable prefix changed, so its prefill is paid again once (pack: a → b)"
    engine.prefill(TEXT, PACK)
    warned = [final(engine.score(t, PACK)).result.warnings for t in (TEXT, TEXT + " More.")]
    assert [sum("stable prefix changed" in w for w in ws) for ws in warned] == [1, 0]


def test_a_session_without_a_model_cannot_prefill() -> None:
    with pytest.raises(TriageError, match="no model"):
        Session(None).prefill(TEXT, PACK)


# -- the real engine (interim prefill; the prefix store's replaces it) ---------------------------------------------
def test_the_engine_prefills_then_scores_only_the_tails(smollm2_engine: Engine) -> None:
    engine = smollm2_engine
    engine.clear()
    done = engine.prefill(TEXT, PACK)
    assert done.complete and done.evaluated == done.tokens - done.cached and done.tokens > 0
    assert engine.prefill(TEXT, PACK).evaluated == 0  # already in
    tokens = final(engine.score(TEXT, PACK)).result.tokens
    assert tokens.prefix_cached == tokens.prefix == done.tokens
    assert tokens.evaluated == tokens.tails
    edited = TEXT.replace("nine", "ten")
    again = engine.prefill(edited, PACK)
    assert tokens.stable < again.cached < again.tokens  # reused up to the first changed token


def test_a_cancelled_engine_prefill_leaves_a_clean_cache(smollm2_engine: Engine) -> None:
    engine = smollm2_engine
    engine.clear()
    cold = final(engine.score(TEXT, PACK)).result
    done = engine.prefill(TEXT + " Again.", PACK, cancel=lambda: True)
    assert not done.complete
    after = final(engine.score(TEXT, PACK)).result
    assert [c.options for c in after.criteria] == [c.options for c in cold.criteria]


def test_the_cli_says_a_changed_stable_block_once(
    cli: Any, smollm2_path: Path, mini_pack: Path, tmp_path: Path
) -> None:
    tickets = tmp_path / "tickets.jsonl"
    tickets.write_text("".join(json.dumps({"id": f"T-{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    first = cli(["score", str(tickets), "--model", str(smollm2_path), "--format", "jsonl"])
    assert first.returncode == 0, first.stderr
    assert "stable prefix changed" not in first.stderr  # nothing to compare with yet
    again = cli(["score", str(tickets), "--model", str(smollm2_path), "--pack", str(mini_pack), "--format", "jsonl"])
    assert again.returncode == 0, again.stderr
    said = [line for line in again.stderr.splitlines() if "stable prefix changed" in line]
    assert len(said) == 1 and "ticket T-0" in said[0] and "pack:" in said[0], again.stderr

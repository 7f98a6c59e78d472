"""Engine.prefill: a ticket's prompt computed up to its tails, so that its score costs only the tails.

Real models: the counts come from the engine, the numbers are compared with a cold score of the same ticket.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.scoring.engine import Engine
from triage.scoring.prefix_store import common_length

FANOUT_TOL = 0.05  # as tests/test_threads.py: against other batch shapes
TICKET = (
    "Hello, I ordered a blue kettle on March 3rd (order 88213) and it arrived with a cracked lid. "
    "I sent photos to your support address twice and nobody answered. I want a replacement or my money back, "
    "and I would like to know why nobody replies to emails. This is the second broken item this year."
)


def probs(result: Any) -> np.ndarray:
    return np.array([o.probability for c in result.criteria for o in c.options])


def prefix_of(engine: Engine, pack: Any, text: str) -> tuple[int, ...]:
    orders = [[tuple(range(len(c.options)))] for c in pack.criteria]
    return engine.builder(pack).build(text, orders, n_ctx=engine.n_ctx).prefix


def cold(engine: Engine, pack: Any, ticket: Any) -> Any:
    engine.forget()
    engine.hold_stable(pack)
    return engine.score_ticket(ticket, pack)


@pytest.mark.parametrize("model", ["smollm2", "qwen25"])
def test_a_score_after_a_prefill_evaluates_only_the_tails(model: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(f"{model}_path")
    pack = default_pack()
    with Engine(path, n_ctx=2048) as eng:
        drift = 0.0
        for i, text in enumerate([TICKET, "@AirCo 4 hours on the tarmac and no water. Where is my bag?"]):
            ticket = make_ticket(text, f"P-{i}")
            want = cold(eng, pack, ticket)
            eng.forget()
            eng.hold_stable(pack)
            pre = eng.prefill(ticket, pack)
            prefix = prefix_of(eng, pack, text)
            assert pre.complete and pre.tokens == len(prefix) == want.tokens.prefix
            assert pre.cached == want.tokens.stable and pre.evaluated == len(prefix) - want.tokens.stable
            got = eng.score_ticket(ticket, pack)
            assert got.tokens.prefix_cached == got.tokens.prefix  # the prefilled tokens count as cached
            assert got.tokens.evaluated <= got.tokens.tails + 1  # the tails, and at most the trimmed token
            assert got.tokens.hit_rate > want.tokens.hit_rate
            again = eng.score_ticket(ticket, pack)  # the prefill's cells stay reusable: the same numbers again
            assert probs(again).tolist() == probs(got).tolist()
            assert eng.prefill(ticket, pack).evaluated == 0  # already there
            drift = max(drift, float(np.max(np.abs(probs(got) - probs(want)))))
        print(f"{model}: max |dp| after a prefill against a cold score {drift:.4f}")
        assert drift < FANOUT_TOL


def test_an_edit_reuses_the_prefill_up_to_the_first_changed_token(smollm2_path: Path) -> None:
    pack = default_pack()
    with Engine(smollm2_path, n_ctx=2048) as eng:
        eng.forget()
        eng.prefill(make_ticket(TICKET), pack)
        edited = TICKET.replace("cracked lid", "broken handle")
        got = eng.score_ticket(make_ticket(edited), pack)
        shared = common_length(prefix_of(eng, pack, TICKET), prefix_of(eng, pack, edited))
        assert got.tokens.prefix_cached == shared < got.tokens.prefix
        assert got.tokens.evaluated == got.tokens.prefix - shared + got.tokens.tails
        longer = TICKET + " Please call me back."  # typing went on: the prefill's ticket tokens all hit
        grown = eng.score_ticket(make_ticket(longer), pack)
        assert grown.tokens.prefix_cached == common_length(prefix_of(eng, pack, TICKET), prefix_of(eng, pack, longer))
        assert grown.tokens.prefix_cached > got.tokens.prefix_cached


def test_another_ticket_after_a_prefill_scores_cold(smollm2_path: Path) -> None:
    pack = default_pack()
    with Engine(smollm2_path, n_ctx=2048) as eng:
        other = make_ticket("My invoice shows a charge twice for the same month; please refund one.")
        want = cold(eng, pack, other)
        eng.prefill(make_ticket(TICKET), pack)
        got = eng.score_ticket(other, pack)
        assert got.tokens.prefix_cached == got.tokens.stable
        assert np.array_equal(probs(got), probs(want))


def test_a_cancelled_prefill_leaves_the_cache_clean(smollm2_path: Path) -> None:
    pack = default_pack()
    with Engine(smollm2_path, n_ctx=2048) as eng:
        ticket = make_ticket(TICKET)
        want = cold(eng, pack, ticket)
        eng.forget()
        calls = []

        def stop() -> bool:  # not at the checks before the decode: inside it
            calls.append(1)
            return len(calls) > 3

        pre = eng.prefill(ticket, pack, cancel=stop)
        assert not pre.complete and pre.evaluated == 0 and len(eng.memory) == 0
        got = eng.score_ticket(ticket, pack)
        assert got.tokens.prefix_cached == got.tokens.stable
        assert np.array_equal(probs(got), probs(want))  # a fresh engine's numbers
        assert not eng.prefill(ticket, pack, cancel=lambda: True).complete

"""Packed backlog decodes (:mod:`triage.lab.packed`) on the real small model.

Several tickets' fanout in one decode must give each ticket the numbers of its own
decode within fanout's tested tolerance, in input order, with one record per ticket, and
a ticket that cannot be scored must not stop the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_engine import SMALL_PACK, TICKETS

from triage.domain.pack import load_pack
from triage.domain.ticket import make_ticket
from triage.errors import TriageError
from triage.lab import score as lab
from triage.lab.options import LabOptions
from triage.lab.packed import cost, packs, score_packed
from triage.scoring.engine import Engine, ScoreOptions, TicketScored
from triage.scoring.start import start_run

# A pack of several tickets is a larger batch: llama.cpp runs other kernel shapes for its rows, so a packed
# ticket's numbers drift from its own decode as fanout's drift from serial. Measured here (smollm2-135m, this
# pack, these 8 tickets): 0.071, the first ticket of each pack 0.0 (docs/engine.md, "Packed decodes").
PACKED_TOL = 0.1

MORE = [
    "My cherry order never came and nobody answers the phone.",
    "Can I change the apple variety on my subscription?",
    "The bananas were green again. Fourth time. I want my money back.",
    "Hello, just saying thanks for the quick delivery of the cherries.",
]


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("pack") / "test.toml"
    path.write_text(SMALL_PACK, encoding="utf-8")
    return load_pack(path)


def probs(result: Any) -> np.ndarray:
    return np.array([o.probability for c in result.criteria for o in c.options])


def test_packed_tickets_score_as_each_alone_within_fanouts_tolerance(smollm2_path: Path, pack: Any) -> None:
    tickets = [make_ticket(t, f"T{i}") for i, t in enumerate([*TICKETS, *MORE])]
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=2048, thread_cache_mib=0) as eng:
        serial = [lab.score_ticket(eng, t, pack, LabOptions(mode="serial")) for t in tickets]
        alone = [eng.score_ticket(t, pack) for t in tickets]
        got = list(score_packed(eng, tickets, pack, budget=256))
        runs_per_pack = [
            len(p)
            for p in packs(
                [start_run(eng, t, pack, ScoreOptions(), _how(eng, pack)) for t in tickets], eng.resident, 256
            )
        ]
    assert max(runs_per_pack) > 1 and sum(runs_per_pack) == len(tickets)  # tickets were really packed
    assert [t.id for t, _ in got] == [t.id for t in tickets]  # input order
    worst_alone = worst_serial = fanout_serial = 0.0
    for (_, done), one, ser in zip(got, alone, serial, strict=True):
        assert isinstance(done, TicketScored)
        r = done.result
        assert r.complete and r.mode == "fanout" and r.tokens.evaluated == one.tokens.evaluated
        assert r.tokens.stable_cached == r.tokens.stable  # the stable block was shared, not computed per ticket
        worst_alone = max(worst_alone, float(np.max(np.abs(probs(r) - probs(one)))))
        worst_serial = max(worst_serial, float(np.max(np.abs(probs(r) - probs(ser)))))
        fanout_serial = max(fanout_serial, float(np.max(np.abs(probs(one) - probs(ser)))))
        for c, s in zip(r.criteria, one.criteria, strict=True):
            if s.margin > 2 * PACKED_TOL:
                assert c.choice == s.choice
    print(
        f"packed against one ticket per decode: max |dp| {worst_alone:.4f}; against serial {worst_serial:.4f} "
        f"(one ticket per decode against serial: {fanout_serial:.4f})"
    )
    assert worst_alone < PACKED_TOL  # today's numbers (one fanout decode per ticket)


def _how(eng: Engine, pack: Any) -> Any:
    from triage.scoring.decide import Decider

    return Decider(pack, eng.tokenizer, None, None), False, None


def test_a_pack_never_exceeds_its_budget_unless_one_ticket_does(smollm2_engine: Engine, pack: Any) -> None:
    runs = [
        start_run(smollm2_engine, make_ticket(t), pack, ScoreOptions(), _how(smollm2_engine, pack)) for t in MORE * 3
    ]
    for budget in (1, 100, 300, 10_000):
        got = packs(runs, smollm2_engine.resident, budget)
        assert [r for p in got for r in p] == runs
        for p in got:
            assert len(p) == 1 or sum(cost(r)[0] for r in p) <= budget
            assert sum(cost(r)[1] for r in p) <= smollm2_engine.native.n_seq_max - 2


def test_a_ticket_that_cannot_be_scored_does_not_stop_the_others(smollm2_path: Path, pack: Any) -> None:
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=2048) as eng:
        tickets = [make_ticket(t, f"T{i}") for i, t in enumerate(MORE)]
        only = ScoreOptions(criteria=("nope",))  # every ticket fails the same way: each gets its error
        got = list(eng.score_many(tickets, pack, only))
        assert [t.id for t, _ in got] == [t.id for t in tickets]
        assert all(isinstance(d, TriageError) and "nope" in d.message for _, d in got)
        fine = list(eng.score_many(tickets, pack))
        assert all(isinstance(d, TicketScored) and d.result.complete for _, d in fine)


@pytest.mark.parametrize("read", ["tail", "shared:answer"])
def test_packed_tickets_read_at_either_position_match_their_own_decode(
    smollm2_path: Path, pack: Any, read: str
) -> None:
    """``score_packed(..., read=...)`` (bench/learn_throughput.py's packed way): fewer decodes than tickets, and each
    ticket's readouts and features as its own decode at that position gives them, within the packed tolerance."""
    tickets = [make_ticket(t, f"R{i}") for i, t in enumerate([*TICKETS, *MORE])]
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=2048, thread_cache_mib=0) as eng:
        opts = ScoreOptions()
        alone = [eng.readouts_and_features(t, pack, opts, read=None if read == "tail" else read) for t in tickets]
        calls = 0
        real = eng.native.decode

        def counted(*a: Any, **kw: Any) -> Any:
            nonlocal calls
            calls += 1
            return real(*a, **kw)

        eng.native.decode = counted  # type: ignore[method-assign]
        try:
            got = list(score_packed(eng, tickets, pack, LabOptions(), features=True, budget=512, read=read))
        finally:
            eng.native.decode = real  # type: ignore[method-assign]
    assert 0 < calls < len(tickets)
    ids = [c.id for c in pack.criteria]
    for (ticket, done), (_, raw, feats) in zip(got, alone, strict=True):
        assert isinstance(done, TicketScored), ticket.id
        assert set(done.features) == set(ids) and all(done.features[c].shape == feats[c].shape for c in ids)
        for cid in ids:
            pa, pb = np.exp(raw[cid][0][1]), np.exp(done.readouts[cid][0][1])
            assert np.max(np.abs(pa - pb)) < PACKED_TOL

"""Progress during a long prefill, told from inside the decode, and the measured rate behind "about N s".

The meter and the rate are checked on their own (no model); the engine's progress with smollm2-135m
on one thread: tokens done rise inside the one fan-out decode, end at the tokens evaluated, a fresh
stable block is told as its own phase, and the numbers are exactly those of a score nobody watched.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from test_cancel import long_ticket

from triage.domain.pack import Pack, default_pack
from triage.domain.result import TicketResult
from triage.model.native import NativeModel, Seq
from triage.model.progress import DecodeMeter
from triage.scoring.engine import Engine, Progress, ScoreOptions
from triage.scoring.prompt import TICKET_TOKENS
from triage.scoring.speed import Speed


def test_the_meter_turns_graph_nodes_into_tokens() -> None:
    meter = DecodeMeter(n_ubatch=512)
    told: list[tuple[int, int]] = []
    meter.start(1, 0, 1, lambda d, t: told.append((d, t)))
    for _ in range(100):
        meter.tick()
    meter.finish(True)
    assert meter.nodes == 100 and told == []  # nothing is told inside a call before the node count is known
    meter.start(700, 0, 700, lambda d, t: told.append((d, t)))  # micro-batches of 512 and 188 tokens
    for _ in range(50):
        meter.tick()
    assert meter.within() == 256  # half of the first micro-batch
    for _ in range(150):
        meter.tick()
    assert meter.within() == 700
    meter.finish(True)
    meter.done(700)
    assert told[-1] == (700, 700)
    dones = [d for d, _ in told]
    assert dones == sorted(dones) and len(told) > 10 and all(t == 700 for _, t in told)


def test_the_rate_is_measured_not_assumed() -> None:
    speed = Speed(keep=2)
    assert speed.tokens_per_s is None and speed.seconds(100) is None
    speed.record(100, 2000.0)
    assert speed.tokens_per_s == pytest.approx(50.0) and speed.seconds(400) == pytest.approx(8.0)
    speed.record(0, 10.0)  # nothing decoded: not a measurement
    speed.record(300, 1000.0)
    speed.record(300, 1000.0)  # only the last two count
    assert speed.tokens_per_s == pytest.approx(300.0)


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[Engine]:
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=2048, threads=1) as eng:
        yield eng


def probs(result: TicketResult) -> np.ndarray:
    return np.array([o.probability for c in result.criteria for o in c.options])


@pytest.mark.model
def test_a_long_prefill_tells_its_progress_from_inside_the_decode(engine: Engine) -> None:
    pack: Pack = default_pack()
    ticket = long_ticket(engine, 2 * TICKET_TOKENS)  # cut to the budget: the longest prefill a ticket has
    engine.score_ticket("warm up: the stable block is resident from here on", pack)
    told: list[Progress] = []
    watched = engine.score_ticket(ticket, pack, progress=told.append)
    assert watched.complete and watched.tokens.ticket <= TICKET_TOKENS
    assert {p.phase for p in told} == {"ticket"}  # the stable block was resident
    dones = [p.done for p in told]
    assert dones == sorted(dones) and all(p.total == watched.tokens.evaluated for p in told)
    assert dones[-1] == watched.tokens.evaluated
    inside = [d for d in dones if 0 < d < watched.tokens.evaluated]
    assert len(inside) >= 10, f"only {len(inside)} progress reports inside a {watched.tokens.evaluated}-token decode"
    unwatched = engine.score_ticket(ticket, pack)  # the same batches: the same numbers, bit for bit
    assert np.array_equal(probs(watched), probs(unwatched))
    assert engine.speed.tokens_per_s is not None and engine.speed.tokens_per_s > 0


@pytest.mark.model
def test_a_fresh_stable_block_is_its_own_phase(smollm2_path: Path) -> None:
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=2048, threads=1) as fresh:
        told: list[Progress] = []
        result = fresh.score_ticket("Where is my parcel?", default_pack(), progress=told.append)
    phases = [p.phase for p in told]
    first_ticket = phases.index("ticket")
    assert phases[0] == "stable" and set(phases[first_ticket:]) == {"ticket"}  # the stable block, then the ticket
    stable = [p for p in told if p.phase == "stable"]
    assert stable[-1].done == stable[-1].total == result.tokens.stable
    assert told[-1].done == told[-1].total == result.tokens.evaluated - result.tokens.stable
    dones = [p.done for p in told if p.phase == "ticket"]
    assert dones == sorted(dones)


@pytest.mark.model
def test_cancelling_from_a_progress_report_stops_the_decode(engine: Engine) -> None:
    pack = default_pack()
    engine.hold_stable(pack)
    stop = threading.Event()

    def tell(p: Progress) -> None:
        if 0 < p.done < p.total:
            stop.set()  # Esc, pressed while the bar moves

    result = engine.score_ticket(
        long_ticket(engine, 2 * TICKET_TOKENS), pack, ScoreOptions(), cancel=stop.is_set, progress=tell
    )
    assert not result.complete and result.criteria == []
    after = engine.score_ticket("Where is my parcel?", pack)  # the engine is clean afterwards
    assert after.complete


@pytest.mark.model
def test_counting_graph_nodes_at_load_changes_no_number(smollm2_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seq = [Seq("t", 0, 0, tuple(range(200, 260)))]
    counted = NativeModel(smollm2_path, n_ctx=512, n_threads=1)
    try:
        assert counted.meter.nodes is not None and counted.meter.nodes > 10
        a = counted.decode(seq)["t"]
        b = counted.decode([Seq("u", 0, 60, (300, 301, 302))], progress=lambda *_: None)["u"]
    finally:
        counted.close()
    monkeypatch.setattr(NativeModel, "_learn_graph", lambda self: None)
    plain = NativeModel(smollm2_path, n_ctx=512, n_threads=1)
    try:
        assert plain.meter.nodes is None
        assert np.array_equal(a, plain.decode(seq)["t"])
        assert np.array_equal(b, plain.decode([Seq("u", 0, 60, (300, 301, 302))])["u"])
    finally:
        plain.close()

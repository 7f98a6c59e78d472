"""Cancelling a score inside one long decode, in every mode (smollm2-135m, a ~900-token ticket).

llama.cpp asks the engine's abort callback between graph computations, so a cancel
stops the decode that is running, not only the next one. Timings are compared as
ratios against the same decode uncancelled, measured in the same test: never a fixed
threshold on a shared machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from triage.domain.pack import Pack, default_pack
from triage.domain.result import TicketResult
from triage.lab import score as lab
from triage.lab.options import LabOptions
from triage.scoring import prompt
from triage.scoring.engine import Engine, ScoreOptions

N_CTX = 2048
SENTENCES = [
    "I ordered the blue kettle on the third of May and it still has not arrived.",
    "Your tracking page says it was delivered, but nobody here received a parcel.",
    "I was charged twice for the same order, once on my card and once through the wallet.",
    "The support chat closed on me two times before anyone answered a question.",
    "Please refund the duplicate payment and tell me where the kettle actually is.",
    "My account number is in the signature, and I have attached both receipts.",
]


def long_ticket(engine: Engine, tokens: int = 900) -> str:
    """A plausible complaint of about ``tokens`` tokens for this model."""
    parts: list[str] = []
    i = 0
    while len(engine.tokenizer.encode(" ".join(parts))) < tokens:
        day = ["third", "fourth", "fifth"][i // len(SENTENCES) % 3]
        parts.append(SENTENCES[i % len(SENTENCES)].replace("third", day))
        i += 1
    return " ".join(parts)


@pytest.fixture(autouse=True)
def long_prefill(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ticket budget above this test's ticket: one long decode to cancel inside (the product's budget
    keeps a ticket's prefill short; cancelling inside one decode is what is tested here)."""
    monkeypatch.setattr(prompt, "TICKET_TOKENS", 8192)


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[Engine]:
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=N_CTX) as eng:
        yield eng


@pytest.fixture(scope="module")
def pack() -> Pack:
    return default_pack()


def probs(result: TicketResult) -> np.ndarray:
    return np.array([o.probability for c in result.criteria for o in c.options])


def cancelled_run(
    engine: Engine, ticket: str, pack: Pack, options: ScoreOptions
) -> tuple[TicketResult, float, float, int]:
    """Score in a thread and cancel from this one once llama.cpp is inside a decode.

    Returns:
        (result, seconds from start to return, seconds from the cancel to return,
        how often the cancel check had been asked when the cancel was set).
    """
    asked = 0
    inside = threading.Event()
    stop = threading.Event()

    def cancel() -> bool:
        nonlocal asked
        asked += 1
        if asked > 20:  # the engine asks a few times before a decode; llama.cpp then asks per graph node
            inside.set()
        return stop.is_set()

    out: list[TicketResult] = []
    worker = threading.Thread(target=lambda: out.append(lab.score_ticket(engine, ticket, pack, options, cancel=cancel)))
    t0 = time.perf_counter()
    worker.start()
    assert inside.wait(60), "the decode never started"
    at = asked
    t_cancel = time.perf_counter()
    stop.set()
    worker.join(60)
    t_end = time.perf_counter()
    assert not worker.is_alive() and out
    return out[0], t_end - t0, t_end - t_cancel, at


# Fanout only: the app and serve cancel (they pass ``cancel=``), and they score fanout. Serial (eval's letter
# readout) and bench's schedules run to the end; nothing cancels them. Serial's own numbers stay tested:
# test_engine.py::test_fanout_matches_serial_and_full_drift_is_reported, test_label_readout.py's
# test_serial_and_fanout_match_split_with_whole_answers.
@pytest.mark.parametrize("mode", ["fanout"])
def test_cancel_stops_the_running_decode_and_leaves_the_engine_exact(
    engine: Engine, pack: Pack, smollm2_path: Path, mode: str
) -> None:
    options = LabOptions(mode=mode)  # type: ignore[arg-type]
    ticket = long_ticket(engine)
    assert 850 <= len(engine.tokenizer.encode(ticket)) <= 1000

    engine.hold_stable(pack)  # as between two tickets: the stable block resident, the ticket new
    t0 = time.perf_counter()
    whole = lab.score_ticket(engine, ticket, pack, options)
    uncancelled = time.perf_counter() - t0
    assert whole.complete and whole.tokens.ticket > 850

    engine.hold_stable(pack)
    result, took, latency, asked = cancelled_run(engine, ticket, pack, options)
    assert not result.complete and any("cancelled" in w for w in result.warnings)
    assert len(result.criteria) < len(pack.criteria)
    assert asked > 20  # set while llama.cpp was asking: inside a decode
    assert took < 0.5 * uncancelled, (took, uncancelled)
    assert latency < 0.1 * uncancelled, (latency, uncancelled)  # about a graph node, not a decode

    # The engine is usable at once, and its next score is a fresh engine's, bit for bit.
    after = lab.score_ticket(engine, ticket, pack, options)
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=N_CTX) as fresh:
        reference = lab.score_ticket(fresh, ticket, pack, options)
    assert after.complete and np.array_equal(probs(after), probs(reference))
    assert np.array_equal(probs(after), probs(whole))

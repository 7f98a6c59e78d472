"""The ``threads`` workload: what re-scoring a growing thread costs, turn by turn.

Each thread starts with a real ticket of the bench set (``assets/bench-tickets.jsonl``:
one short, one medium, one long) and goes on with an agent's answer, the customer's
follow-up, another answer and a last follow-up (written for this bench, the same for
every thread). For each turn ``k`` (the thread with ``k`` messages) one run measures,
side by side and interleaved:

* **re-score**: the same ticket id scored again with one more message: the engine reuses
  the thread's kept state and evaluates only the new message and the tails;
* **fresh**: the same ``k`` messages under a new id (nothing kept): the whole thread;
* **bound**: the re-score's evaluated tokens in one plain decode after the same prefix
  (``llama_decode`` of one sequence, no readout): the raw prompt-processing cost of
  "new tokens + tails".

Repeats interleave the three, so machine noise hits them alike; medians are reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from triage.bench.stats import median
from triage.domain.ticket import make_ticket
from triage.model.seq import Seq

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.scoring.engine import Engine
    from triage.scoring.head import Head

REPLIES = (
    (
        "agent",
        "Thank you for writing, and sorry for the trouble. I have passed this to the team that handles it and "
        "asked them to look at your account today. I will write again as soon as I hear back.",
    ),
    (
        "customer",
        "It has been three days and nobody has written back. This is the second time I am asking. "
        "Please tell me what is happening and when it will be fixed.",
    ),
    (
        "agent",
        "I apologise for the wait. The team has found the cause and is working on it. I have asked for the fix "
        "to be done first thing tomorrow and will confirm when it is done.",
    ),
    (
        "customer",
        "Still nothing today. If this is not sorted by Friday I will close my account and file a complaint. "
        "I want to speak to a manager.",
    ),
)


def build_threads(tickets: list[Any]) -> list[tuple[str, str, list[dict[str, str]]]]:
    """One thread per bench ticket: ``(id, kind, messages)``, the ticket first, then :data:`REPLIES`."""
    out = []
    for t in tickets:
        msgs = [{"role": "customer", "text": t.text}] + [{"role": r, "text": x} for r, x in REPLIES]
        out.append((t.id, t.kind, msgs))
    return out


@dataclass
class Turn:
    """One turn's measurements over the repeats."""

    messages: int
    rescore_ms: list[float] = field(default_factory=list)
    fresh_ms: list[float] = field(default_factory=list)
    bound_ms: list[float] = field(default_factory=list)
    evaluated: int = 0
    fresh_evaluated: int = 0
    reused: int = 0
    tails: int = 0

    def to_dict(self) -> dict[str, object]:
        r, f, b = median(self.rescore_ms), median(self.fresh_ms), median(self.bound_ms)
        return {
            "messages": self.messages,
            "evaluated": self.evaluated,
            "tails": self.tails,
            "new": self.evaluated - self.tails,
            "reused": self.reused,
            "fresh_evaluated": self.fresh_evaluated,
            "rescore_ms": round(r, 1),
            "fresh_ms": round(f, 1),
            "bound_ms": round(b, 1),
            "rescore_over_bound": round(r / b, 3) if b else None,
            "fresh_over_rescore": round(f / r, 3) if r else None,
        }


def raw_decode_ms(engine: Engine, prefix: tuple[int, ...], n: int, filler: tuple[int, ...]) -> float:
    """Time one decode of ``n`` tokens in a sequence that shares ``prefix`` (sequence 0 holds it)."""
    native = engine.native
    toks = (filler * (n // max(len(filler), 1) + 1))[:n]
    engine.resident.share((1,))
    t0 = time.perf_counter()
    try:
        native.decode([Seq("raw", 1, len(prefix), toks)])
    finally:
        ms = (time.perf_counter() - t0) * 1000
        engine.resident.unshare((1,))
    return ms


def measure(
    engine: Engine,
    pack: Pack,
    threads: list[tuple[str, str, list[dict[str, str]]]],
    repeats: int,
    head: Head | None = None,
) -> list[dict]:
    """Every thread's turns, ``repeats`` times, re-score / fresh / bound interleaved (see the module docstring).

    With ``head`` every score applies it: a head that reads at the shared position (``head.read``) replaces
    the criteria's tails by one short cue, so the re-score evaluates the new message and that cue.
    """
    engine.score_ticket("warm up: the stable block", pack, head=head)
    results: list[dict[str, object]] = []
    for tid, kind, msgs in threads:
        turns = [Turn(k) for k in range(1, len(msgs) + 1)]
        for rep in range(repeats):
            engine.forget()
            for k, turn in enumerate(turns, 1):
                again = engine.score_ticket(make_ticket(None, f"{tid}#{rep}", msgs[:k]), pack, head=head)
                fresh = engine.score_ticket(make_ticket(None, f"{tid}#{rep}/fresh{k}", msgs[:k]), pack, head=head)
                engine.forget(f"{tid}#{rep}/fresh{k}")
                turn.rescore_ms.append(again.timing.total_ms)
                turn.fresh_ms.append(fresh.timing.total_ms)
                turn.evaluated, turn.tails, turn.reused = (
                    again.tokens.evaluated,
                    again.tokens.tails,
                    again.thread.reused,
                )
                turn.fresh_evaluated = fresh.tokens.evaluated
                # the bound: the same number of tokens in one plain decode after this thread's prefix
                prefix = (
                    engine.builder(pack)
                    .build(
                        again_text(msgs[:k]),
                        [[tuple(range(len(c.options)))] for c in pack.criteria],
                        n_ctx=engine.n_ctx,
                    )
                    .prefix
                )
                hold_prefix(engine, pack, prefix)
                turn.bound_ms.append(raw_decode_ms(engine, prefix, again.tokens.evaluated, prefix[-64:]))
                engine.hold_stable(pack)
        results.append({"thread": tid, "kind": kind, "turns": [t.to_dict() for t in turns]})
    return results


def again_text(msgs: list[dict[str, str]]) -> str:
    """The thread's text as the ticket block writes it."""
    return make_ticket(None, "x", msgs).text


def hold_prefix(engine: Engine, pack: Pack, prefix: tuple[int, ...]) -> None:
    """Leave ``prefix`` in sequence 0 (the stable block resident, the rest decoded), for the bound's decode."""
    engine.hold_stable(pack)
    stable = engine.builder(pack).stable_tokens
    engine.native.decode([Seq("p", 0, len(stable), prefix[len(stable) :])])
    engine.resident.tokens = prefix

"""Bench's paste figures: a ticket's decisions after its prompt was prefilled while it was pasted.

For a tweet and a ticket at the ticket budget (~384 tokens), each repetition scores the ticket
cold (the stable block resident, nothing else kept), then prefills it (:meth:`Engine.prefill
<triage.scoring.engine.Engine.prefill>`) and scores it again. The report gives medians side by
side: the cold score, the score after the prefill, and the tails alone (the tails' own decode
time, as the engine's timing splits the cold score's one batch). Fields: docs/engine.md,
"Prefill while pasting".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from triage.bench.workload import BenchTicket
    from triage.domain.pack import Pack
    from triage.domain.result import TicketResult
    from triage.scoring.engine import Engine


@dataclass
class PasteTicket:
    """One ticket's repetitions."""

    ticket_id: str
    kind: str
    ticket_tokens: int = 0
    tails: int = 0
    cold_ms: list[float] = field(default_factory=list)
    cold_tails_ms: list[float] = field(default_factory=list)
    prefill_ms: list[float] = field(default_factory=list)
    after_ms: list[float] = field(default_factory=list)
    after_tails_ms: list[float] = field(default_factory=list)
    cold_evaluated: int = 0
    prefill_evaluated: int = 0
    after_evaluated: int = 0
    after_cached: int = 0
    max_abs_prob: float = 0.0  # after a prefill against cold, over every repetition

    def to_dict(self) -> dict[str, object]:
        cold, tails, after = (median(x) for x in (self.cold_ms, self.cold_tails_ms, self.after_ms))
        return {
            "ticket": self.ticket_id,
            "kind": self.kind,
            "ticket_tokens": self.ticket_tokens,
            "tails": self.tails,
            "repeats": len(self.cold_ms),
            "cold_ms": round(cold, 1),
            "prefill_ms": round(median(self.prefill_ms), 1),
            "after_prefill_ms": round(after, 1),
            "tails_alone_ms": round(tails, 1),
            "after_prefill_tails_ms": round(median(self.after_tails_ms), 1),
            "after_over_tails": round(after / tails, 3) if tails else None,
            "cold_over_after": round(cold / after, 3) if after else None,
            "cold_evaluated": self.cold_evaluated,
            "prefill_evaluated": self.prefill_evaluated,
            "after_evaluated": self.after_evaluated,
            "after_cached": self.after_cached,
            "max_abs_prob_vs_cold": round(self.max_abs_prob, 4),
        }


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def _probs(result: TicketResult) -> np.ndarray:
    return np.array([o.probability for c in result.criteria for o in c.options])


def measure(engine: Engine, pack: Pack, tickets: list[BenchTicket], repeats: int) -> list[dict[str, object]]:
    """Each ticket's cold score, prefill and score after it, ``repeats`` times, interleaved ticket by ticket."""
    got = [PasteTicket(t.id, t.kind) for t in tickets]
    for _ in range(repeats):
        for t, row in zip(tickets, got, strict=True):
            ticket = t.as_ticket()
            engine.forget()
            engine.hold_stable(pack)
            cold = engine.score_ticket(ticket, pack)
            engine.forget()
            engine.hold_stable(pack)
            pre = engine.prefill(ticket, pack)
            after = engine.score_ticket(ticket, pack)
            row.ticket_tokens, row.tails = cold.tokens.ticket, cold.tokens.tails
            row.cold_ms.append(cold.timing.total_ms)
            row.cold_tails_ms.append(cold.timing.tails_ms)
            row.prefill_ms.append(pre.ms)
            row.after_ms.append(after.timing.total_ms)
            row.after_tails_ms.append(after.timing.tails_ms)
            row.cold_evaluated, row.prefill_evaluated = cold.tokens.evaluated, pre.evaluated
            row.after_evaluated, row.after_cached = after.tokens.evaluated, after.tokens.prefix_cached
            row.max_abs_prob = max(row.max_abs_prob, float(np.max(np.abs(_probs(after) - _probs(cold)))))
    engine.forget()
    engine.hold_stable(pack)
    return [r.to_dict() for r in got]


def summary_lines(rows: list[dict[str, object]]) -> list[str]:
    """One line per ticket for the terminal: the three medians and the issue's ratio."""
    out = []
    for r in rows:
        out.append(
            f"paste, {r['kind']} ({r['ticket_tokens']} ticket tokens): cold {r['cold_ms']} ms, after a prefill "
            f"{r['after_prefill_ms']} ms, the tails alone {r['tails_alone_ms']} ms "
            f"(after/tails {r['after_over_tails']}; prefill {r['prefill_ms']} ms; |Δp| {r['max_abs_prob_vs_cold']})"
        )
    return out

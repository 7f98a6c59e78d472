"""Drift: how far one mode's probabilities and choices are from another's on the same tickets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from triage.bench.samples import first
from triage.bench.stats import clean
from triage.bench.workload import SERIAL_MODES, SPLIT

if TYPE_CHECKING:
    from triage.bench.runner import BenchRun
    from triage.domain.result import TicketResult


def _probs(result: TicketResult) -> dict[tuple[str, str], float]:
    return {(c.id, o.id): o.probability for c in result.criteria for o in c.options}


def _common(a: TicketResult, b: TicketResult) -> set[str]:
    common = {c.id for c in a.criteria} & {c.id for c in b.criteria}
    if not common:
        raise ValueError("results share no criteria")
    return common


def max_abs_prob_diff(a: TicketResult, b: TicketResult) -> float:
    """Largest |Δp| between two results of the same ticket and pack, over the criteria both scored."""
    common = _common(a, b)
    pa = {k: v for k, v in _probs(a).items() if k[0] in common}
    pb = {k: v for k, v in _probs(b).items() if k[0] in common}
    if pa.keys() != pb.keys():
        raise ValueError("results are for different options")
    return max(abs(pa[k] - pb[k]) for k in pa)


def choice_flips(a: TicketResult, b: TicketResult) -> int:
    """Criteria (of those both scored) whose chosen option differs between two results."""
    common = _common(a, b)
    cb = {c.id: c.choice for c in b.criteria}
    return sum(c.choice != cb[c.id] for c in a.criteria if c.id in common)


def drift_report(run: BenchRun) -> dict[str, object]:
    """The report's ``drift``: largest |Δp| and choice flips per pair of modes."""
    samples = run.samples
    pairs = {
        "vs_full": [(m, "full") for m in SERIAL_MODES],
        "same_split": [(m, SPLIT) for m in SERIAL_MODES],
        "fanout_vs_full": [("fanout", "full")],
        "fanout_vs_split": [("fanout", SPLIT)],
        "restore_vs_truncate": [("serial_restore", "serial_truncate")],
    }
    out: dict[str, object] = {}
    for name, mode_pairs in pairs.items():
        worst: float | None = None
        flips = 0
        compared = 0
        for a_mode, b_mode in mode_pairs:
            for t in run.workload.tickets:
                a, b = first(samples, a_mode, t.id), first(samples, b_mode, t.id)
                if a is None or b is None:
                    continue
                d = max_abs_prob_diff(a, b)
                worst = d if worst is None else max(worst, d)
                flips += choice_flips(a, b)
                compared += 1
        out[f"max_abs_prob_{name}"] = clean(worst, 9) if worst is not None else None
        out[f"choice_flips_{name}"] = flips
        out[f"compared_{name}"] = compared
    out["note"] = (
        "same_split compares serial with mode split (same batch boundaries, no reuse): it must be 0. "
        "vs_full compares with whole-prompt evaluation, whose other batch shapes round differently."
    )
    return out

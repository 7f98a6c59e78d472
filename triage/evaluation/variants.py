"""Every debiasing variant from one scoring pass.

A ticket is scored once with every cyclic ordering; each variant is a different
reading of those same readouts:

* ``raw``: the pack (identity) ordering's readout alone, as if scored with
  ``orderings="none"``.
* ``cyclic``: all rotations combined (geometric mean, :func:`triage.lab.debias.combine`).
* ``cyclic+prior``: ``cyclic`` with the content-free prior divided out
  (the prior is the same combination for an "N/A" ticket, as :func:`triage.lab.score.prior`).
* ``calibrated``: a fitted :class:`~triage.scoring.calibrate.Calibration` on top of
  ``cyclic`` (or ``cyclic+prior`` when it was fitted with the prior).
* ``raw+calibrated``: a calibration fitted on ``raw`` (what scoring with
  ``orderings="none"`` and a calibration would give, at one tail per criterion).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from triage.domain.pack import Criterion
from triage.lab import debias
from triage.learning.cache import Outcome, Reads
from triage.learning.scorer import identity_read

RAW, CYCLIC, PRIOR, CALIBRATED = "raw", "cyclic", "cyclic+prior", "calibrated"
RAW_CALIBRATED = "raw+calibrated"  # a calibration fitted on the pack-order readout alone
RAW_PRIOR = "raw+prior"  # the label readout with the content-free prior divided out
LEARNED = "learned"  # a learned head (triage.scoring.head) on the label readout's features and log-probs
VARIANTS = (RAW, CYCLIC, PRIOR, RAW_PRIOR, CALIBRATED, RAW_CALIBRATED, LEARNED)


def combined(reads: Reads) -> np.ndarray:
    """All orderings combined in option space (what the engine reports)."""
    return debias.combine([debias.to_option_space(lp, order) for order, lp, _ in reads])


def prior_from(outcome: Outcome) -> dict[str, np.ndarray]:
    """The content-free prior per criterion from the "N/A" ticket's outcome."""
    return {cid: combined(reads) for cid, reads in outcome.readouts.items()}


@dataclass
class CriterionReadings:
    """One criterion over many rows: the base log-probs of each variant and readout stats."""

    criterion: Criterion
    raw: np.ndarray  # (n, k)
    cyclic: np.ndarray
    prior: np.ndarray | None  # cyclic with the prior divided out, when a prior is known
    per_order_argmax: list[list[int]]  # per row, argmax option of each ordering, pack order first
    raw_coverage: list[float]
    coverage: list[float]  # per row, mean over orderings

    def base(self, prior: bool, orderings: str = "cyclic") -> np.ndarray:
        """The log-probs a calibration fitted with these options applies to."""
        if prior:
            if self.prior is None:
                raise ValueError("no prior was computed")
            return self.prior
        if orderings == "none":
            return self.raw
        return self.cyclic


def readings(
    criterion: Criterion, outcomes: Sequence[Outcome], prior: dict[str, np.ndarray] | None
) -> CriterionReadings:
    """Collect one criterion's readings from every row's outcome."""
    k = len(criterion.options)
    raw, cyc, pri, flips, raw_cov, cov = [], [], [], [], [], []
    for out in outcomes:
        reads = out.readouts[criterion.id]
        r, rc = identity_read(reads)
        c = combined(reads)
        raw.append(r)
        raw_cov.append(rc)
        cyc.append(c)
        if prior is not None:
            pri.append(debias.divide_prior(c, prior[criterion.id]))
        ident = [i for i, (o, _, _) in enumerate(reads) if tuple(o) == tuple(sorted(o))][0]
        ordered = [reads[ident]] + [rd for i, rd in enumerate(reads) if i != ident]
        flips.append([int(np.argmax(debias.to_option_space(lp, o))) for o, lp, _ in ordered])
        cov.append(float(np.mean([c_ for _, _, c_ in reads])))
    shape = (len(outcomes), k)
    return CriterionReadings(
        criterion,
        np.asarray(raw).reshape(shape),
        np.asarray(cyc).reshape(shape),
        np.asarray(pri).reshape(shape) if prior is not None else None,
        flips,
        raw_cov,
        cov,
    )

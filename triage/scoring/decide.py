"""Deciding one criterion from its raw readouts: learned head, else calibration, else zero-shot.

The readouts of every ordering are mapped back to option space and averaged
(:mod:`triage.scoring.debias`). Then the first that covers the criterion decides: the
learned ``head`` (label readout; it reads the raw readout and the answer position's
features), else the content-free prior and the ``calibration``, else the readout itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from triage.domain.pack import Pack
from triage.domain.result import CriterionResult, OptionScore
from triage.scoring import debias
from triage.scoring.head import Head
from triage.scoring.readout import LOW_COVERAGE, Reader, Readouts
from triage.scoring.tokenizer import Tokenizer


class Calibration(Protocol):
    """What deciding needs of a calibration (:class:`triage.scoring.calibrate.Calibration`)."""

    name: str

    def covers(self, criterion_id: str) -> bool: ...

    def apply(self, criterion_id: str, logprobs: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class Decider:
    """Turns a criterion's readouts into its :class:`CriterionResult`."""

    pack: Pack
    tokenizer: Tokenizer
    prior: dict[str, np.ndarray] | None = None
    calibration: Calibration | None = None
    head: Head | None = None

    def result(self, ci: int, acc: Readouts, reader: Reader) -> CriterionResult:
        """The result of criterion ``ci`` from its readouts ``acc``, read by ``reader``."""
        crit = self.pack.criteria[ci]
        per_order = [debias.to_option_space(r.position_logprobs, o) for o, r in zip(acc.orders, acc.reads, strict=True)]
        combined, source = self._decide(crit.id, debias.combine(per_order), acc)
        probs = np.exp(combined)
        probs = probs / probs.sum()
        ranked = np.argsort(-probs)
        choice = int(ranked[0])
        first_argmax = int(np.argmax(per_order[0]))
        flips = sum(int(np.argmax(lp)) != first_argmax for lp in per_order[1:])
        coverage = float(np.mean([r.coverage for r in acc.reads]))
        return CriterionResult(
            id=crit.id,
            question=crit.question,
            choice=crit.options[choice].id,
            options=[OptionScore(o.id, o.label, float(probs[i])) for i, o in enumerate(crit.options)],
            margin=float(probs[ranked[0]] - probs[ranked[1]]),
            coverage=coverage,
            tail_tokens=acc.tokens,
            tail_ms=acc.ms,
            orderings=len(acc.orders),
            top_token=self.tokenizer.decode([acc.reads[0].top_token]),
            raw_choice=crit.options[first_argmax].id,
            order_flips=flips,
            readout=reader.kind(ci),
            source=source,
            index=ci,
            warnings=[reader.low_coverage(coverage)] if coverage < LOW_COVERAGE and _warns(reader, ci) else [],
        )

    def _decide(self, cid: str, combined: np.ndarray, acc: Readouts) -> tuple[np.ndarray, str]:
        if self.head is not None and self.head.covers(cid) and acc.reads[0].features is not None:
            # fitted on the raw readout (no prior, no calibration): see triage.learning.learn
            return self.head.apply(cid, acc.reads[0].features, combined), self.head.criteria[cid].source
        source = "zero-shot"
        if self.prior is not None:
            combined = debias.divide_prior(combined, self.prior[cid])
        if self.calibration is not None and self.calibration.covers(cid):
            combined = self.calibration.apply(cid, combined)
            source = "calibrated"
        return combined, source


def _warns(reader: Reader, ci: int) -> bool:
    """Whether a low coverage is worth a warning (not at the shared read position: no question was asked there)."""
    warns = getattr(reader, "warns_coverage", None)
    return True if warns is None else bool(warns(ci))

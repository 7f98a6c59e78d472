"""Deciding one criterion from its readings: learned head, else calibration, else zero-shot.

The readout combines a criterion's readings into one answer in option space
(:meth:`~triage.scoring.readout.ReadoutKind.combine`). Then the first that covers the criterion
decides: the learned ``head`` (label readout; it reads the raw answer and the answer position's
features), else the ``calibration``, else the answer itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from triage.domain.pack import Pack
from triage.domain.result import CriterionResult, OptionScore
from triage.scoring.head import Head
from triage.scoring.readout import LOW_COVERAGE, Combined, Reader, Readings
from triage.scoring.tokenizer import Tokenizer


class Calibrator(Protocol):
    """What deciding needs of a calibration (:class:`triage.scoring.calibrate.Calibration`)."""

    name: str

    def covers(self, criterion_id: str) -> bool: ...

    def apply(self, criterion_id: str, logprobs: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class Decider:
    """Turns a criterion's combined readings into its :class:`CriterionResult`."""

    pack: Pack
    tokenizer: Tokenizer
    calibration: Calibrator | None = None
    head: Head | None = None

    def result(self, ci: int, acc: Readings, answer: Combined, reader: Reader) -> CriterionResult:
        """The result of criterion ``ci`` from its readings ``acc`` (combined: ``answer``), read by ``reader``."""
        crit = self.pack.criteria[ci]
        decided, source = self._decide(crit.id, answer, acc)
        probs = np.exp(decided)
        probs = probs / probs.sum()
        ranked = np.argsort(-probs)
        choice = int(ranked[0])
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
            orderings=len(acc.reads),
            top_token=self.tokenizer.decode([acc.reads[0].top_token]),
            raw_choice=crit.options[answer.raw_choice].id,
            order_flips=answer.flips,
            readout=reader.kind(ci),
            source=source,
            index=ci,
            warnings=[reader.low_coverage(coverage)] if coverage < LOW_COVERAGE and _warns(reader, ci) else [],
        )

    def _decide(self, cid: str, answer: Combined, acc: Readings) -> tuple[np.ndarray, str]:
        if self.head is not None and self.head.covers(cid) and acc.reads[0].features is not None:
            # fitted on the raw readout (no prior, no calibration): see triage.learning.learn
            return self.head.apply(cid, acc.reads[0].features, answer.logprobs), self.head.criteria[cid].source
        if self.calibration is not None and self.calibration.covers(cid):
            return self.calibration.apply(cid, answer.base), "calibrated"
        return answer.base, "zero-shot"


def _warns(reader: Reader, ci: int) -> bool:
    """Whether a low coverage is worth a warning (not at the shared read position: no question was asked there)."""
    warns = getattr(reader, "warns_coverage", None)
    return True if warns is None else bool(warns(ci))

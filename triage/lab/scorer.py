"""The lab's readings scored into the readout cache: :class:`LabScorer` is the product's
:class:`~triage.learning.scorer.Scorer` reading what eval, calibrate and learn measure beside it (the
letter readout in every rotation, serially), through the engine's seams (:mod:`triage.lab.score`).

The cache keys are the ones the scorer always wrote (orderings, then ``@mode`` but for serial), so
readouts cached before the lab moved out of the product are still hits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from triage.domain.ticket import Ticket
from triage.lab.options import LabOptions, Mode, Orderings, as_readout, effective_orderings
from triage.learning.scorer import Scorer
from triage.scoring.cue import TAIL

if TYPE_CHECKING:
    from triage.domain.result import TicketResult
    from triage.scoring.prompt import PromptBuilder
    from triage.scoring.run import RawReadouts

ORDERINGS: Orderings = "cyclic"  # the letter readout is always asked in every rotation: raw is the identity's alone


def orderings_for(readout: str) -> Orderings:
    """What eval asks: every rotation for letters; the label readout has no option order."""
    return effective_orderings(readout, ORDERINGS)


def mode_for(readout: str) -> Mode:
    """How eval scores: the label readout as `triage score` and the app do (fanout), so that calibrations and
    learned heads are fitted on the numbers they will be applied to; letters serially, one rotation after
    another, as they were measured before the label readout."""
    return "fanout" if readout == "label" else "serial"


class LabScorer(Scorer):
    """:class:`~triage.learning.scorer.Scorer` with the lab's readouts: ``label`` (as the product) or ``letter``."""

    def reading(self, readout: str) -> tuple[str, str]:
        name = as_readout(readout)
        return orderings_for(name), mode_for(name)

    @property
    def options(self) -> LabOptions:
        """The lab's options this scorer scores with."""
        return LabOptions(
            mode=mode_for(self.readout), orderings=orderings_for(self.readout), readout=as_readout(self.readout)
        )

    def decode(self, ticket: Ticket, features: bool) -> tuple[TicketResult, RawReadouts, dict[str, np.ndarray]]:
        from triage.lab import score as lab

        opts = self.options
        if self.read != TAIL:
            return lab.readouts_and_features(self.engine, ticket, self.pack, opts, read=self.read)
        if features:
            return lab.readouts_and_features(self.engine, ticket, self.pack, opts)
        result, raw = lab.raw_readouts(self.engine, ticket, self.pack, opts)
        return result, raw, {}

    def builder(self) -> PromptBuilder:
        from triage.lab.seams import plain_readout

        return self.engine.builder(self.pack, plain_readout(self.options))

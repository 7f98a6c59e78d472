"""The lab's options: :class:`LabOptions`, and the one place that names modes, readouts, orderings.

Every choice list (argparse ``choices`` of bench, eval and calibrate, messages) is derived from
the ``Literal`` types here, never retyped. ``LabOptions()`` scores as the product does
(``ScoreOptions()``: label readout, fanout, no prior).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from triage.scoring import options as product
from triage.scoring.options import ReadAs, ScoreOptions, check_choice

Mode = Literal["fanout", "serial"]
"""The lab's own schedules: ``fanout``, every tail in one batch (the product's); ``serial``, tails in turn."""
BenchMode = Literal["fanout", "serial", "full", "split"]
"""Also bench's schedules: ``full``, every prompt whole (the baseline, :mod:`triage.lab.full`); ``split``,
serial's batch boundaries from an empty cache for each prompt (the exactness reference, :mod:`triage.lab.split`)."""
ReadoutName = Literal["label", "letter"]
"""``label``: options by name, one tail per criterion (the product's); ``letter``: A/B/C in the tail."""
Orderings = Literal["none", "cyclic"]
"""Letter readout: pack order only, or every rotation."""

MODES: tuple[str, ...] = get_args(Mode)
BENCH_MODES: tuple[str, ...] = get_args(BenchMode)
READOUTS: tuple[str, ...] = get_args(ReadoutName)
ORDERINGS: tuple[str, ...] = get_args(Orderings)

DEFAULT_MODE: Mode = "fanout"  # the product's (scoring.options.DEFAULT_MODE)
DEFAULT_READOUT: ReadoutName = "label"  # the product's (scoring.options.DEFAULT_READOUT)
DEFAULT_ORDERINGS: Orderings = "cyclic"  # letter readout only; the label readout has no option order
assert (DEFAULT_MODE, DEFAULT_READOUT) == (product.DEFAULT_MODE, product.DEFAULT_READOUT)


def as_readout(value: object, source: str | None = None) -> ReadoutName:
    """``value`` as a :data:`ReadoutName`, checked as :func:`check_choice` checks it."""
    return "letter" if check_choice(value, READOUTS, "readout", source) == "letter" else "label"


def effective_orderings(readout: str, orderings: Orderings) -> Orderings:
    """The one rule: the label readout asks no option order (``none``); letters ask ``orderings``."""
    return "none" if readout == "label" else orderings


@dataclass(frozen=True)
class LabOptions:
    """How the lab scores: the readout, the mode, orderings, prior, and the product's ``criteria``.

    The label readout has no option order, so ``orderings`` does not apply to it
    (:attr:`effective_orderings` is ``none``).
    """

    mode: BenchMode = DEFAULT_MODE
    orderings: Orderings = DEFAULT_ORDERINGS
    prior: bool = False
    criteria: tuple[str, ...] | None = None
    readout: ReadoutName = DEFAULT_READOUT

    def __post_init__(self) -> None:
        check_choice(self.readout, READOUTS, "readout")
        check_choice(self.mode, BENCH_MODES, "mode")
        check_choice(self.orderings, ORDERINGS, "orderings")

    @property
    def effective_orderings(self) -> Orderings:
        """The orderings actually asked: ``none`` for the label readout."""
        return effective_orderings(self.readout, self.orderings)

    @property
    def product(self) -> ScoreOptions:
        """The product's part of these options (what the engine takes as ``options``)."""
        return ScoreOptions(criteria=self.criteria)

    @property
    def read_as(self) -> ReadAs:
        """What these options' readings are (results, calibrations and fits name them so)."""
        return ReadAs(self.readout, self.effective_orderings, self.prior)

"""The lab's objects for the engine's two seams, from :class:`~triage.lab.options.LabOptions`.

:func:`schedule_for` names the schedule (``fanout``, the product's; ``serial``); :func:`plain_readout`
the readout strategy without a prior (``label``, the product's; ``letter`` in the options' orderings).
The prior is layered on by :mod:`triage.lab.prior`; :mod:`triage.lab.score` puts them together.
"""

from __future__ import annotations

from triage.errors import TriageError
from triage.lab.letter import LetterReadout
from triage.lab.options import MODES, LabOptions
from triage.lab.serial import Serial
from triage.scoring.readout import LABEL, ReadoutKind
from triage.scoring.schedule import Fanout, Schedule

_BENCH_ONLY = {
    "full": ("baseline", "triage.lab.full.Full()"),
    "split": ("exactness reference", "triage.lab.split.Split()"),
}


def schedule_for(options: LabOptions) -> Schedule:
    """The schedule ``options.mode`` names, chosen once per score: ``fanout`` or ``serial``.

    Raises:
        TriageError: ``full`` or ``split``, bench's schedules, which only bench and the tests run
            (they pass the schedule in).
    """
    if options.mode == "fanout":
        return Fanout()
    if options.mode == "serial":
        return Serial()
    what, schedule = _BENCH_ONLY.get(options.mode, ("own schedule", "it"))
    raise TriageError(
        f"mode {options.mode!r} is bench's {what}, not a scoring mode",
        hint=f"use {' or '.join(MODES)}; bench and the tests pass {schedule} as the schedule",
        exit_code=2,
    )


def plain_readout(options: LabOptions) -> ReadoutKind:
    """The readout ``options`` name, without a prior: the product's label, or letters in their orderings."""
    return LABEL if options.readout == "label" else LetterReadout(options.effective_orderings)


def mode_name(options: LabOptions) -> str:
    """The mode as results, priors and their file names say it: serial's is its schedule's, ``serial/truncate``."""
    return Serial.name if options.mode == "serial" else options.mode

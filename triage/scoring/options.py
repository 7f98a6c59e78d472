"""How the product scores a ticket: :class:`ScoreOptions`, and how its readings are named.

``ScoreOptions()`` is what ``triage score``, ``triage serve``, the app and the Ray workers run:
options read by name (the label readout), every tail in one batch (``fanout``), no prior. Its one
field, ``criteria`` (``--criteria``), chooses which criteria are scored. The measuring instruments
(the letter readout and its option orderings, serial, the content-free prior, bench's schedules)
live in :mod:`triage.lab` and plug into the engine through its schedule and readout seams; no flag
of ``score`` or ``serve`` and no config key reaches them (:data:`triage.settings.RETIRED`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from triage.errors import InputError, TriageError

if TYPE_CHECKING:
    from triage.domain.pack import Pack

DEFAULT_MODE = "fanout"
"""The product's schedule, as its results name it (``mode``)."""
DEFAULT_READOUT = "label"
"""The product's readout, as its results and prompt format name it."""
DEFAULT_ORDERINGS = "none"
"""The product's option orderings, as its results name them: the label readout has no option order."""


def check_choice(value: object, choices: tuple[str, ...], what: str, source: str | None = None) -> str:
    """``value`` when it is one of ``choices``.

    Args:
        what: the option's name (``mode``, ``readout``, ...).
        source: where the value came from (``--readout``); default ``what``.

    Raises:
        TriageError: any other value, naming its source and the choices (exit code 2).
    """
    if isinstance(value, str) and value in choices:
        return value
    raise TriageError(f"{source or what}: unknown {what} {value!r}; use one of {', '.join(choices)}", exit_code=2)


@dataclass(frozen=True)
class ReadAs:
    """What a score's readings are, as results, calibrations and fits name them.

    The product's is :data:`PRODUCT_READ` (``label``, orderings ``none``, no prior); the lab's
    readouts say theirs (:mod:`triage.lab`).
    """

    readout: str = DEFAULT_READOUT
    orderings: str = DEFAULT_ORDERINGS
    prior: bool = False


PRODUCT_READ = ReadAs()


@dataclass(frozen=True)
class ScoreOptions:
    """What the product's score may choose: which criteria.

    ``criteria`` scores only those criteria (ids, any order; results come in pack
    order). The prompts, and so the shared prefix, are those of the whole pack: a
    subset costs fewer tails, and the smaller batch makes fanout's numbers drift
    (docs/engine.md, bench/criteria_drift.py).
    """

    criteria: tuple[str, ...] | None = None


def parse_criteria(arg: str | None, pack: Pack, source: str = "--criteria") -> tuple[str, ...] | None:
    """``--criteria a,b`` as ids of ``pack``, checked before any model loads.

    Raises:
        InputError: no id given, or an id the pack does not have (naming the ones it has).
    """
    if arg is None:
        return None
    ids = tuple(dict.fromkeys(part.strip() for part in arg.split(",") if part.strip()))
    if not ids:
        ids_of = ", ".join(c.id for c in pack.criteria)
        raise InputError(f"{source} names no criteria", hint=f"use ids of pack {pack.name!r}: {ids_of}")
    pack.criterion_indices(ids)  # now, before the model loads
    return ids

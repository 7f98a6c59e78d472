"""How a ticket is scored: :class:`ScoreOptions`, and the one place that names modes, readouts, orderings.

``ScoreOptions()`` is the product, and the only options ``triage score``, ``triage serve``, the
app and the Ray workers run: options read by name (the label readout), every tail in one batch
(``fanout``), no prior; ``criteria`` (``--criteria``) only chooses which criteria are scored. The
other fields are measuring instruments, set only through this programmatic API: ``triage bench``
times serial and the letter readout against it (and full, serial's restore and split, its own
schedules, which it passes in: :mod:`triage.bench`), and ``triage eval`` / ``triage calibrate``
compare the letter readout and the content-free prior (their ``--readout`` and ``--prior``). No
flag of ``score`` or ``serve`` and no config key sets them (:data:`triage.settings.RETIRED`).

Every choice list (argparse ``choices`` of bench, eval and calibrate, messages) is derived from
the ``Literal`` types here, never retyped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from triage.errors import InputError, TriageError

if TYPE_CHECKING:
    from triage.domain.pack import Pack

Mode = Literal["fanout", "serial"]
"""The engine's own schedules: ``fanout``, every tail in one batch; ``serial``, tails in turn (eval's letters)."""
BenchMode = Literal["fanout", "serial", "full", "split"]
"""Also bench's schedules, run only when passed in as the schedule: ``full``, every prompt whole (the
baseline, :mod:`triage.bench.full`); ``split``, serial's batch boundaries from an empty cache for each
prompt (the exactness reference, :mod:`triage.bench.split`)."""
Readout = Literal["label", "letter"]
"""``label``: options by name, one tail per criterion; ``letter``: A/B/C in the tail."""
Orderings = Literal["none", "cyclic"]
"""Letter readout: pack order only, or every rotation."""

MODES: tuple[str, ...] = get_args(Mode)
BENCH_MODES: tuple[str, ...] = get_args(BenchMode)
READOUTS: tuple[str, ...] = get_args(Readout)
ORDERINGS: tuple[str, ...] = get_args(Orderings)

DEFAULT_MODE: Mode = "fanout"  # measured faster than serial with the label readout (bench/README.md)
DEFAULT_READOUT: Readout = "label"
DEFAULT_ORDERINGS: Orderings = "cyclic"  # letter readout only; the label readout has no option order


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


def as_readout(value: object, source: str | None = None) -> Readout:
    """``value`` as a :data:`Readout`, checked as :func:`check_choice` checks it."""
    return "letter" if check_choice(value, READOUTS, "readout", source) == "letter" else "label"


@dataclass(frozen=True)
class ScoreOptions:
    """How to score: the readout, the mode, orderings, prior.

    The defaults are what the product runs; bench and eval set the others (see the module). The
    label readout has no option order, so ``orderings`` does not apply to it
    (:attr:`effective_orderings` is ``none``).

    ``criteria`` scores only those criteria (ids, any order; results come in pack
    order). The prompts, and so the shared prefix, are those of the whole pack: a
    subset costs fewer tails. In serial the numbers are the whole pack's; in fanout
    the smaller batch makes them drift (docs/engine.md, bench/criteria_drift.py).
    """

    mode: BenchMode = DEFAULT_MODE
    orderings: Orderings = DEFAULT_ORDERINGS
    prior: bool = False
    criteria: tuple[str, ...] | None = None
    readout: Readout = DEFAULT_READOUT

    @property
    def effective_orderings(self) -> Orderings:
        """The orderings actually asked: ``none`` for the label readout."""
        return effective_orderings(self.readout, self.orderings)

    def __post_init__(self) -> None:
        check_choice(self.readout, READOUTS, "readout")
        check_choice(self.mode, BENCH_MODES, "mode")
        check_choice(self.orderings, ORDERINGS, "orderings")


def effective_orderings(readout: str, orderings: Orderings) -> Orderings:
    """The one rule: the label readout asks no option order (``none``); letters ask ``orderings``."""
    return "none" if readout == "label" else orderings


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

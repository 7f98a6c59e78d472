"""How a ticket is scored: the one place that names modes, readouts, orderings and strategies.

Every choice list (argparse ``choices``, config validation, messages) is derived from
the ``Literal`` types here, never retyped. ``ScoreOptions()`` is what the product runs
(``triage score``, the app, eval, Ray): the label readout in ``fanout``. Tests and bench
that need another mode ask for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from triage.errors import TriageError

Mode = Literal["fanout", "serial", "full"]
"""``fanout``: every tail in one batch; ``serial``: tails in turn; ``full``: every prompt whole (the baseline)."""
BenchMode = Literal["fanout", "serial", "full", "split"]
"""``split``: serial's batch boundaries from an empty cache for each prompt; bench and tests only."""
Readout = Literal["label", "letter"]
"""``label``: options by name, one tail per criterion; ``letter``: A/B/C in the tail."""
Orderings = Literal["none", "cyclic"]
"""Letter readout: pack order only, or every rotation."""
Strategy = Literal["truncate", "restore"]
"""Serial mode's way back to the prefix: drop the tail's cells, or reload a saved state."""

MODES: tuple[str, ...] = get_args(Mode)
BENCH_MODES: tuple[str, ...] = get_args(BenchMode)
READOUTS: tuple[str, ...] = get_args(Readout)
ORDERINGS: tuple[str, ...] = get_args(Orderings)
STRATEGIES: tuple[str, ...] = get_args(Strategy)

DEFAULT_MODE: Mode = "fanout"  # measured faster than serial with the label readout (bench/README.md)
DEFAULT_READOUT: Readout = "label"
DEFAULT_ORDERINGS: Orderings = "cyclic"  # letter readout only; the label readout has no option order
DEFAULT_STRATEGY: Strategy = "truncate"


def check_choice(value: object, choices: tuple[str, ...], what: str, source: str | None = None) -> str:
    """``value`` when it is one of ``choices``.

    Args:
        what: the setting's name (``mode``, ``readout``, ...).
        source: where the value came from (``--mode``, ``config /path/config.toml: mode``); default ``what``.

    Raises:
        TriageError: any other value, naming its source and the choices (exit code 2).
    """
    if isinstance(value, str) and value in choices:
        return value
    raise TriageError(f"{source or what}: unknown {what} {value!r}; use one of {', '.join(choices)}", exit_code=2)


@dataclass(frozen=True)
class ScoreOptions:
    """How to score: the readout, the mode, serial's way back to the prefix, orderings, prior.

    The defaults are what the product runs. The label readout has no option order, so
    ``orderings`` does not apply to it (:attr:`effective_orderings` is ``none``).

    ``criteria`` scores only those criteria (ids, any order; results come in pack
    order). The prompts, and so the shared prefix and the scores, are those of the
    whole pack: a subset costs fewer tails and gives the same numbers.
    """

    mode: BenchMode = DEFAULT_MODE
    strategy: Strategy = DEFAULT_STRATEGY
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
        check_choice(self.strategy, STRATEGIES, "serial strategy")
        check_choice(self.orderings, ORDERINGS, "orderings")


def effective_orderings(readout: str, orderings: str) -> Orderings:
    """The one rule: the label readout asks no option order (``none``); letters ask ``orderings``."""
    return "none" if readout == "label" else orderings  # type: ignore[return-value]

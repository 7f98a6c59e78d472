"""Option orderings and how their readings combine (the letter readout's).

A small model leans on option position ("A" wins too often). Asking the same
criterion with the options rotated and averaging in log space cancels that lean.
Only the tail changes between orderings, so each extra ordering costs one tail.

An *order* is a tuple of option indices: ``order[j]`` is the option shown at
letter ``j``. :func:`combine` maps each position's probability back to its option.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from triage.lab.options import ORDERINGS
from triage.scoring.readout import log_normalize

__all__ = ["combine", "divide_prior", "log_normalize", "orders_for", "to_option_space"]


def orders_for(n_options: int, kind: str) -> list[tuple[int, ...]]:
    """The option orders to ask for one criterion.

    Args:
        n_options: how many options the criterion has.
        kind: ``none`` (pack order only) or ``cyclic`` (every rotation).

    Raises:
        ValueError: unknown kind.
    """
    base = tuple(range(n_options))
    if kind == "none":
        return [base]
    if kind == "cyclic":
        return [base[r:] + base[:r] for r in range(n_options)]
    raise ValueError(f"unknown orderings {kind!r}; use one of {', '.join(ORDERINGS)}")


def to_option_space(position_logprobs: np.ndarray, order: Sequence[int]) -> np.ndarray:
    """Reindex log-probabilities from letter positions to option indices."""
    out = np.empty(len(order), dtype=np.float64)
    out[np.asarray(order)] = position_logprobs
    return out


def combine(option_logprobs: Sequence[np.ndarray]) -> np.ndarray:
    """Average per-ordering option log-probabilities in log space; renormalise.

    The geometric mean over orderings: a position preference that multiplies
    every option's probability in turn cancels out.
    """
    return log_normalize(np.mean(np.stack(option_logprobs), axis=0))


def divide_prior(option_logprobs: np.ndarray, prior_logprobs: np.ndarray) -> np.ndarray:
    """Divide out a content-free prior (what the model says about an empty ticket)."""
    return log_normalize(option_logprobs - prior_logprobs)
